-- multi_status: check that this token still holds every name of a chunk of plain locks (MultiLock).
-- Every name is an ordinary Lock (_multi.lua). Writes nothing.
-- KEYS[1] lock key      of name 1: string "<token>|<fence>|<meta>" (multi_acquire.lua)
--         and so on, one key a name: name i's lock key is KEYS[i], for i = 1 .. n, where
--         n = #KEYS
-- ARGV[1] token         owner token, one for all the names
-- returns {"ok", pttl_ms, 0}    all ours; pttl_ms is the least remaining TTL
--         {"gone" or "taken", 0, i}  name i is not ours
--         error "NOPERM redislock: <COMMAND> ..."  the ACL refused a command

-- include: _acl.lua
-- include: _multi.lua

local locks, values = chunk_values(KEYS, 1)  -- name i's lock key is KEYS[i]
if not locks then return values end
local n = #locks
local lost = first_not_ours(values, n, ARGV[1] .. '|')
if lost then return lost end
local least = -1
for i = 1, n do
  local ms = redis.pcall('PTTL', locks[i])
  if bad(ms) then return failed('PTTL', ms) end
  if least < 0 or ms < least then
    least = ms
  end
end
return {'ok', least, 0}
