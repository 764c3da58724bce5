-- compat_acquire: take a lock in redis-py's format (redislock.compat.RedisPyLock): the key is
-- the lock name itself and its value the owner token alone, as redis.lock.Lock writes it,
-- so redis-py's Lock and the drop-in exclude each other on one name; plus a fencing token.
-- KEYS[1] lock key      the name as given: string "<token>", always with a PX TTL here (a
--                       redis-py Lock without timeout writes one without a TTL)
-- KEYS[2] fence key     the slot counter of the name's hash slot (_fence.lua: "{<slot tag>}",
--                       so in the name's slot); INCR only when the lock is taken
-- KEYS[3] done key      string "<token>|acq|<op_id>|<fence>", this acquire, PX ARGV[4]: the
--                       same key as lock_extend.lua's memos
-- KEYS[4] release ring  the slot's release ring (_ring.lua): the new token's bit is cleared
-- ARGV[1] token         owner token (the bytes redis-py would write; the caller may choose it,
--                       so two holders may have the same one: it does not identify a call)
-- ARGV[2] ttl_ms        lease length, milliseconds (integer >= 1)
-- ARGV[3] op_id         random per acquire call (hex): a call that finds its own op_id in the
--                       done key, with its token still holding the lock, was applied already
-- ARGV[4] done_ms       how long the done key remembers this acquire, milliseconds
-- returns {"ok", fence}        acquired; fence is the new fencing token
--         {"ok", fence}        also for a repeat of this call (a client retrying after the
--                              reply was lost): the TTL is set to ttl_ms again and fence is
--                              the token first issued (the done key remembers it)
--         {"busy", pttl_ms}    held by another call (even with the same token: as redis-py's
--                              SET NX); pttl_ms its remaining TTL (-1: none)
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command; nothing is held
-- The same redis-py compare (value == token) decides ownership in compat_release.lua and in
-- lock_extend.lua when it is called with its "exact" argument.

-- include: _acl.lua
-- include: _ring.lua

local memo = ARGV[1] .. '|acq|' .. ARGV[3]
local r = redis.pcall('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
if bad(r) then return failed('SET', r) end
if r then
  local fence = redis.pcall('INCR', KEYS[2])
  if not bad(fence) then
    local cmd
    r, cmd = ring_issue(KEYS[4], fence)
    if r then
      redis.pcall('DEL', KEYS[1])  -- undo: no hold whose release could be misread
      return failed(cmd, r)
    end
    r = redis.pcall('SET', KEYS[3], memo .. '|' .. fence, 'PX', ARGV[4])
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
  local fence = done and string.sub(done, 1, #memo + 1) == memo .. '|'
    and tonumber(string.sub(done, #memo + 2))
  if fence then
    r = redis.pcall('PEXPIRE', KEYS[1], ARGV[2])
    if bad(r) then return failed('PEXPIRE', r) end
    return {'ok', fence}
  end
end
r = redis.pcall('PTTL', KEYS[1])
if bad(r) then return failed('PTTL', r) end
return {'busy', r}
