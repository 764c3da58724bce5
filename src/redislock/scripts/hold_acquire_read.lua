-- hold_acquire_read: a new shared, reentrant read hold (mode r: a ReadWriteLock's reader) in the hold hash, or busy.
-- (The hash, its expiry index and what a call costs: _hold.lua. A re-entry: hold_reenter.)
-- KEYS[1] hash          the holds, one field per owner token (_hold.lua: hash)
-- KEYS[2] expiry index  sorted set, owner token -> BAND[mode] + lease end (_hold.lua: index)
-- KEYS[3] fence key     the name's slot counter (_fence.lua), INCR once per new hold, never
--                       expires
-- KEYS[4] waiters       sorted set of the waiting writers (_hold.lua): while one waits, new
--                       readers wait too (writer preference); read only
-- KEYS[5] rwait marker  a reader is waiting: SET for ARGV[4] ms by a blocked try that waits
-- KEYS[6] rwake channel PUBLISHed "*" (the wake-up passed on) when more readers may enter
-- ARGV[1] token         owner token (>= 32 hex chars)
-- ARGV[2] lease_ms      the hold's lease, milliseconds (>= 1)
-- ARGV[3] meta          holder metadata "<host>|<pid>|<acquired_unix_ms>"
-- ARGV[4] marker_ms     milliseconds a failed try leaves KEYS[5] set; 0: a single try
-- ARGV[5] companion     the caller's own write token ("" if none): a writer may take a read
--                       hold beside its write hold (downgrade)
-- returns {"ok", fence, count, lease_ms}  held: count 1 (a repeat of this acquisition after a
--                                        lost reply: the hold as it is, unchanged)
--         {"busy", hint_ms}              a writer holds or waits; hint_ms: when the earliest
--                                        blocking lease (else the last waiting writer's
--                                        entry) ends, at most (a recheck bound)
--         error "redislock - <key> holds a field not written by redislock"  nothing taken

-- include: _acl.lua
-- include: _fence.lua
-- include: _hold.lua

local hash, index, counter, waiters = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local rwait, rwake = KEYS[5], KEYS[6]
local token = ARGV[1]
local now, err = begin(hash, index, counter, ON_FENCE, waiters, ON_WAITERS, rwait, ON_MARKER,
  rwake, ON_WAKE)
if not now then return err end

local held = holding(hash, index, token, now)
if held then return held end
local companion = get(hash, index, ARGV[5], now)
local own_write = companion ~= nil and companion.mode == 'w'
if not own_write and (live(index, 'w', now) > 0 or writers_wait(waiters, now)) then
  if ARGV[4] ~= '0' then redis.call('SET', rwait, '1', 'PX', ARGV[4]) end
  return busy(index, waiters, now)
end
local reply = grant(hash, index, token, 'r', ARGV[2], ARGV[3], now, next_fence(counter))
-- pass the wake-up on: more readers may enter now
if not reply.err and readers_wait(rwait) and not writers_wait(waiters, now) then
  wake_one(rwake)
end
return reply
