-- fenced_write: a guarded write at the protected resource: accept a write only if its fencing
-- token is greater than every token accepted before (Kleppmann 2016, "fencing tokens").
-- KEYS[1] target hash   holds the data fields and the field "_fence" (last accepted token)
-- ARGV[1] fence         fencing token of the writer (integer)
-- ARGV[2..] field, value pairs to write
-- returns {1, fence}    written; fence is now the last accepted token
--         {0, last}     rejected: last is the greater or equal token already accepted
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command (nothing written)

-- include: _acl.lua

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
