-- lock_status: what this owner token holds, for owned(), remaining() and adopting a lock by token.
-- KEYS[1] lock key      string "<token>|<fence>|<meta>": the holder's fencing token is in it
-- ARGV[1] token         owner token
-- returns {"ok", pttl_ms, fence}   this token holds the lock; fence is its fencing token
--         {"gone", 0, 0}           no lock key
--         {"taken", 0, 0}          another owner holds the key
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command (writes nothing)

-- include: _acl.lua
-- include: _fence.lua

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
return {'ok', pttl, held_fence(v)}
