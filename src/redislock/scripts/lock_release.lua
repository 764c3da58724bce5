-- lock_release: delete the lock only if this owner token still holds it, and wake one waiter.
-- KEYS[1] lock key
-- KEYS[2] waiters key   (see lock_acquire.lua)
-- KEYS[3] wake channel  "P{N}:wake": a release PUBLISHes "*" to it when someone waits (the
--                       waiters' shared wake-up channel, redislock._core.wake); declared as
--                       a key of the name's hash tag, never written as one
-- KEYS[4] done key      optional: string "<token>", the last release of this name, PX ARGV[2]
--                       (Redlock's masters; Lock, FairLock and the drop-ins have the slot's
--                       release ring instead: fair_release.lua, compat_release.lua)
-- ARGV[1] token         owner token
-- ARGV[2] done_ms       with KEYS[4]: how long the done key remembers this release, milliseconds
--                       (the window in which a client may send the same release again)
-- returns "ok"          released; also a repeat of this token's release within done_ms (a
--                       client retrying after the reply was lost: the first one worked)
--         "gone"        no lock key (expired or deleted)
--         "taken"       the key holds another owner's token; nothing was touched
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command; the lock is
--                       still held (at most a spurious wake-up and the done key were written)
-- The writes come in an order whose every prefix is safe: the wake-up (a spurious one costs
-- a waiter one try), then the done key, then the DEL; nothing after the DEL can fail, so the
-- holder is never told "refused" while its key is gone.

-- include: _acl.lua
-- include: _wake.lua

local v = redis.pcall('GET', KEYS[1])
if bad(v) then return failed('GET', v) end
local mine = v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. '|'
if not mine then
  if KEYS[4] then
    local done = redis.pcall('GET', KEYS[4])
    if bad(done) then return failed('GET', done) end
    if done == ARGV[1] then
      return 'ok'
    end
  end
  return v and 'taken' or 'gone'
end
local r = wake_marked(KEYS[2], KEYS[3])
if r then return r end
if KEYS[4] then
  r = redis.pcall('SET', KEYS[4], ARGV[1], 'PX', ARGV[2])
  if bad(r) then return failed('SET', r) end
end
r = redis.pcall('DEL', KEYS[1])
if bad(r) then
  -- Not released: forget the release (SET just worked; DEL did not).
  if KEYS[4] then redis.pcall('SET', KEYS[4], '', 'PX', 1) end
  return failed('DEL', r)
end
return 'ok'
