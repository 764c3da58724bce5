-- fenced_write: a guarded write at the protected resource: accept a write only if its fencing
-- token is greater than every token accepted before (Kleppmann 2016, "fencing tokens").
-- KEYS[1] target hash   holds the data fields and the field "_fence" (last accepted token)
-- ARGV[1] fence         fencing token of the writer (integer)
-- ARGV[2..] field, value pairs to write
-- returns {1, fence}    written; fence is now the last accepted token
--         {0, last}     rejected: last is the greater or equal token already accepted
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command (nothing written)

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

local last = redis.pcall('HGET', KEYS[1], '_fence')
if bad(last) then return failed('HGET', last) end
last = tonumber(last or '0')
local fence = tonumber(ARGV[1])
if fence <= last then
  return {0, last}
end
local r = redis.pcall('HSET', KEYS[1], '_fence', ARGV[1], unpack(ARGV, 2))
if bad(r) then return failed('HSET', r) end
return {1, fence}
