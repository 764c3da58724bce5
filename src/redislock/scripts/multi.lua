-- multi: take, release, extend or check a chunk of several plain locks at once, all or nothing (MultiLock).
-- Every name is an ordinary Lock: the same keys, the same value "<token>|<fence>|<meta>" with
-- a PX TTL, the same fencing counter (_fence.lua) and done key, so lock_acquire.lua, lock_release.lua,
-- lock_status.lua and `redislock inspect` see each name exactly as if a Lock held it.
-- KEYS[1] lock key of the first name   string "<token>|<fence>|<meta>", always with a PX TTL
-- KEYS[2] acquire: its fence key (the slot counter, INCR per acquisition, never expires; names
--         of one slot share it); release: its waiters key
-- KEYS[3] acquire: its waiters key (marker, see lock_acquire.lua); release: its wake channel
--         (PUBLISHed "*", see lock_release.lua)
-- KEYS[4] release: its done key (see lock_release.lua; written for one name per chunk)
-- KEYS[5] release: its queue (list of queued Lock and FairLock waiters, see fair.lua)
-- KEYS[6] release: its waiter leases (sorted set token -> end of its waiter lease, server ms)
--         The keys of name i follow those of name i-1; keys per name by op:
--           acquire: lock, fence, waiters (3);  release: lock, waiters, wake, done, queue,
--           waiter leases (6);  extend, status: lock (1).
--         So name i's lock key is KEYS[stride * (i - 1) + 1].
--         extend with ARGV[8]: KEYS[n + 1] is the first name's done key.
-- ARGV[1] op            "acquire", "release", "extend" or "status"
-- ARGV[2] n             number of names in KEYS
-- ARGV[3] token         owner token (>= 32 hex chars, no '|'), one for all the names
-- ARGV[4] ttl_ms        acquire: lease length; extend: the amount (see ARGV[7]); milliseconds (integer >= 1)
-- ARGV[5] meta          acquire: holder metadata "<host>|<pid>|<acquired_unix_ms>"
-- ARGV[6] wait_ms       acquire: 0 for a single try; else how long a busy name's waiters marker lasts, milliseconds
-- ARGV[7] mode          extend: "add" (remaining + ARGV[4]), "set" (ARGV[4]) or "max" (at least ARGV[4])
-- ARGV[8] op_id         extend "add", optional: random per call; a call that finds its op_id in
--                       the first name's done key was applied already (as lock_extend.lua)
-- ARGV[9] done_ms       release, extend with ARGV[8]: how long the done key remembers it, milliseconds
-- ARGV[10] grant_suffix release: a name's grant channels are <lock key> .. grant_suffix ..
--                       ":<process tag>" (grant_suffix ":grant"; see _queue.lua, fair.lua)
-- returns acquire: {"ok", fence_1, ..., fence_n}  all n taken; fence_i is name i's new fencing token
--                  {"busy", pttl_ms, i}  name i is another owner's (pttl_ms its remaining TTL, -1: no
--                                        TTL); nothing was written but name i's waiters marker
--         release: {"ok", n, 0}          all released, one wake-up published per name with waiters
--                                        (marked ones "*" on the wake channel; a queue's first
--                                        live waiter "<tag>|0" on its process's grant
--                                        channel (_queue.lua: grant_channel): it then
--                                        tries again at once, and takes it)
--                  {status, released, i} name i was the first not ours ("gone" or "taken"); the
--                                        ones still ours were released, others' keys untouched
--                  A release that finds none of its names but its own release in a done key
--                  (a client retrying after the reply was lost) answers what that one answered.
--         extend:  {"ok", pttl_ms, 0}    all extended; pttl_ms is the least new TTL (a repeated
--                                        "add": the least TTL now, nothing added)
--         status:  {"ok", pttl_ms, 0}    all ours; pttl_ms is the least remaining TTL
--         extend, status: {"gone" or "taken", 0, i}  name i is not ours; nothing was changed
--         error "NOPERM redislock: <COMMAND> ..."  the ACL refused a command; nothing is left
--                  half-done (an acquire holds nothing, a release still holds every name)
--         error "WRONGTYPE ... (redislock key: <key>)"  a lock key holds another kind (a hash)
-- A name already held by this token counts as taken (its fence is read from its value, not
-- increased, its TTL set to ttl_ms again), so a retry of a chunk whose reply was lost
-- succeeds instead of waiting on itself.

-- include: _acl.lua
-- include: _fence.lua
-- include: _queue.lua

local op, n = ARGV[1], tonumber(ARGV[2])
local mine = ARGV[3] .. '|'
local len = #mine
local stride = 1
if op == 'acquire' then
  stride = 3
elseif op == 'release' then
  stride = 6
end

-- Name i's lock key is KEYS[stride * (i - 1) + 1]; one MGET reads them all. n stays far
-- below Lua's unpack limit (about 8000): the client sends at most 1000 names per call.
local locks = {}
for i = 1, n do
  locks[i] = KEYS[stride * (i - 1) + 1]
end
local values = redis.pcall('MGET', unpack(locks))
if bad(values) then return failed('MGET', values) end

