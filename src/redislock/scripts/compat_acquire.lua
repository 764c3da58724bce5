-- compat_acquire: take a lock in redis-py's format (redislock.compat.RedisPyLock): the key is
-- the lock name itself and its value the owner token alone, as redis.lock.Lock writes it,
-- so redis-py's Lock and the drop-in exclude each other on one name; plus a fencing token.
-- KEYS[1] lock key      the name as given: string "<token>", always with a PX TTL here (a
--                       redis-py Lock without timeout writes one without a TTL)
-- KEYS[2] fence key     the slot counter of the name's hash slot (_fence.lua: "{<slot tag>}",
--                       so in the name's slot); INCR only when the lock is taken
-- KEYS[3] done key      string "<token>|acq|<op_id>", this acquire, PX ARGV[4]: the same key
--                       as lock_release.lua's and lock_extend.lua's memos
-- ARGV[1] token         owner token (the bytes redis-py would write; the caller may choose it,
--                       so two holders may have the same one: it does not identify a call)
-- ARGV[2] ttl_ms        lease length, milliseconds (integer >= 1)
-- ARGV[3] op_id         random per acquire call (hex): a call that finds its own op_id in the
--                       done key, with its token still holding the lock, was applied already
-- ARGV[4] done_ms       how long the done key remembers this acquire, milliseconds
-- returns {"ok", fence}        acquired; fence is the new fencing token
--         {"ok", fence}        also for a repeat of this call (a client retrying after the
--                              reply was lost): the TTL is set to ttl_ms again and fence is
--                              the counter now (at least the token first issued, below any
--                              later holder's: still increasing per name)
--         {"busy", pttl_ms}    held by another call (even with the same token: as redis-py's
--                              SET NX); pttl_ms its remaining TTL (-1: none)
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command; nothing is held
-- The same redis-py compare (value == token) decides ownership in lock_release.lua and
-- lock_extend.lua when they are called with their "exact" argument.

-- include: _acl.lua

local memo = ARGV[1] .. '|acq|' .. ARGV[3]
local r = redis.pcall('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
if bad(r) then return failed('SET', r) end
if r then
  local fence = redis.pcall('INCR', KEYS[2])
  if not bad(fence) then
    r = redis.pcall('SET', KEYS[3], memo, 'PX', ARGV[4])
    if not bad(r) then return {'ok', fence} end
    redis.pcall('DEL', KEYS[1])  -- undo: no hold that a retry could not recognise
    return failed('SET', r)
  end
  redis.pcall('DEL', KEYS[1])  -- undo: no hold without its fencing token
  return failed('INCR', fence)
end
local v = redis.pcall('GET', KEYS[1])
if bad(v) then return failed('GET', v) end
if v == ARGV[1] then
  local done = redis.pcall('GET', KEYS[3])
  if bad(done) then return failed('GET', done) end
  if done == memo then
    r = redis.pcall('PEXPIRE', KEYS[1], ARGV[2])
    if bad(r) then return failed('PEXPIRE', r) end
    local fence = redis.pcall('GET', KEYS[2])
    if bad(fence) then return failed('GET', fence) end
    return {'ok', tonumber(fence or '0')}
  end
end
r = redis.pcall('PTTL', KEYS[1])
if bad(r) then return failed('PTTL', r) end
return {'busy', r}
