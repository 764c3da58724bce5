-- compat_acquire: take a lock in redis-py's format (redislock.compat.RedisPyLock): the key is
-- the lock name itself and its value the owner token alone, as redis.lock.Lock writes it,
-- so redis-py's Lock and the drop-in exclude each other on one name; plus a fencing token.
-- KEYS[1] lock key      the name as given: string "<token>", always with a PX TTL here (a
--                       redis-py Lock without timeout writes one without a TTL)
-- KEYS[2] fence key     the slot counter of the name's hash slot (_fence.lua: "{<slot tag>}",
--                       so in the name's slot); INCR only when the lock is taken
-- ARGV[1] token         owner token (the bytes redis-py would write)
-- ARGV[2] ttl_ms        lease length, milliseconds (integer >= 1)
-- returns {"ok", fence}        acquired; fence is the new fencing token
--         {"ok", fence}        also for a repeat of this token's acquire (a client retrying
--                              after the reply was lost): the TTL is set to ttl_ms again and
--                              fence is the counter now (at least the token first issued,
--                              below any later holder's: still increasing per name)
--         {"busy", pttl_ms}    another token holds it; pttl_ms its remaining TTL (-1: none)
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command; nothing is held
-- The same redis-py compare (value == token) decides ownership in lock_release.lua and
-- lock_extend.lua when they are called with their "exact" argument.

-- include: _acl.lua

local r = redis.pcall('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
if bad(r) then return failed('SET', r) end
if r then
  local fence = redis.pcall('INCR', KEYS[2])
  if bad(fence) then
    redis.pcall('DEL', KEYS[1])  -- undo: no hold without its fencing token
    return failed('INCR', fence)
  end
  return {'ok', fence}
end
local v = redis.pcall('GET', KEYS[1])
if bad(v) then return failed('GET', v) end
if v == ARGV[1] then
  r = redis.pcall('PEXPIRE', KEYS[1], ARGV[2])
  if bad(r) then return failed('PEXPIRE', r) end
  local fence = redis.pcall('GET', KEYS[2])
  if bad(fence) then return failed('GET', fence) end
  return {'ok', tonumber(fence or '0')}
end
r = redis.pcall('PTTL', KEYS[1])
if bad(r) then return failed('PTTL', r) end
return {'busy', r}
