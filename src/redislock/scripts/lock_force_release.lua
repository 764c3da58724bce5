-- lock_force_release: operator override; delete the lock whoever holds it and wake one waiter.
-- KEYS[1] lock key
-- KEYS[2] waiters key
-- KEYS[3] wake key
-- ARGV[1] wake_ttl_ms   how long an unconsumed wake-up stays, milliseconds
-- returns 1 if a lock key was deleted, 0 if there was none
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command; the lock key
--                       is untouched (at most a spurious wake-up was written)
-- The wake-up comes before the DEL, so a refused command never leaves the lock deleted
-- while the operator is told it failed.

-- include: _acl.lua

local r = redis.pcall('EXISTS', KEYS[2])
if bad(r) then return failed('EXISTS', r) end
if r == 1 then
  r = redis.pcall('DEL', KEYS[3])
  if bad(r) then return failed('DEL', r) end
  r = redis.pcall('RPUSH', KEYS[3], '1')
  if bad(r) then return failed('RPUSH', r) end
  r = redis.pcall('PEXPIRE', KEYS[3], ARGV[1])
  if bad(r) then
    redis.pcall('DEL', KEYS[3])  -- undo: never a wake list without a TTL
    return failed('PEXPIRE', r)
  end
end
r = redis.pcall('DEL', KEYS[1])
if bad(r) then return failed('DEL', r) end
return r
