-- barrier_enter: make a Barrier party a member of the current round (starting one if none), opening it once enough live parties are in.
-- KEYS[1] barrier key   "<prefix>{<name>}:barrier": the round's hash (_barrier.lua); also
--                       the channel "B|open|<gen>" is published on when the round opens
-- KEYS[2] members key   "<barrier key>:members": the members' lease ends (_barrier.lua)
-- KEYS[3] fence key     the slot's fencing counter (_fence.lua): a round's generation is the
--                       next fencing token of the name's hash slot
-- ARGV[1] token         the party's owner token
-- ARGV[2] lease_ms      the party's lease from now, milliseconds
-- ARGV[3] parties       how many live parties open a round, an integer >= 1
-- returns {status, gen, live, parties, next_ms}: "wait" (a member; the round is not open
--                yet), "open" (a member of the open round: this call opened it and
--                published "B|open|<gen>", or the token was in already), "full" (the round
--                is open without this token: nothing written), "mismatch" (the round counts
--                another number of parties, given in parties, next_ms -1: nothing written)
--         error "ERR redislock barrier: bad arguments for enter"   nothing read or written
--         error "redislock - <key> ..."   the barrier key holds a hash these scripts did not
--                write; nothing written
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command: nothing
--                written (Redis 7: checked first; 6.2: refused where it is reached)

-- include: _acl.lua
-- include: _fence.lua
-- include: _barrier.lua

local bkey, members, fence = KEYS[1], KEYS[2], KEYS[3]
local token = ARGV[1]
if not barrier_token(token) or not string.match(ARGV[2] or '', BARRIER_POSITIVE)
    or not string.match(ARGV[3] or '', BARRIER_POSITIVE) then
  return barrier_bad_args('enter')
end
local b, err = barrier_begin(bkey, members, {members, 'ZADD', bkey, 'HSET', fence, 'INCR'})
if not b then return err end
local lease, want, now = tonumber(ARGV[2]), tonumber(ARGV[3]), b.now
local mine, e = barrier_member(members, token)
if mine == nil then return e end
if b.gen > 0 and mine then  -- sent again: as it is
  return barrier_reply(members, b.state == 'open' and 'open' or 'wait', b)
end
if b.state == 'open' then return barrier_reply(members, 'full', b) end
if b.gen > 0 and b.parties ~= want then return {'mismatch', b.gen, b.live, b.parties, -1} end
local first, last = barrier_leases(members, now)
if not first then return last end
local ends = now + lease
-- Redis 6.2 has no preflight: the commands that follow a write are tried first where they
-- change nothing (the keys' expiry set as it will be, a no-op on a new round's absent
-- keys; ZADD XX of a non-member; the round's state written as it is).
e = barrier_settle(bkey, members, now, math.max(last, ends))
if e then return e end
local r = redis.pcall('ZADD', members, 'XX', ends, token)
if bad(r) then return failed('ZADD', r) end
if b.gen > 0 then
  r = redis.pcall('HSET', bkey, 'state', b.state)
  if bad(r) then return failed('HSET', r) end
else
  local d = redis.pcall('DEL', members)  -- a members set without its round: not a round's
  if bad(d) then return failed('DEL', d) end
  local g, cmd = next_fence(fence)
  if cmd then return failed(cmd, g) end
  b.gen, b.state, b.parties = g, 'enter', want
  r = redis.pcall('HSET', bkey, 'gen', b.gen, 'state', b.state, 'parties', b.parties)
  if bad(r) then return failed('HSET', r) end
end
r = redis.pcall('ZADD', members, ends, token)
if bad(r) then return failed('ZADD', r) end
b.live = b.live + 1
local status = 'wait'
if b.live >= b.parties then
  status, b.state = 'open', 'open'
  r = redis.pcall('HSET', bkey, 'state', 'open')
  if bad(r) then return failed('HSET', r) end
  -- Refused only on Redis 6.2 (7 checked it first): the waiters find it by their re-checks.
  redis.pcall('PUBLISH', bkey, 'B|open|' .. b.gen)
end
e = barrier_settle(bkey, members, now, math.max(last, ends))
if e then return e end
return barrier_reply(members, status, b)
