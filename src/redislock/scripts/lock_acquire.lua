-- lock_acquire: take the lock if nobody holds it, issuing the next fencing token in the same step.
-- KEYS[1] lock key      string "<token>|<fence>|<meta>", always with a PX TTL
-- KEYS[2] fence key     the name's slot counter (_fence.lua): integer, never expires, never
--                       reset; INCR only on success; shared by the names of one hash slot
-- KEYS[3] waiters key   marker "some client is waiting"; its presence makes release push a wake-up
-- ARGV[1] token         owner token (>= 32 hex chars, no '|')
-- ARGV[2] ttl_ms        lease length, milliseconds (integer >= 1)
-- ARGV[3] meta          holder metadata "<host>|<pid>|<acquired_unix_ms>"
-- ARGV[4] wait_ms       0 for a single try; else how long to keep the waiters marker, milliseconds
-- returns {"ok", fence}        acquired; fence is the new fencing token
--         {"busy", pttl_ms}    held by someone else; pttl_ms is the holder's remaining TTL (-1: no TTL)
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command; nothing is held
-- Idempotent for one token: a client that retries after losing the reply (redis-py retries
-- on timeouts and dropped connections) gets {"ok", fence} for its own hold (the token stored
-- in the lock value), with the TTL set to ttl_ms again, so the lease runs from the retry,
-- never from before the client sent it.
-- The value is written once, by the SET NX, with the token it would get (peek_fence in
-- _fence.lua): only if it was set is the token issued. A GET of the lock key follows the
-- SET NX iff it failed.

-- include: _acl.lua
-- include: _fence.lua

local fence, no = peek_fence(KEYS[2])
if no then return failed(no, fence) end
local r = redis.pcall(
  'SET', KEYS[1], ARGV[1] .. '|' .. fence .. '|' .. ARGV[3], 'NX', 'PX', ARGV[2])
if bad(r) then return failed('SET', r) end
if r then
  r, no = next_fence(KEYS[2])  -- issues that token
  if no then
    redis.pcall('DEL', KEYS[1])  -- undo: no hold without its fencing token
    return failed(no, r)
  end
  return {'ok', fence}
end
local v = redis.pcall('GET', KEYS[1])
if bad(v) then return failed('GET', v) end
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. '|' then
  r = redis.pcall('PEXPIRE', KEYS[1], ARGV[2])
  if bad(r) then return failed('PEXPIRE', r) end
  return {'ok', held_fence(v)}
end
if ARGV[4] ~= '0' then
  r = redis.pcall('SET', KEYS[3], '1', 'PX', ARGV[4])
  if bad(r) then return failed('SET', r) end
end
r = redis.pcall('PTTL', KEYS[1])
if bad(r) then return failed('PTTL', r) end
return {'busy', r}