if op == 'acquire' then
  -- Every name is checked before any is written, so a busy chunk leaves nothing behind.
  local present = 0
  for i = 1, n do
    local v = values[i]
    if v then
      present = present + 1
      if string.sub(v, 1, len) ~= mine then
        local r
        if ARGV[6] ~= '0' then
          r = redis.pcall('SET', KEYS[3 * i], '1', 'PX', ARGV[6])
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
      r = redis.pcall('PEXPIRE', locks[i], ARGV[4])
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
      r = redis.pcall('SET', locks[i], mine .. fence .. '|' .. ARGV[5], 'PX', ARGV[4])
      if bad(r) then return undo('SET', r) end
      set[#set + 1] = locks[i]
    end
    reply[i + 1] = fence
  end
  return reply
end

if op == 'release' then
  local ours, gone, markers = {}, {}, {}
  local status, first = 'ok', 0
  for i = 1, n do
    local v = values[i]
    if v and string.sub(v, 1, len) == mine then
      ours[#ours + 1] = i
      gone[#gone + 1] = locks[i]
      markers[#markers + 1] = KEYS[6 * i - 4]
    elseif first == 0 then
      first = i
      status = v and 'taken' or 'gone'
    end
  end
  local memo = mine .. 'rel|'
  if #ours == 0 then
    -- Nothing of ours left: was it our own release (its reply lost)? Answer as it did.
    local dones = {}
    for i = 1, n do
      dones[i] = KEYS[6 * i - 2]
    end
    local seen = redis.pcall('MGET', unpack(dones))
    if bad(seen) then return failed('MGET', seen) end
    for i = 1, n do
      local d = seen[i]
      if d and string.sub(d, 1, #memo) == memo then
        local s, released, at = string.match(string.sub(d, #memo + 1), '^(%a+)|(%d+)|(%d+)$')
        if s then
          return {s, tonumber(released), tonumber(at)}
        end
      end
    end
    return {status, 0, first}
  end
  -- Each queue's first live waiter (a dead one's waiter lease has ended; fair.lua drops it).
  local heads, now = {}, nil
  for j = 1, #ours do
    local i = ours[j]
    local k = 0
    while true do
      local head = redis.pcall('LINDEX', KEYS[6 * i - 1], k)
      if bad(head) then return failed('LINDEX', head) end
      if not head then break end
      if not now then
        local t = redis.pcall('TIME')
        if bad(t) then return failed('TIME', t) end
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      end
      local ends = redis.pcall('ZSCORE', KEYS[6 * i], head)
      if bad(ends) then return failed('ZSCORE', ends) end
      if ends and tonumber(ends) > now then
        local channel = grant_channel(locks[i] .. ARGV[10], head)
        if channel then heads[#heads + 1] = {channel, grant_tag(head) .. '|0'} end
        break
      end
      k = k + 1
    end
  end
  -- Writes, every prefix safe: the wake-ups, the done key, then one DEL of our names.
  local waiting = redis.pcall('MGET', unpack(markers))
  if bad(waiting) then return failed('MGET', waiting) end
  local r
  for _, g in ipairs(heads) do
    r = redis.pcall('PUBLISH', g[1], g[2])
    if bad(r) then return failed('PUBLISH', r) end
  end
  for j = 1, #ours do
    if waiting[j] then
      local wake = KEYS[6 * ours[j] - 3]
      r = redis.pcall('PUBLISH', wake, '*')
      if bad(r) then return failed('PUBLISH', r) end
    end
  end
  local done = KEYS[6 * ours[1] - 2]
  r = redis.pcall(
    'SET', done, memo .. status .. '|' .. #ours .. '|' .. first, 'PX', ARGV[9])
  if bad(r) then return failed('SET', r) end
  r = redis.pcall('DEL', unpack(gone))
  if bad(r) then
    redis.pcall('SET', done, '', 'PX', 1)  -- not released: forget the release
    return failed('DEL', r)
  end
  return {status, #ours, first}
end

if op == 'extend' or op == 'status' then
  for i = 1, n do
    local v = values[i]
    if not v then
      return {'gone', 0, i}
    end
    if string.sub(v, 1, len) ~= mine then
      return {'taken', 0, i}
    end
  end
  local memo = op == 'extend' and ARGV[7] == 'add' and KEYS[n + 1] and ARGV[8] and ARGV[8] ~= ''
    and mine .. ARGV[8]
  local again = false
  local r
  if memo then
    r = redis.pcall('GET', KEYS[n + 1])
    if bad(r) then return failed('GET', r) end
    again = r == memo
  end
  local least = -1
  for i = 1, n do
    local ms
    if op == 'extend' and ARGV[7] == 'set' then
      ms = tonumber(ARGV[4])
    else
      ms = redis.pcall('PTTL', locks[i])
      if bad(ms) then return failed('PTTL', ms) end
      if op == 'extend' and not again then
        local pttl = ms
        ms = tonumber(ARGV[4])
        if ARGV[7] == 'add' and pttl > 0 then
          ms = ms + pttl
        elseif ARGV[7] == 'max' and pttl > ms then
          ms = pttl
        end
      end
    end
    if op == 'extend' and not again then
      r = redis.pcall('PEXPIRE', locks[i], ms)
      if bad(r) then return failed('PEXPIRE', r) end
    end
    if least < 0 or ms < least then
      least = ms
    end
  end
  if memo and not again then
    r = redis.pcall('SET', KEYS[n + 1], memo, 'PX', ARGV[9])
    if bad(r) then return failed('SET', r) end
  end
  return {'ok', least, 0}
end

return redis.error_reply('unknown multi op ' .. tostring(op))
