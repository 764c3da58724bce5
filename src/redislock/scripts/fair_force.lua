-- fair_force: operator override; delete a Lock's or FairLock's lock whoever holds it and grant it to the next waiter.
-- What `redislock release --force` runs for a name with a queue (cli/force_release.py):
-- the lock key (and its lock-delay) go, MultiLock's waiters are woken, and the next live
-- waiter of the queue (fair_acquire.lua) is granted the lock in the same call.
-- KEYS[1] lock key      string "<token>|<fence>|<meta>" with a PX TTL (fair_acquire.lua)
-- KEYS[2] fence key     the name's slot counter (_fence.lua), INCR per grant, never expires
-- KEYS[3] queue         list of waiter tokens in arrival order (fair_acquire.lua)
-- KEYS[4] waiter leases sorted set: token -> server time (ms) at which its waiter lease ends
-- KEYS[5] waiter info   hash: token -> "<lease_ms>|<meta>" (what a grant writes for it)
-- KEYS[6] release ring  optional: the slot's release ring (_ring.lua), whose bit of a token
--                       a grant clears when it issues it (a forced release sets none)
-- KEYS[7] waiters key   optional (with KEYS[6]): MultiLock's marker "some client is
--                       waiting" (multi_acquire.lua); its presence makes the call publish
--                       one wake-up to KEYS[8] (_wake.lua)
-- KEYS[8] wake channel  with KEYS[7]: "P{N}:wake", PUBLISHed "*"; declared as a key, never
--                       written as one
-- KEYS[9] delay key     optional (with KEYS[6..8]): the hold's lock-delay (fair_acquire.lua),
--                       DELeted with the lock key: an operator's override ends it too (to
--                       keep it, let the lease run out)
-- ARGV: none
-- A grant PUBLISHes "<tag>|<fence>" to the waiter's process's grant channel of the name
-- (see fair_acquire.lua).
-- returns 1 if a lock key was deleted, plus 2 if a lock-delay (KEYS[9]) was ended: 0..3
--         error "NOPERM redislock: <COMMAND> ..."  the ACL refused a command; nothing was
--                       changed
-- include: _acl.lua
-- include: _fence.lua
-- include: _ring.lua
-- include: _queue.lua
-- include: _wake.lua
-- include: _fair.lua

local lock, counter, queue, leases, info = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local ring, waiters, wake, delay_key = KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local own = {lock, 'DEL'}  -- beyond _fair.lua's commands
if delay_key then own[#own + 1], own[#own + 2] = delay_key, 'DEL' end
local now, refusal =
  open_queue(own, lock, counter, queue, leases, info, ring, delay_key, waiters, wake)
if not now then return refusal end

local n = redis.call('DEL', lock)
if delay_key then n = n + 2 * redis.call('DEL', delay_key) end
if waiters then
  local r = wake_marked(waiters, wake)  -- checked by the preflight: cannot fail now
  if r then return r end
end
local r = grant_next(lock, counter, queue, leases, info, ring, delay_key, now)
if r ~= true and r ~= false then return r end
return n
