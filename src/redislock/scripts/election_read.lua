-- election_read: the fencing token and PTTL of an Election's lock, and its leader key (leader()).
-- (The keys: _election.lua.)
-- KEYS[1] lock key      the Election's lock (a Lock's: "<token>|<fence>|<meta>")
-- KEYS[2] leader key    "<lock key>:leader", "<term>|<identity>|<value>"
-- ARGV: none
-- returns {fence, pttl_ms, leader}  fence 0 and pttl 0 when no lock key; leader is the leader
--                                   key's value or false (the caller checks its term against
--                                   the fence)
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command

-- include: _acl.lua

local lock, leader = KEYS[1], KEYS[2]
local v = redis.pcall('GET', lock)
if bad(v) then return failed('GET', v) end
local current = redis.pcall('GET', leader)
if bad(current) then return failed('GET', current) end
if not v then return {0, 0, current} end
local pttl = redis.pcall('PTTL', lock)
if bad(pttl) then return failed('PTTL', pttl) end
local fence = tonumber(string.match(v, '^[^|]*|(%d+)|')) or 0
return {fence, pttl, current}
