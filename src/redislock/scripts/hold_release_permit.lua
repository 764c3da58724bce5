-- hold_release_permit: give a Semaphore's permit (mode p) back and wake a waiter if a permit is now free.
-- (The hash, its expiry index and what a call costs: _hold.lua. A lock's hold: hold_release.)
-- KEYS[1] hash          the holds, one field per owner token (_hold.lua: hash)
-- KEYS[2] expiry index  sorted set, owner token -> BAND[mode] + lease end (_hold.lua: index)
-- KEYS[3] waiters       sorted set of the waiting w/p waiters (_hold.lua)
-- KEYS[4] wake channel  PUBLISHed "*" when a waiter may now succeed
-- KEYS[5] permits key   the permit count set at run time (no TTL); absent: ARGV[4]
-- KEYS[6] released      optional: sorted set of the holds released lately, token -> server
--                       time in milliseconds at which it is forgotten (ARGV[3] after the
--                       release); the key's TTL is ARGV[3]
-- ARGV[1] token         owner token (>= 32 hex chars)
-- ARGV[2] op_id         "" or a random id per call: a release sent again after a lost reply
--                       (the hold's last op id) counts once
-- ARGV[3] done_ms       with KEYS[6]: how long a released hold is remembered, milliseconds; a
--                       release sent again within it finds its token there and answers "ok"
-- ARGV[4] permits       the permit count when KEYS[5] is absent
-- returns {"ok", count}  count left (0: the permit was given back; also a repeat of a release
--                        within ARGV[3] ms)
--         {"gone", 0}    no such permit (expired or deleted)
--         error "redislock - <key> holds ... not written by redislock ..."  a hold field, or
--                        the permits key (not an integer >= 1): nothing released

-- include: _acl.lua
-- include: _hold.lua

local hash, index, waiters, wake = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local pkey, released = KEYS[5], KEYS[6]
local now, err = begin(hash, index, waiters, ON_WAITERS, wake, ON_WAKE, pkey, ON_PERMITS,
  released, ON_RELEASED)
if not now then return err end
local permits = permit_count(pkey, ARGV[4])

-- no reader keys: a Semaphore's hash holds no read holds
return release(hash, index, released, ARGV[1], ARGV[2] or '', ARGV[3] or '0', waiters, wake,
  nil, nil, permits, now)
