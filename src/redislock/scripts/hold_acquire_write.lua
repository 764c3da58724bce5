-- hold_acquire_write: a new exclusive, reentrant hold (mode w: an RLock's, a ReadWriteLock's writer's) in the hold hash, or busy.
-- (The hash, its expiry index and what a call costs: _hold.lua. A re-entry: hold_reenter.)
-- KEYS[1] hash          the holds, one field per owner token (_hold.lua: hash)
-- KEYS[2] expiry index  sorted set, owner token -> BAND[mode] + lease end (_hold.lua: index)
-- KEYS[3] fence key     the name's slot counter (_fence.lua), INCR once per new hold, never
--                       expires
-- KEYS[4] waiters       optional, given with ARGV[4] > 0 only: sorted set, token of each
--                       waiting w/p waiter -> server time (ms) its entry ends (_hold.lua)
-- ARGV[1] token         owner token (>= 32 hex chars)
-- ARGV[2] lease_ms      the hold's lease, milliseconds (>= 1)
-- ARGV[3] meta          holder metadata "<host>|<pid>|<acquired_unix_ms>"
-- ARGV[4] marker_ms     milliseconds a failed try stays registered in KEYS[4]; 0: a single try
-- returns {"ok", fence, count, lease_ms}  held: count 1 (a repeat of this acquisition after a
--                                        lost reply: the hold as it is, unchanged)
--         {"busy", hint_ms}              another hold blocks; hint_ms: when the earliest
--                                        blocking lease ends, at most (a recheck bound)
--         error "redislock - <key> holds a field not written by redislock"  nothing taken

-- include: _acl.lua
-- include: _fence.lua
-- include: _hold.lua

local hash, index, counter, waiters = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token = ARGV[1]
local now, err = begin(hash, index, counter, ON_FENCE, waiters, ON_QUEUE)
if not now then return err end

local held = holding(hash, index, token, now)
if held then return held end
if live(index, 'w', now) + live(index, 'r', now) + live(index, 'p', now) > 0 then
  if ARGV[4] ~= '0' then queue(waiters, token, ARGV[4], now) end
  return busy(index, waiters, now)
end
local reply = grant(hash, index, token, 'w', ARGV[2], ARGV[3], now, next_fence(counter))
if waiters and not reply.err then redis.call('ZREM', waiters, token) end
return reply
