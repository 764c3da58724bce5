-- multi_acquire: take a chunk of several plain locks at once, all or nothing (MultiLock).
-- Every name is an ordinary Lock (_multi.lua), so lock_acquire.lua, lock_release.lua,
-- lock_status.lua and `redislock inspect` see each name exactly as if a Lock held it.
-- KEYS[1] lock key      of name 1: string "<token>|<fence>|<meta>", always with a PX TTL
-- KEYS[2] fence key     of name 1: its slot counter (_fence.lua), INCR per acquisition,
--                       never expires; names of one slot share it
-- KEYS[3] waiters key   of name 1: marker "some client is waiting" (see lock_acquire.lua)
--         and so on, three keys a name: name i's are KEYS[3 * i - 2] (lock key),
--         KEYS[3 * i - 1] (fence key), KEYS[3 * i] (waiters key), for i = 1 .. n, where
--         n = #KEYS / 3 (one slot: in a Cluster the client sends one call per slot)
-- ARGV[1] token         owner token (>= 32 hex chars, no '|'), one for all the names
-- ARGV[2] ttl_ms        lease length, milliseconds (integer >= 1)
-- ARGV[3] meta          holder metadata "<host>|<pid>|<acquired_unix_ms>"
-- ARGV[4] wait_ms       how long a busy name's waiters marker lasts, milliseconds; 0 for
--                       a single try (no marker)
-- returns {"ok", fence_1, ..., fence_n}  all n taken; fence_i is name i's new fencing token
--         {"busy", pttl_ms, i}  name i is another owner's (pttl_ms its remaining TTL, -1: no
--                               TTL); nothing was written but name i's waiters marker
--         error "NOPERM redislock: <COMMAND> ..."  the ACL refused a command; the call
--                               holds nothing
--         error "WRONGTYPE ... (redislock key: <key>)"  a lock key holds another kind (a hash)
-- A name already held by this token counts as taken (its fence is read from its value, not
-- increased, its TTL set to ttl_ms again), so a retry of a chunk whose reply was lost
-- succeeds instead of waiting on itself.

-- include: _acl.lua
-- include: _fence.lua
-- include: _multi.lua

local mine = ARGV[1] .. '|'
local len = #mine
local locks, values = chunk_values(KEYS, 3)  -- name i's lock key is KEYS[3 * i - 2]
if not locks then return values end
local n = #locks

-- Every name is checked before any is written, so a busy chunk leaves nothing behind.
local present = 0
for i = 1, n do
  local v = values[i]
  if v then
    present = present + 1
    if string.sub(v, 1, len) ~= mine then
      local r
      if ARGV[4] ~= '0' then
        r = redis.pcall('SET', KEYS[3 * i], '1', 'PX', ARGV[4])
        if bad(r) then return failed('SET', r) end
      end
      r = redis.pcall('PTTL', locks[i])
      if bad(r) then return failed('PTTL', r) end
      return {'busy', r, i}
    end
  end
end
local r = redis.pcall('EXISTS', unpack(locks))
if bad(r) then return failed('EXISTS', r) end
if r ~= present then
  -- MGET reads a key of another type (an RLock's hash) as nil: name it in a WRONGTYPE.
  for i = 1, n do
    if not values[i] then
      r = redis.pcall('GET', locks[i])
      if bad(r) then
        if string.sub(r.err, 1, 9) == 'WRONGTYPE' then
          return redis.error_reply(r.err .. ' (redislock key: ' .. locks[i] .. ')')
        end
        return failed('GET', r)
      end
    end
  end
end
-- Writes: refresh the names already ours, then per new name its fence and its value; a
-- refused command deletes the names this call set (a refreshed TTL of our own hold is
-- harmless, a token issued in vain too).
local set = {}
local function undo(cmd, err)
  if #set > 0 then redis.pcall('DEL', unpack(set)) end
  return failed(cmd, err)
end
for i = 1, n do
  if values[i] then
    r = redis.pcall('PEXPIRE', locks[i], ARGV[2])
    if bad(r) then return undo('PEXPIRE', r) end
  end
end
local reply = {'ok'}
for i = 1, n do
  local fence, no
  if values[i] then
    fence = held_fence(values[i])
  else
    fence, no = next_fence(KEYS[3 * i - 1])
    if no then return undo(no, fence) end
    r = redis.pcall('SET', locks[i], mine .. fence .. '|' .. ARGV[3], 'PX', ARGV[2])
    if bad(r) then return undo('SET', r) end
    set[#set + 1] = locks[i]
  end
  reply[i + 1] = fence
end
return reply
