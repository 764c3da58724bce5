-- lock_force_release: operator override; delete the lock whoever holds it and wake one waiter.
-- KEYS[1] lock key
-- KEYS[2] waiters key
-- KEYS[3] wake key
-- ARGV[1] wake_ttl_ms   how long an unconsumed wake-up stays, milliseconds
-- returns 1 if a lock key was deleted, 0 if there was none
local n = redis.call('DEL', KEYS[1])
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('DEL', KEYS[3])
  redis.call('RPUSH', KEYS[3], '1')
  redis.call('PEXPIRE', KEYS[3], ARGV[1])
end
return n
