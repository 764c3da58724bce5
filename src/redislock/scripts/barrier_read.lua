-- barrier_read: a Barrier's current round, its live members and the time to the next lease end, read without writing.
-- KEYS[1] barrier key   "<prefix>{<name>}:barrier": the round's hash (_barrier.lua)
-- KEYS[2] members key   "<barrier key>:members": the members' lease ends (_barrier.lua)
-- ARGV: none
-- returns {gen, state, parties, live, next_ms}   {0, "", 0, 0, -1} without a round
--         error "redislock - <key> ..."   the barrier key holds a hash these scripts did not
--                write
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command

-- include: _acl.lua
-- include: _barrier.lua

local bkey, members = KEYS[1], KEYS[2]
local now, e = barrier_time()
if not now then return e end
local gen, state, parties = barrier_round(bkey)
if not gen then return state end
local live = redis.pcall('ZCOUNT', members, '(' .. now, '+inf')
if bad(live) then return failed('ZCOUNT', live) end
local nxt = redis.pcall('ZRANGEBYSCORE', members, '(' .. now, '+inf', 'WITHSCORES',
  'LIMIT', 0, 1)
if bad(nxt) then return failed('ZRANGEBYSCORE', nxt) end
return {gen, state, parties, live, #nxt == 0 and -1 or tonumber(nxt[2]) - now}
