-- hold_force: operator override: remove every hold of the hold hash and wake every kind of waiter.
-- (The hash, its expiry index and what a call costs: _hold.lua.)
-- KEYS[1] hash          the holds, one field per owner token (_hold.lua: hash)
-- KEYS[2] expiry index  sorted set, owner token -> BAND[mode] + lease end (_hold.lua: index)
-- KEYS[3] waiters       sorted set of the waiting w/p waiters (_hold.lua)
-- KEYS[4] wake channel  PUBLISHed "*" when a w/p waiter waits
-- KEYS[5] rwait marker  a reader is waiting
-- KEYS[6] rwake channel PUBLISHed "*" when a reader waits
-- ARGV: none
-- returns number of live holds removed
--         error "redislock - <key> holds a field not written by redislock"  nothing removed

-- include: _acl.lua
-- include: _hold.lua

local hash, index, waiters, wake = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local rwait, rwake = KEYS[5], KEYS[6]
local now, err = begin(hash, index, waiters, ON_WAITERS, wake, ON_WAKE, rwait, ON_RWAIT,
  rwake, ON_WAKE)
if not now then return err end

local removed = live(index, 'w', now) + live(index, 'r', now) + live(index, 'p', now)
redis.call('DEL', hash, index)
if writers_wait(waiters, now) then wake_one(wake) end
if readers_wait(rwait) then wake_one(rwake) end
return removed
