-- hold_acquire_permit: a new permit (mode p: one of a Semaphore's) in the hold hash while fewer than the permit count are held, or busy.
-- (The hash, its expiry index and what a call costs: _hold.lua. A re-entry: hold_reenter.)
-- KEYS[1] hash          the holds, one field per owner token (_hold.lua: hash)
-- KEYS[2] expiry index  sorted set, owner token -> BAND[mode] + lease end (_hold.lua: index)
-- KEYS[3] fence key     the name's slot counter (_fence.lua), INCR once per new hold, never
--                       expires
-- KEYS[4] waiters       sorted set, token of each waiting w/p waiter -> server time (ms) its
--                       entry ends (_hold.lua): a blocked try that waits registers there
-- KEYS[5] wake channel  PUBLISHed "*" (the wake-up passed on) when more permits are free
-- KEYS[6] permits key   the permit count set at run time (no TTL); absent: ARGV[5]
-- ARGV[1] token         owner token (>= 32 hex chars)
-- ARGV[2] lease_ms      the hold's lease, milliseconds (>= 1)
-- ARGV[3] meta          holder metadata "<host>|<pid>|<acquired_unix_ms>"
-- ARGV[4] marker_ms     milliseconds a failed try stays registered in KEYS[4]; 0: a single try
-- ARGV[5] permits       the permit count when KEYS[6] is absent
-- returns {"ok", fence, count, lease_ms}  held: count 1 (a repeat of this acquisition after a
--                                        lost reply: the hold as it is, unchanged)
--         {"busy", hint_ms}              a writer holds, or every permit is held; hint_ms: when
--                                        the earliest blocking lease ends, at most
--         error "redislock - <key> holds ... not written by redislock ..."  a hold field, or
--                                        the permits key (not an integer >= 1): nothing taken

-- include: _acl.lua
-- include: _fence.lua
-- include: _hold.lua

local hash, index, counter, waiters = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local wake, pkey = KEYS[5], KEYS[6]
local now, err = begin(hash, index, counter, ON_FENCE, waiters, ON_QUEUE, wake, ON_WAKE,
  pkey, ON_PERMITS)
if not now then return err end
local token, permits = ARGV[1], permit_count(pkey, ARGV[5])

local held = holding(hash, index, token, now)
if held then return held end
if live(index, 'w', now) + live(index, 'r', now) > 0 or live(index, 'p', now) >= permits then
  if ARGV[4] ~= '0' then queue(waiters, token, ARGV[4], now) end
  return busy(index, waiters, now)
end
local reply = grant(hash, index, token, 'p', ARGV[2], ARGV[3], now, next_fence(counter))
if reply.err then return reply end
redis.call('ZREM', waiters, token)
-- pass the wake-up on: more permits may be taken now
if writers_wait(waiters, now) and live(index, 'p', now) < permits then wake_one(wake) end
return reply
