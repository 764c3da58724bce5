-- compat_release: release a lock in redis-py's format (redislock.compat.RedisPyLock): delete
-- the key only if its value IS this owner token (redis-py's compare), and set the token's
-- bit in the slot's release ring, so the same release sent again after its reply was lost
-- answers "ok" however many holders took the name in between.
-- KEYS[1] lock key      the name as given: string "<token>" (compat_acquire.lua)
-- KEYS[2] release ring  the slot's release ring (_ring.lua)
-- KEYS[3] fence key     the slot's fencing counter, whose window the ring covers
-- ARGV[1] token         owner token (the bytes redis-py wrote)
-- ARGV[2] fence         the hold's fencing token (from compat_acquire.lua); 0: not known
-- returns "ok"          released; also a repeat of this hold's release whose first send
--                       worked (its bit is set, while its fence is in the ring's window)
--         "gone"        no lock key (expired or deleted)
--         "taken"       the key holds another value; nothing was touched
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command; the lock is
--                       still held (at most the bit was written)
-- The writes come in an order whose every prefix is safe: the bit, then the DEL (undoing
-- the bit if the DEL failed); nothing after the DEL can fail.

-- include: _acl.lua
-- include: _ring.lua

local v = redis.pcall('GET', KEYS[1])
if bad(v) then return failed('GET', v) end
local fence = tonumber(ARGV[2]) or 0
if v ~= ARGV[1] then
  local done, e, cmd = ring_released(KEYS[2], KEYS[3], fence)
  if e then return failed(cmd, e) end
  if done then return 'ok' end
  return v and 'taken' or 'gone'
end
local r, cmd, marked = ring_mark(KEYS[2], KEYS[3], fence)
if r then return failed(cmd, r) end
r = redis.pcall('DEL', KEYS[1])
if bad(r) then
  if marked then ring_unmark(KEYS[2], fence) end  -- not released: forget the release
  return failed('DEL', r)
end
return 'ok'
