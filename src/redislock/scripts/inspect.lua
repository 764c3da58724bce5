-- inspect: read every key of one lock name in one atomic step, whatever its kind (read-only).
-- Used by redislock.inspect() and `redislock inspect`; the caller decodes the values. One
-- script instead of a MULTI pipeline so that it is one flow operation, and the server's TIME
-- comes from the same instant as the values it is compared with.
-- KEYS[1] lock key      string "<token>|<fence>|<meta>" (Lock, FairLock, MultiLock) or a hash
--                       of holds (RLock, ReadWriteLock, Semaphore; see _hold.lua), or absent
-- KEYS[2] fence key     the slot's fencing counter, shared by the names of one hash slot
-- KEYS[3] waiters key   Lock: marker string; hold kinds: sorted set of waiting writers/permits
-- KEYS[4] rwait marker  a reader of a ReadWriteLock is waiting
-- KEYS[5] permits key   Semaphore: the permit count set at run time
-- KEYS[6] queue         FairLock: list of waiter tokens in arrival order
-- KEYS[7] waiter leases FairLock: sorted set token -> server time (ms) its waiter lease ends
-- KEYS[8] leader key    Election: "<term>|<identity>|<value>" (see _election.lua), or absent
-- KEYS[9] latch key     CountDownLatch: hash {count, gen, since} (_latch.lua), or absent
-- KEYS[10] barrier key  Barrier: hash {gen, state, parties} of the current round
--                       (_barrier.lua), or absent
-- KEYS[11] members key  Barrier: sorted set token -> server time (ms) its party's lease ends
-- ARGV: none
-- returns {type, value, fields, pttl_ms, fence, waiting, rwaiting, permits, queue, leases, now_ms,
--          leader, latch, latch_pttl_ms, round, round_pttl_ms, live, next_ms}
--   type      TYPE of KEYS[1]: "none", "string", "hash" or another type (not redislock's)
--   value     KEYS[1]'s string value, or nil when it is not a string
--   fields    KEYS[1]'s hash as {field, value, ...}, or {} when it is not a hash
--   pttl_ms   PTTL of KEYS[1] (-2: absent, -1: no TTL)
--   fence     the counter (nil: never set);  waiting, rwaiting: EXISTS of KEYS[3], KEYS[4]
--   permits   KEYS[5] (nil: absent);  queue: KEYS[6] in order;  leases: {token, end_ms, ...}
--   now_ms    the server's TIME in milliseconds
--   leader    KEYS[8] (nil: absent; the caller trusts it only when its term is the holder's
--             fencing token, as Election.leader() does)
--   latch     KEYS[9]'s hash as {field, value, ...} ({} when it is not a hash); latch_pttl_ms
--             its PTTL
--   round     KEYS[10]'s hash as {field, value, ...} ({} when it is not a hash);
--             round_pttl_ms its PTTL
--   live      the members of KEYS[11] whose lease ends after now_ms (0 when it is not a
--             sorted set); next_ms: milliseconds until the earliest of those leases ends
--             (-1: none). No member token is returned.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local kind = redis.call('TYPE', KEYS[1]).ok
local value = false
local fields = {}
if kind == 'string' then
  value = redis.call('GET', KEYS[1])
elseif kind == 'hash' then
  fields = redis.call('HGETALL', KEYS[1])
end
local latch, round = {}, {}  -- a key of another type: not a latch's, nor a round's
if redis.call('TYPE', KEYS[9]).ok == 'hash' then latch = redis.call('HGETALL', KEYS[9]) end
if redis.call('TYPE', KEYS[10]).ok == 'hash' then round = redis.call('HGETALL', KEYS[10]) end
local live, next_ms = 0, -1
if redis.call('TYPE', KEYS[11]).ok == 'zset' then
  live = redis.call('ZCOUNT', KEYS[11], '(' .. now, '+inf')
  local first = redis.call('ZRANGEBYSCORE', KEYS[11], '(' .. now, '+inf', 'WITHSCORES',
    'LIMIT', 0, 1)
  if #first > 0 then next_ms = tonumber(first[2]) - now end
end
return {
  kind,
  value,
  fields,
  redis.call('PTTL', KEYS[1]),
  redis.call('GET', KEYS[2]),
  redis.call('EXISTS', KEYS[3]),
  redis.call('EXISTS', KEYS[4]),
  redis.call('GET', KEYS[5]),
  redis.call('LRANGE', KEYS[6], 0, -1),
  redis.call('ZRANGE', KEYS[7], 0, -1, 'WITHSCORES'),
  now,
  redis.call('GET', KEYS[8]),
  latch,
  redis.call('PTTL', KEYS[9]),
  round,
  redis.call('PTTL', KEYS[10]),
  live,
  next_ms,
}
