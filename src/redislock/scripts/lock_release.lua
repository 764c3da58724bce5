-- lock_release: delete the lock only if this owner token still holds it, and wake one waiter.
-- KEYS[1] lock key
-- KEYS[2] waiters key   (see lock_acquire.lua)
-- KEYS[3] wake channel  "P{N}:wake": a release PUBLISHes "*" to it when someone waits (the
--                       waiters' shared wake-up channel, redislock._core.wake); declared as
--                       a key of the name's hash tag, never written as one
-- KEYS[4] done key      optional: string "<token>", the last release of this name, PX ARGV[2]
-- ARGV[1] token         owner token
-- ARGV[2] done_ms       with KEYS[4]: how long the done key remembers this release, milliseconds
--                       (the window in which a client may send the same release again)
-- ARGV[3] ownership     optional: "exact" for a lock in redis-py's format (compat_acquire.lua),
--                       held by the token iff the value IS the token; otherwise (redislock's
--                       "<token>|<fence>|<meta>") iff the value starts with "<token>|"
-- ARGV[4] memo          optional, with ARGV[3]: what the done key remembers of this release
--                       instead of the token (a caller's token may be reused by a later hold;
--                       the drop-in passes "<token>|rel|<acquire's op_id>", one per hold)
-- ARGV[5] fresh         optional, with ARGV[4]: "fresh" after a native release (DELIFEQ) that
--                       did not delete the key and wrote the memo itself: the done key then
--                       proves nothing and is not looked at
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

local v = redis.pcall('GET', KEYS[1])
if bad(v) then return failed('GET', v) end
local mine
if ARGV[3] == 'exact' then
  mine = v == ARGV[1]
else
  mine = v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. '|'
end
if not mine then
  if KEYS[4] and ARGV[5] ~= 'fresh' then
    local done = redis.pcall('GET', KEYS[4])
    if bad(done) then return failed('GET', done) end
    if done == (ARGV[4] or ARGV[1]) then
      return 'ok'
    end
  end
  return v and 'taken' or 'gone'
end
local r = redis.pcall('EXISTS', KEYS[2])
if bad(r) then return failed('EXISTS', r) end
if r == 1 then
  r = redis.pcall('PUBLISH', KEYS[3], '*')
  if bad(r) then return failed('PUBLISH', r) end
end
if KEYS[4] then
  r = redis.pcall('SET', KEYS[4], ARGV[4] or ARGV[1], 'PX', ARGV[2])
  if bad(r) then return failed('SET', r) end
end
r = redis.pcall('DEL', KEYS[1])
if bad(r) then
  -- Not released: forget the release (SET just worked; DEL did not).
  if KEYS[4] then redis.pcall('SET', KEYS[4], '', 'PX', 1) end
  return failed('DEL', r)
end
return 'ok'
