-- lock_status: what this owner token holds, for owned(), remaining() and adopting a lock by token.
-- KEYS[1] lock key
-- KEYS[2] fence key     while the lock is held, its value is the holder's fencing token
-- ARGV[1] token         owner token
-- returns {"ok", pttl_ms, fence}   this token holds the lock; fence is its fencing token
--         {"gone", 0, 0}           no lock key
--         {"taken", 0, 0}          another owner holds the key
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command (writes nothing)

-- ACL (docs/acl.md): every command runs through pcall; a refused one makes the script answer
-- "NOPERM redislock: <COMMAND> ..." (Redis's own refusal inside a script names no command)
-- after undoing what this call wrote before it; any other error reply is returned as is.
local function bad(r) return type(r) == 'table' and r.err ~= nil end
local function failed(cmd, r)
  local e = r.err
  if string.find(e, 'user executing the script', 1, true) or string.sub(e, 1, 6) == 'NOPERM' then
    return redis.error_reply('NOPERM redislock: ' .. cmd .. ' is refused to this user by an ACL')
  end
  return r
end

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
