-- hold_count: how many live holds of each mode the hold hash has, and the permit count.
-- (The hash, its expiry index and what a call costs: _hold.lua.)
-- KEYS[1] hash          the holds, one field per owner token (_hold.lua: hash)
-- KEYS[2] expiry index  sorted set, owner token -> BAND[mode] + lease end (_hold.lua: index)
-- KEYS[3] permits key   optional (a Semaphore's call): the permit count set at run time (no
--                       TTL); absent or not given: ARGV[1]
-- ARGV[1] permits       the permit count when KEYS[3] is absent (0: not a Semaphore)
-- returns {writers, readers, permits held, permit count}   live holds of each mode
--         error "redislock - <key> holds ... not written by redislock ..."  a hold field, or
--                       the permits key (not an integer >= 1)

-- include: _acl.lua
-- include: _hold.lua

local hash, index, pkey = KEYS[1], KEYS[2], KEYS[3]
local now, err = begin(hash, index, pkey, ON_PERMITS)
if not now then return err end

local permits = tonumber(ARGV[1])
if pkey then permits = permit_count(pkey, ARGV[1]) end
return {live(index, 'w', now), live(index, 'r', now), live(index, 'p', now), permits}
