-- multi_release: release a chunk of several plain locks at once and wake their waiters (MultiLock).
-- Every name is an ordinary Lock (_multi.lua); only the names still this token's are
-- deleted, others' keys are untouched.
-- KEYS[1] lock key      of name 1: string "<token>|<fence>|<meta>" (multi_acquire.lua)
-- KEYS[2] waiters key   of name 1: marker "some client is waiting" (see lock_acquire.lua)
-- KEYS[3] wake channel  of name 1: PUBLISHed "*" when its marker is there (see
--                       lock_release.lua); declared as a key, never written as one
-- KEYS[4] done key      of name 1: the release remembered (see lock_release.lua), written
--                       for the first name of the chunk that was ours
-- KEYS[5] queue         of name 1: list of queued Lock and FairLock waiters
--                       (fair_acquire.lua)
-- KEYS[6] waiter leases of name 1: sorted set token -> end of its waiter lease, server ms
--         and so on, six keys a name: name i's are KEYS[6 * i - 5] (lock key),
--         KEYS[6 * i - 4] (waiters key), KEYS[6 * i - 3] (wake channel), KEYS[6 * i - 2]
--         (done key), KEYS[6 * i - 1] (queue), KEYS[6 * i] (waiter leases), for
--         i = 1 .. n, where n = #KEYS / 6 (one slot: in a Cluster the client sends one
--         call per slot)
-- ARGV[1] token         owner token, one for all the names
-- ARGV[2] done_ms       how long the done key remembers the release, milliseconds
-- ARGV[3] grant_suffix  a name's grant channels are <lock key> .. grant_suffix ..
--                       ":<process tag>" (grant_suffix ":grant"; see _queue.lua)
-- returns {"ok", n, 0}          all released, one wake-up published per name with waiters
--                               (marked ones "*" on the wake channel; a queue's first
--                               live waiter "<tag>|0" on its process's grant channel
--                               (_queue.lua: grant_channel): it then tries again at once,
--                               and takes it)
--         {status, released, i} name i was the first not ours ("gone" or "taken"); the
--                               ones still ours were released, others' keys untouched
--         A release that finds none of its names but its own release in a done key (a
--         client retrying after the reply was lost) answers what that one answered.
--         error "NOPERM redislock: <COMMAND> ..."  the ACL refused a command; nothing is
--                               left half-done (the release still holds every name)

-- include: _acl.lua
-- include: _queue.lua
-- include: _multi.lua

local mine = ARGV[1] .. '|'
local len = #mine
local locks, values = chunk_values(KEYS, 6)  -- name i's lock key is KEYS[6 * i - 5]
if not locks then return values end
local n = #locks

-- ours[i]: name i is still ours; gone and markers: the lock keys and waiters keys of those
local ours, gone, markers = {}, {}, {}
local done  -- the done key of the first name still ours
local status, first = 'ok', 0
for i = 1, n do
  local v = values[i]
  if v and string.sub(v, 1, len) == mine then
    ours[i] = true
    gone[#gone + 1] = locks[i]
    markers[#markers + 1] = KEYS[6 * i - 4]
    done = done or KEYS[6 * i - 2]
  elseif first == 0 then
    first = i
    status = v and 'taken' or 'gone'
  end
end
local memo = mine .. 'rel|'
if not done then
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
-- Each queue's first live waiter (a dead one's waiter lease has ended; the queue's
-- scripts drop it).
local heads, now = {}, nil
for i = 1, n do
  local k = 0
  while ours[i] do
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
      local channel = grant_channel(locks[i] .. ARGV[3], head)
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
local j = 0  -- name i's place in markers (and so in waiting)
for i = 1, n do
  if ours[i] then
    j = j + 1
    if waiting[j] then
      r = redis.pcall('PUBLISH', KEYS[6 * i - 3], '*')
      if bad(r) then return failed('PUBLISH', r) end
    end
  end
end
r = redis.pcall('SET', done, memo .. status .. '|' .. #gone .. '|' .. first, 'PX', ARGV[2])
if bad(r) then return failed('SET', r) end
r = redis.pcall('DEL', unpack(gone))
if bad(r) then
  redis.pcall('SET', done, '', 'PX', 1)  -- not released: forget the release
  return failed('DEL', r)
end
return {status, #gone, first}
