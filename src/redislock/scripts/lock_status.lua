-- lock_status: what this owner token holds, for owned(), remaining() and adopting a lock by token.
-- KEYS[1] lock key
-- KEYS[2] fence key     while the lock is held, its value is the holder's fencing token
-- ARGV[1] token         owner token
-- returns {"ok", pttl_ms, fence}   this token holds the lock; fence is its fencing token
--         {"gone", 0, 0}           no lock key
--         {"taken", 0, 0}          another owner holds the key
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command (writes nothing)

-- include: _acl.lua

local v = redis.pcall('GET', KEYS[1])
if bad(v) then return failed('GET', v) end
if not v then
  return {'gone', 0, 0}
end
if string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '|' then
  return {'taken', 0, 0}
end
local pttl = redis.pcall('PTTL', KEYS[1])
if bad(pttl) then return failed('PTTL', pttl) end
local fence = redis.pcall('GET', KEYS[2])
if bad(fence) then return failed('GET', fence) end
return {'ok', pttl, tonumber(fence or '0')}
