-- _multi: shared by MultiLock's scripts (multi_acquire.lua, multi_release.lua,
-- multi_extend.lua, multi_status.lua), written into each one where it says
-- "-- include: _multi.lua", after "-- include: _acl.lua" (uses its bad() and failed());
-- not a script of its own.
-- A chunk of n names, each an ordinary Lock: the same lock key, the same value
-- "<token>|<fence>|<meta>" with a PX TTL, the same fencing counter (_fence.lua). Each
-- script gets a fixed number of keys per name (its stride), name i's after name i-1's;
-- n stays far below Lua's unpack limit (about 8000): the client sends at most 1000 names
-- per call.
-- Keys and the commands run on them: the lock keys MGET. The keys are the caller's KEYS,
-- passed in.

-- The lock keys of a chunk of n names with stride keys a name in keys, each name's lock
-- key first (name i's is keys[stride * (i - 1) + 1]; n: #keys / stride if not given), and
-- their values in one MGET (nil for a name without a value, or whose key is not a
-- string): returns (locks, values), or (nil, error reply).
local function chunk_values(keys, stride, n)
  local locks = {}
  for i = 1, n or #keys / stride do
    locks[i] = keys[stride * (i - 1) + 1]
  end
  local values = redis.pcall('MGET', unpack(locks))
  if bad(values) then return nil, failed('MGET', values) end
  return locks, values
end

-- The reply for the first of names 1..n whose value (values[i]) does not start with mine
-- ("<token>|"): {"gone", 0, i} (no value) or {"taken", 0, i}; nil when all are ours.
local function first_not_ours(values, n, mine)
  for i = 1, n do
    local v = values[i]
    if not v then
      return {'gone', 0, i}
    end
    if string.sub(v, 1, #mine) ~= mine then
      return {'taken', 0, i}
    end
  end
  return nil
end
