-- barrier_leave: remove a Barrier party from its round; the last member to leave closes the round.
-- KEYS[1] barrier key   "<prefix>{<name>}:barrier": the round's hash (_barrier.lua); also
--                       the channel "B|closed|<gen>" is published on when the round closes
-- KEYS[2] members key   "<barrier key>:members": the members' lease ends (_barrier.lua)
-- KEYS[3] done key      "<barrier key>:done": sorted set token -> server time (ms) it left,
--                       for done_ms, so that a leave sent again answers "ok"
-- ARGV[1] token         the party's owner token
-- ARGV[2] done_ms       how long a left token is remembered, milliseconds
-- returns {"ok", live, gen, next_ms} the token is no member now (live: the members left; 0:
--                the round closed, "B|closed|<gen>" was published, its keys deleted), also
--                for a resent leave; {"gone", live, gen, next_ms} it was no member (its
--                lease ended)
--         error "ERR redislock barrier: bad arguments for leave"   nothing read or written
--         error "redislock - <key> ..."   the barrier key holds a hash these scripts did not
--                write; nothing written
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command: nothing
--                written (Redis 7: checked first; 6.2: refused where it is reached)

-- include: _acl.lua
-- include: _barrier.lua

local bkey, members, done = KEYS[1], KEYS[2], KEYS[3]
local token = ARGV[1]
if not barrier_token(token) or not string.match(ARGV[2] or '', BARRIER_POSITIVE) then
  return barrier_bad_args('leave')
end
local b, err = barrier_begin(bkey, members, {members, 'ZREM', done, 'ZSCORE', done, 'ZADD',
  done, 'ZREMRANGEBYSCORE', done, 'PEXPIRE'})
if not b then return err end
local keep, now = tonumber(ARGV[2]), b.now
local mine, e = barrier_member(members, token)
if mine == nil then return e end
if not mine then
  local was = redis.pcall('ZSCORE', done, token)
  if bad(was) then return failed('ZSCORE', was) end
  local nxt
  nxt, e = barrier_leases(members, now)
  if not nxt then return e end
  return {was and 'ok' or 'gone', b.live, b.gen, nxt}
end
-- 6.2: the memo's commands are tried before the member goes (ZADD XX of a non-member and a
-- PEXPIRE of the memo, which may be absent, change nothing)
local r = redis.pcall('ZADD', done, 'XX', now, token)
if bad(r) then return failed('ZADD', r) end
r = redis.pcall('PEXPIRE', done, keep)
if bad(r) then return failed('PEXPIRE', r) end
r = redis.pcall('ZREM', members, token)
if bad(r) then return failed('ZREM', r) end
local live = b.live - 1
r = redis.pcall('ZREMRANGEBYSCORE', done, '-inf', now - keep)
if bad(r) then return failed('ZREMRANGEBYSCORE', r) end
redis.pcall('ZADD', done, now, token)
redis.pcall('PEXPIRE', done, keep)
if live == 0 then
  e = barrier_close(bkey, members, b.gen, b.state)
  if e then return e end
end
local nxt
nxt, e = barrier_leases(members, now)
if not nxt then return e end
return {'ok', live, b.gen, nxt}
