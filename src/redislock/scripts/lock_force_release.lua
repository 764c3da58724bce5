-- lock_force_release: operator override; delete the lock whoever holds it and wake one waiter.
-- KEYS[1] lock key
-- KEYS[2] waiters key
-- KEYS[3] wake channel  PUBLISHed "*" when someone waits (see lock_release.lua)
-- KEYS[4] delay key     optional: the hold's lock-delay key (fair_release.lua's KEYS[9]),
--                       DELeted with the lock key: an operator's override ends it too
-- ARGV: none
-- returns 1 if a lock key was deleted, plus 2 if a lock-delay (KEYS[4]) was ended: 0..3
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command; the lock key
--                       is untouched (at most a spurious wake-up was published)
-- The wake-up comes before the DEL, so a refused command never leaves the lock deleted
-- while the operator is told it failed.

-- include: _acl.lua
-- include: _wake.lua

local r = wake_marked(KEYS[2], KEYS[3])
if r then return r end
local ended = 0
if KEYS[4] then  -- before the lock key: a refusal leaves the lock key untouched
  ended = redis.pcall('DEL', KEYS[4])
  if bad(ended) then return failed('DEL', ended) end
end
r = redis.pcall('DEL', KEYS[1])
if bad(r) then return failed('DEL', r) end
return r + 2 * ended
