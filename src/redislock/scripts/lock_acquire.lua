-- lock_acquire: take the lock if nobody holds it, issuing the next fencing token in the same step.
-- KEYS[1] lock key      string "<token>|<meta>", always with a PX TTL
-- KEYS[2] fence key     integer counter, never expires, never reset; INCR only on success, so
--                       while the lock is held it equals the holder's fencing token
-- KEYS[3] waiters key   marker "some client is waiting"; its presence makes release push a wake-up
-- ARGV[1] token         owner token (>= 32 hex chars, no '|')
-- ARGV[2] ttl_ms        lease length, milliseconds (integer >= 1)
-- ARGV[3] meta          holder metadata "<host>|<pid>|<acquired_unix_ms>"
-- ARGV[4] wait_ms       0 for a single try; else how long to keep the waiters marker, milliseconds
-- returns {"ok", fence}        acquired; fence is the new fencing token
--         {"busy", pttl_ms}    held by someone else; pttl_ms is the holder's remaining TTL (-1: no TTL)
-- Idempotent for one token: a client that retries after losing the reply (redis-py retries
-- on timeouts) gets {"ok", fence} for its own hold instead of waiting on itself.
if redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[3], 'NX', 'PX', ARGV[2]) then
  return {'ok', redis.call('INCR', KEYS[2])}
end
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. '|' then
  return {'ok', tonumber(redis.call('GET', KEYS[2]))}
end
if ARGV[4] ~= '0' then
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[4])
end
return {'busy', redis.call('PTTL', KEYS[1])}
