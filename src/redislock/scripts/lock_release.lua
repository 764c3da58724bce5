-- lock_release: delete the lock only if this owner token still holds it, and wake one waiter.
-- KEYS[1] lock key
-- KEYS[2] waiters key   (see lock_acquire.lua)
-- KEYS[3] wake key      list; one element is pushed per release when someone waits (waiters BLPOP it)
-- ARGV[1] token         owner token
-- ARGV[2] wake_ttl_ms   how long an unconsumed wake-up stays, milliseconds
-- returns "ok"          released
--         "gone"        no lock key (expired or deleted)
--         "taken"       the key holds another owner's token; nothing was touched
local v = redis.call('GET', KEYS[1])
if not v then
  return 'gone'
end
if string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '|' then
  return 'taken'
end
redis.call('DEL', KEYS[1])
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('DEL', KEYS[3])
  redis.call('RPUSH', KEYS[3], '1')
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
return 'ok'
