-- fair_release: release a Lock or FairLock this owner token holds and hand it to the next queued waiter.
-- While nobody is queued, Lock's compare-and-delete (the fast path below: no ACL preflight,
-- no TIME); else the lock goes straight to the next live waiter of the queue
-- (fair_acquire.lua): the release writes its hold and fencing token and publishes the
-- grant to it, so the waiter needs no further round trip and this client cannot take it
-- back.
-- KEYS[1] lock key      string "<token>|<fence>|<meta>" with a PX TTL (fair_acquire.lua)
-- KEYS[2] fence key     the name's slot counter (_fence.lua), INCR per grant, never expires
-- KEYS[3] queue         list of waiter tokens in arrival order (fair_acquire.lua)
-- KEYS[4] waiter leases sorted set: token -> server time (ms) at which its waiter lease ends
-- KEYS[5] waiter info   hash: token -> "<lease_ms>|<meta>" (what a grant writes for it)
-- KEYS[6] release ring  optional: the slot's release ring (_ring.lua), a bit per recent
--                       fencing token: set by its holder's release, read by a release sent
--                       again after a lost reply, cleared when a grant issues a token
-- KEYS[7] waiters key   optional (with KEYS[6]): MultiLock's marker "some client is
--                       waiting" (multi_acquire.lua); its presence makes a release publish
--                       one wake-up to KEYS[8] (_wake.lua)
-- KEYS[8] wake channel  with KEYS[7]: "P{N}:wake", PUBLISHed "*" (MultiLock's waiters listen
--                       on it, see lock_release.lua); declared as a key, never written as one
-- KEYS[9] delay key     optional (with KEYS[6..8]): the hold's lock-delay (fair_acquire.lua),
--                       DELeted with the lock key: a release ends the lock-delay too
-- ARGV[1] token         owner token
-- ARGV[2] fence         the hold's fencing token (from its acquire), for the release ring:
--                       a release sent again finds it released there; 0: not known
-- A grant PUBLISHes "<tag>|<fence>" to the waiter's process's grant channel of the name
-- (see fair_acquire.lua).
-- returns "ok"          released; the next live waiter, if any, was granted the lock; also
--                       "ok" for a repeat of this token's release (a client retrying after
--                       a lost reply) while its fence is in the release ring's window
--         "gone"        no lock key (expired or deleted); the next live waiter, if any,
--                       was granted it
--         "taken"       the key holds another owner's token; nothing was touched
--         error "NOPERM redislock: <COMMAND> ..."  the ACL refused a command; nothing was
--                       changed (the fast path: at most a spurious wake-up, as
--                       lock_release.lua)
-- include: _acl.lua
-- include: _ring.lua
-- include: _wake.lua

local token = ARGV[1]

-- The fencing token in lock value v ("<token>|<fence>|..."); 0 if it has none
local function value_fence(v)
  return tonumber(string.match(v, '^[^|]*|(%d+)|') or '0')
end

-- Fast path, while nobody is queued (every command through pcall, the writes in an order
-- whose every prefix is safe, as lock_release.lua): Lock's one round trip. Anything else
-- falls through to the queue below.
do
  local v = redis.pcall('GET', KEYS[1])
  if bad(v) then return failed('GET', v) end
  if v and string.sub(v, 1, #token + 1) == token .. '|' then
    -- one EXISTS for the queue and MultiLock's marker: usually neither is there
    local q
    if KEYS[7] then
      q = redis.pcall('EXISTS', KEYS[3], KEYS[7])
    else
      q = redis.pcall('EXISTS', KEYS[3])
    end
    if bad(q) then return failed('EXISTS', q) end
    if q > 0 and KEYS[7] then  -- which one: only the marker keeps the fast path
      q = redis.pcall('EXISTS', KEYS[3])
      if bad(q) then return failed('EXISTS', q) end
      if q == 0 then
        local r = wake_marked(KEYS[7], KEYS[8])
        if r then return r end
      end
    end
    if q == 0 then
      local r, cmd, marked
      local fence = value_fence(v)
      if KEYS[6] then
        r, cmd, marked = ring_mark(KEYS[6], KEYS[2], fence)
        if r then return failed(cmd, r) end
      end
      if KEYS[9] then  -- the lock-delay goes with a release (one DEL: both or neither)
        r = redis.pcall('DEL', KEYS[1], KEYS[9])
      else
        r = redis.pcall('DEL', KEYS[1])
      end
      if bad(r) then
        -- Not released: forget the release (the bit was just set; DEL failed).
        if marked then ring_unmark(KEYS[6], fence) end
        return failed('DEL', r)
      end
      return 'ok'
    end
  end
end

-- include: _fence.lua
-- include: _queue.lua
-- include: _fair.lua

local lock, counter, queue, leases, info = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local ring, waiters, wake, delay_key = KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local own = {lock, 'GET', lock, 'DEL', counter, 'GET'}  -- beyond _fair.lua's commands
if delay_key then own[#own + 1], own[#own + 2] = delay_key, 'DEL' end
local now, refusal =
  open_queue(own, lock, counter, queue, leases, info, ring, delay_key, waiters, wake)
if not now then return refusal end

local v = redis.call('GET', lock)
local fence = tonumber(ARGV[2] or '0') or 0
if not owns(v, token) and ring then
  local done, e, cmd = ring_released(ring, counter, fence)
  if e then return failed(cmd, e) end
  if done then  -- released already (and maybe granted on): the same release sent again
    if not v then  -- nobody was granted it yet
      local r = grant_next(lock, counter, queue, leases, info, ring, delay_key, now)
      if r ~= true and r ~= false then return r end
    end
    return 'ok'
  end
end
if not v then  -- expired: the next waiter need not wait for its own retry
  local r = grant_next(lock, counter, queue, leases, info, ring, delay_key, now)
  if r ~= true and r ~= false then return r end
  return 'gone'
end
if not owns(v, token) then return 'taken' end
if waiters then
  local r = wake_marked(waiters, wake)  -- checked by the preflight: cannot fail now
  if r then return r end
end
if ring then
  local e, cmd = ring_mark(ring, counter, value_fence(v))
  if e then return failed(cmd, e) end
end
redis.call('DEL', lock)
if delay_key then redis.call('DEL', delay_key) end  -- a release ends the lock-delay too
local r = grant_next(lock, counter, queue, leases, info, ring, delay_key, now)
if r ~= true and r ~= false then return r end
return 'ok'
