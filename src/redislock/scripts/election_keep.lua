-- election_keep: refresh the TTL of an Election's leader key after a renewal of its lock (written again if it went).
-- (The keys and the messages: _election.lua.) Nothing is published while the key is there.
-- KEYS[1] lock key      the Election's lock (a Lock's: "<token>|<fence>|<meta>"); read only
-- KEYS[2] leader key    "<lock key>:leader", "<term>|<identity>|<value>"; also the channel's
--                       name
-- ARGV[1] token         owner token
-- ARGV[2] term          the owner's fencing token (digits)
-- ARGV[3] entry         "<identity>|<value>": written (and published) if the leader key of
--                       that term is missing (deleted by hand, or an earlier term's)
-- returns {"ok", pttl_ms}  the token holds the lock in that term: the leader key's TTL is now
--                          4 * the lock's PTTL (pttl_ms)
--         {"gone", 0}      no lock key, or another owner's or term's (nothing written)
--         error "ERR redislock election: bad arguments ..."  term not digits, or ARGV[3]
--                          missing; nothing read or written
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command

-- include: _acl.lua
-- include: _election.lua

local lock, leader = KEYS[1], KEYS[2]
local term, entry = ARGV[2], ARGV[3]
local pttl, refusal = owner_pttl('keep', lock, ARGV[1], term, entry)
if not pttl then return refusal end

local current = redis.pcall('GET', leader)
if bad(current) then return failed('GET', current) end
if current and string.sub(current, 1, #term + 1) == term .. '|' then
  local e = redis.pcall('PEXPIRE', leader, 4 * pttl)
  if bad(e) then return failed('PEXPIRE', e) end
  return {'ok', pttl}
end
return advertise(leader, term, entry, pttl)  -- the leader key went: written again
