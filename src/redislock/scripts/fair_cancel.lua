-- fair_cancel: leave the queue of a Lock or FairLock, or learn that the lock was granted meanwhile.
-- A waiter that gives up, fails or is cancelled calls this: if a release granted it the
-- lock in the meantime it holds it now (the caller then releases it, which grants the
-- next waiter); else it leaves the queue, and a free lock goes to the next live waiter.
-- KEYS[1] lock key      string "<token>|<fence>|<meta>" with a PX TTL (fair_acquire.lua)
-- KEYS[2] fence key     the name's slot counter (_fence.lua), INCR per grant, never expires
-- KEYS[3] queue         list of waiter tokens in arrival order (fair_acquire.lua)
-- KEYS[4] waiter leases sorted set: token -> server time (ms) at which its waiter lease ends
-- KEYS[5] waiter info   hash: token -> "<lease_ms>|<meta>" (what a grant writes for it)
-- KEYS[6] release ring  optional: the slot's release ring (_ring.lua), whose bit of a token
--                       a grant clears when it issues it
-- KEYS[7] delay key     optional (with KEYS[6]): the lock-delay key (fair_acquire.lua):
--                       while it holds the lock off, no grant is made
-- ARGV[1] token         owner token of the waiter
-- A grant PUBLISHes "<tag>|<fence>" to the waiter's process's grant channel of the name
-- (see fair_acquire.lua).
-- returns {"ok", fence, lease_ms}  the lock was granted to this token meanwhile: it holds it
--                                  (lease_ms: its PTTL)
--         {"left", 0}              no longer queued
--         error "NOPERM redislock: <COMMAND> ..."  the ACL refused a command; nothing was
--                                  changed
-- include: _acl.lua
-- include: _fence.lua
-- include: _ring.lua
-- include: _queue.lua
-- include: _fair.lua

local token = ARGV[1]
local lock, counter, queue, leases, info = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local ring, delay_key = KEYS[6], KEYS[7]
local own = {lock, 'GET', lock, 'PTTL'}  -- beyond _fair.lua's commands
local now, refusal = open_queue(own, lock, counter, queue, leases, info, ring, delay_key)
if not now then return refusal end

local v = redis.call('GET', lock)
if owns(v, token) then
  return {'ok', held_fence(v), redis.call('PTTL', lock)}
end
forget(queue, leases, info, token)
if not v then
  local r = grant_next(lock, counter, queue, leases, info, ring, delay_key, now)
  if r ~= true and r ~= false then return r end
end
settle(queue, leases, info)
return {'left', 0}
