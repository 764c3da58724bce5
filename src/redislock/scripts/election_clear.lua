-- election_clear: delete an Election's leader key if it is of the given term, and publish that nobody leads.
-- (On resign, before the lock is released; the key and the messages: _election.lua.)
-- KEYS[1] leader key    "<lock key>:leader", "<term>|<identity>|<value>"; also the channel's
--                       name
-- ARGV[1] term          the resigning owner's fencing token (digits)
-- returns {"ok", 1}  deleted (and "L|0" published)
--         {"ok", 0}  it was another term's, or absent: nothing written
--         error "ERR redislock election: bad arguments ..."  term not digits; nothing read or
--                    written
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command

-- include: _acl.lua
-- include: _election.lua

local leader = KEYS[1]
local term = ARGV[1]
local wrong = bad_arguments('clear', term, '')
if wrong then return wrong end
local current = redis.pcall('GET', leader)
if bad(current) then return failed('GET', current) end
if not current or string.sub(current, 1, #term + 1) ~= term .. '|' then return {'ok', 0} end
local d = redis.pcall('DEL', leader)
if bad(d) then return failed('DEL', d) end
local p = redis.pcall('PUBLISH', leader, 'L|0')
if bad(p) then return failed('PUBLISH', p) end
return {'ok', 1}
