-- barrier_left: whether the Barrier round a party left has closed (every member left, or its lease ended).
-- KEYS[1] barrier key   "<prefix>{<name>}:barrier": the round's hash (_barrier.lua)
-- KEYS[2] members key   "<barrier key>:members": the members' lease ends (_barrier.lua)
-- ARGV[1] gen           the generation of the round the caller left
-- returns {"done", 0, -1} the round of gen has closed (another round, or none, is current)
--         {"wait", live, next_ms} its members are still in
--         error "ERR redislock barrier: bad arguments for left"   nothing read or written
--         error "redislock - <key> ..."   the barrier key holds a hash these scripts did not
--                write; nothing written
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command: nothing
--                written (Redis 7: checked first; 6.2: refused where it is reached)

-- include: _acl.lua
-- include: _barrier.lua

local bkey, members = KEYS[1], KEYS[2]
if not string.match(ARGV[1] or '', '^%d+$') then return barrier_bad_args('left') end
local b, err = barrier_begin(bkey, members, {})
if not b then return err end
if b.gen == 0 or b.gen ~= tonumber(ARGV[1]) then return {'done', 0, -1} end
local nxt, e = barrier_leases(members, b.now)
if not nxt then return e end
return {'wait', b.live, nxt}
