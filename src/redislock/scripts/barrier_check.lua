-- barrier_check: whether a Barrier party is still a member of its round, and whether that round opened.
-- KEYS[1] barrier key   "<prefix>{<name>}:barrier": the round's hash (_barrier.lua)
-- KEYS[2] members key   "<barrier key>:members": the members' lease ends (_barrier.lua)
-- ARGV[1] token         the party's owner token
-- returns {status, gen, live, parties, next_ms}: "wait" (a member; the round is not open
--                yet), "open" (a member of the open round), or "gone" (the token is no
--                member: its lease ended; gen 0 when no round is left)
--         error "ERR redislock barrier: bad arguments for check"   nothing read or written
--         error "redislock - <key> ..."   the barrier key holds a hash these scripts did not
--                write; nothing written
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command: nothing
--                written (Redis 7: checked first; 6.2: refused where it is reached)

-- include: _acl.lua
-- include: _barrier.lua

local bkey, members = KEYS[1], KEYS[2]
local token = ARGV[1]
if not barrier_token(token) then return barrier_bad_args('check') end
local b, err = barrier_begin(bkey, members, {})
if not b then return err end
local mine, e = barrier_member(members, token)
if mine == nil then return e end
if not mine then return barrier_reply(members, 'gone', b) end
return barrier_reply(members, b.state == 'open' and 'open' or 'wait', b)
