-- hold_release: drop one count of a lock's hold (mode w or r: RLock, ReadWriteLock); at zero remove it and wake whoever may now enter.
-- (The hash, its expiry index and what a call costs: _hold.lua. A permit: hold_release_permit.)
-- KEYS[1] hash          the holds, one field per owner token (_hold.lua: hash)
-- KEYS[2] expiry index  sorted set, owner token -> BAND[mode] + lease end (_hold.lua: index)
-- KEYS[3] waiters       sorted set of the waiting w/p waiters (writers first: _hold.lua)
-- KEYS[4] wake channel  PUBLISHed "*" when a w/p waiter may now succeed
-- KEYS[5] rwait marker  a reader is waiting
-- KEYS[6] rwake channel PUBLISHed "*" when a reader may now succeed
-- KEYS[7] released      optional: sorted set of the holds released lately, token -> server
--                       time in milliseconds at which it is forgotten (ARGV[3] after the
--                       release); the key's TTL is ARGV[3]
-- ARGV[1] token         owner token (>= 32 hex chars)
-- ARGV[2] op_id         "" or a random id per call: a decrement sent again after a lost reply
--                       (the hold's last op id) counts once
-- ARGV[3] done_ms       with KEYS[7]: how long a released hold is remembered, milliseconds; a
--                       release sent again within it finds its token there and answers "ok"
-- returns {"ok", count}  count left (0: the hold was removed; also a repeat of a release
--                        within ARGV[3] ms)
--         {"gone", 0}    no such hold (expired or deleted)
--         error "redislock - <key> holds a field not written by redislock"  nothing released

-- include: _acl.lua
-- include: _hold.lua

local hash, index, waiters, wake = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local rwait, rwake, released = KEYS[5], KEYS[6], KEYS[7]
local now, err = begin(hash, index, waiters, ON_WAITERS, wake, ON_WAKE, rwait, ON_RWAIT, rwake,
  ON_WAKE, released, ON_RELEASED)
if not now then return err end

-- a lock's hash holds no permits: permit count 0
return release(hash, index, released, ARGV[1], ARGV[2] or '', ARGV[3] or '0', waiters, wake,
  rwait, rwake, 0, now)
