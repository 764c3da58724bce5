-- election_advertise: write an Election's leader key for the lock's owner of that term, and publish it.
-- (After a campaign won, and on proclaim; the keys and the messages: _election.lua.)
-- KEYS[1] lock key      the Election's lock (a Lock's: "<token>|<fence>|<meta>"); read only
-- KEYS[2] leader key    "<lock key>:leader", "<term>|<identity>|<value>"; also the channel's
--                       name
-- ARGV[1] token         owner token
-- ARGV[2] term          the owner's fencing token (digits)
-- ARGV[3] entry         "<identity>|<value>"
-- returns {"ok", pttl_ms}  the token holds the lock in that term: the leader key written with
--                          TTL 4 * the lock's PTTL (pttl_ms), and published
--         {"gone", 0}      no lock key, or another owner's or term's (nothing written)
--         error "ERR redislock election: bad arguments ..."  term not digits, or ARGV[3]
--                          missing; nothing read or written
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command

-- include: _acl.lua
-- include: _election.lua

local lock, leader = KEYS[1], KEYS[2]
local term, entry = ARGV[2], ARGV[3]
local pttl, refusal = owner_pttl('advertise', lock, ARGV[1], term, entry)
if not pttl then return refusal end
return advertise(leader, term, entry, pttl)
