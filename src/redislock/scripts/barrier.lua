-- barrier: a double barrier's rounds: parties enter, the round opens once enough live parties are in, and closes once all have left.
-- KEYS[1] barrier key   "<prefix>{<name>}:barrier": hash {gen, state, parties} of the current
--                       round (state "enter" until it opens, then "open"); also the name of
--                       the channel its changes are published on: "B|open|<gen>" when it
--                       opens, "B|closed|<gen>" when its last member left
-- KEYS[2] members key   "<barrier key>:members": sorted set token -> server time (ms) its
--                       party's lease ends; a party whose lease ended is no member (the
--                       next call that looks removes it)
-- KEYS[3] done key      leave: "<barrier key>:done": sorted set token -> server time (ms) it
--                       left, for done_ms, so that a leave sent again answers "ok"
-- KEYS[4] fence key     enter: the slot's fencing counter (_fence.lua): a round's generation
--                       is the next fencing token of the name's hash slot
-- ARGV[1] op            "enter", "check", "renew", "leave", "left" or "read"
-- ARGV[2] token         enter, check, renew, leave: the party's owner token
-- ARGV[3] lease_ms      enter, renew: the party's lease from now, milliseconds (renew only
--                       moves its end later)
-- ARGV[4] parties       enter: how many live parties open a round, an integer >= 1
-- ARGV[5] gen           left: the generation of the round the caller left
-- ARGV[6] done_ms       leave: how long a left token is remembered, milliseconds
-- A round: the first party to enter when no live party is in starts it (a new generation,
-- its party count); each enters as a member; the member that makes the live members
-- `parties` opens it; a party that comes to an open round waits until it closed ("full"),
-- then starts or joins the next. The round closes when no live member is left (the last
-- left, or the leases of the others ended): its keys are deleted. Both keys expire when
-- the latest member lease ends (PEXPIREAT).
-- next_ms below: milliseconds until the earliest member lease ends (a re-check then sees
-- whether that party renewed or went), -1 without members.
-- returns enter: {status, gen, live, parties, next_ms}: "wait" (a member; the round is not
--                open yet), "open" (a member of the open round: this call opened it and
--                published "B|open|<gen>", or the token was in already), "full" (the
--                round is open without this token: nothing written), "mismatch" (the
--                round counts another number of parties, given in parties: nothing written)
--         check: {status, gen, live, parties, next_ms}: "wait", "open", or "gone" (the
--                token is no member: its lease ended; gen 0 when no round is left)
--         renew: {"ok", lease_ms} the lease now ends lease_ms from now; {"gone", 0}
--         leave: {"ok", live, gen, next_ms} the token is no member now (live: the members
--                left; 0: the round closed, "B|closed|<gen>" was published, its keys
--                deleted), also for a resent leave; {"gone", live, gen, next_ms} it was no
--                member (its lease ended)
--         left:  {"done", 0, -1} the round of gen has closed (another round, or none, is
--                current); {"wait", live, next_ms} its members are still in
--         read:  {gen, state, parties, live, next_ms}: {0, "", 0, 0, -1} without a round
--         error "ERR redislock barrier: ..."   an unknown op or bad arguments; nothing
--                read or written
--         error "redislock - <key> ..."   the barrier key holds a hash this script did not
--                write; nothing written
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command: nothing
--                written (Redis 7: checked first; 6.2: refused where it is reached)

-- include: _acl.lua
-- include: _fence.lua

local op = ARGV[1]
local known = {enter = true, check = true, renew = true, leave = true, left = true, read = true}
if not known[op] then
  return redis.error_reply('ERR redislock barrier: unknown op ' .. tostring(op))
end
local positive = '^[1-9]%d*$'
local token = ARGV[2] or ''
local okargs = true
if op == 'enter' or op == 'check' or op == 'renew' or op == 'leave' then
  okargs = string.match(token, '^[%x.]+$') ~= nil
end
if op == 'enter' or op == 'renew' then
  okargs = okargs and string.match(ARGV[3] or '', positive) ~= nil
end
if op == 'enter' then okargs = okargs and string.match(ARGV[4] or '', positive) ~= nil end
if op == 'left' then okargs = string.match(ARGV[5] or '', '^%d+$') ~= nil end
if op == 'leave' then okargs = okargs and string.match(ARGV[6] or '', positive) ~= nil end
if not okargs then
  return redis.error_reply('ERR redislock barrier: bad arguments for ' .. op)
end

-- Redis 7: every command this call may run, checked before anything is read or written.
if op ~= 'read' then
  local uses = {KEYS[2], 'ZSCORE', KEYS[2], 'ZRANGE', KEYS[1], 'PEXPIREAT', KEYS[2], 'PEXPIREAT'}
  local more
  if op == 'renew' then
    more = {KEYS[2], 'ZADD'}
  else
    more = {KEYS[2], 'ZREMRANGEBYSCORE', KEYS[2], 'ZCARD', KEYS[1], 'HMGET', KEYS[1], 'DEL',
      KEYS[2], 'DEL', KEYS[1], 'PUBLISH'}
  end
  if op == 'enter' then
    for _, x in ipairs({KEYS[2], 'ZADD', KEYS[1], 'HSET', KEYS[4], 'INCR'}) do
      more[#more + 1] = x
    end
  elseif op == 'leave' then
    for _, x in ipairs({KEYS[2], 'ZREM', KEYS[3], 'ZSCORE', KEYS[3], 'ZADD',
        KEYS[3], 'ZREMRANGEBYSCORE', KEYS[3], 'PEXPIRE'}) do
      more[#more + 1] = x
    end
  end
  for _, x in ipairs(more) do uses[#uses + 1] = x end
  local no = preflight(uses, true)
  if no then return refused(no) end
end

local t = redis.pcall('TIME')
if bad(t) then return failed('TIME', t) end
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- The round: gen, state, parties (0, '', 0: none), or nil for a hash not written here.
local function round()
  local v = redis.pcall('HMGET', KEYS[1], 'gen', 'state', 'parties')
  if bad(v) then return nil, failed('HMGET', v) end
  if not v[1] and not v[2] and not v[3] then return 0, '', 0 end
  if not string.match(v[1] or '', '^%d+$') or (v[2] ~= 'enter' and v[2] ~= 'open')
      or not string.match(v[3] or '', '^%d+$') then
    return nil, redis.error_reply('redislock - ' .. KEYS[1] .. ' holds a hash that is not '
      .. 'a Barrier (gen, state and parties)')
  end
  return tonumber(v[1]), v[2], tonumber(v[3])
end

-- Milliseconds until the earliest member lease ends (-1: no member), and the latest end.
local function leases()
  local first = redis.pcall('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if bad(first) then return nil, failed('ZRANGE', first) end
  if #first == 0 then return -1, 0 end
  local last = redis.pcall('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if bad(last) then return nil, failed('ZRANGE', last) end
  return math.max(0, tonumber(first[2]) - now), tonumber(last[2])
end

-- Both keys expire when the latest member lease ends.
local function settle(last)
  if last <= now then return nil end
  local r = redis.pcall('PEXPIREAT', KEYS[1], last)
  if bad(r) then return failed('PEXPIREAT', r) end
  r = redis.pcall('PEXPIREAT', KEYS[2], last)
  if bad(r) then return failed('PEXPIREAT', r) end
  return nil
end

if op == 'read' then
  local gen, state, parties = round()
  if not gen then return state end
  local live = redis.pcall('ZCOUNT', KEYS[2], '(' .. now, '+inf')
  if bad(live) then return failed('ZCOUNT', live) end
  local nxt = redis.pcall('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES',
    'LIMIT', 0, 1)
  if bad(nxt) then return failed('ZRANGEBYSCORE', nxt) end
  return {gen, state, parties, live, #nxt == 0 and -1 or tonumber(nxt[2]) - now}
end

if op == 'renew' then
  local score = redis.pcall('ZSCORE', KEYS[2], token)
  if bad(score) then return failed('ZSCORE', score) end
  if not score or tonumber(score) <= now then return {'gone', 0} end
  local ends = math.max(tonumber(score), now + tonumber(ARGV[3]))
  local first, last = leases()
  if not first then return last end
  local e = settle(math.max(last, ends))  -- first: a refusal leaves the lease as it was
  if e then return e end
  local r = redis.pcall('ZADD', KEYS[2], 'XX', ends, token)
  if bad(r) then return failed('ZADD', r) end
  return {'ok', ends - now}
end

-- The other ops see only live members: the ended leases go first.
local r = redis.pcall('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if bad(r) then return failed('ZREMRANGEBYSCORE', r) end
local live = redis.pcall('ZCARD', KEYS[2])
if bad(live) then return failed('ZCARD', live) end
local gen, state, parties = round()
if not gen then return state end

-- The round ends: its keys go, and if it was open its leavers are told.
local function close()
  local d = redis.pcall('DEL', KEYS[1], KEYS[2])
  if bad(d) then return failed('DEL', d) end
  if state == 'open' then
    -- Refused only on Redis 6.2 (7 checked it first): the round is closed all the same,
    -- and the waiters find it by their re-checks.
    redis.pcall('PUBLISH', KEYS[1], 'B|closed|' .. gen)
  end
  gen, state, parties = 0, '', 0
  return nil
end

if gen > 0 and live == 0 then  -- nobody is in any more
  local e = close()
  if e then return e end
end

if op == 'left' then
  if gen == 0 or gen ~= tonumber(ARGV[5]) then return {'done', 0, -1} end
  local nxt, err = leases()
  if not nxt then return err end
  return {'wait', live, nxt}
end

local mine = redis.pcall('ZSCORE', KEYS[2], token)
if bad(mine) then return failed('ZSCORE', mine) end

if op == 'check' then
  local nxt, err = leases()
  if not nxt then return err end
  if not mine then return {'gone', gen, live, parties, nxt} end
  return {state == 'open' and 'open' or 'wait', gen, live, parties, nxt}
end

if op == 'leave' then
  local keep = tonumber(ARGV[6])
  if not mine then
    local was = redis.pcall('ZSCORE', KEYS[3], token)
    if bad(was) then return failed('ZSCORE', was) end
    local nxt, err = leases()
    if not nxt then return err end
    return {was and 'ok' or 'gone', live, gen, nxt}
  end
  -- 6.2: the memo's commands are tried before the member goes (ZADD XX of a non-member
  -- and a PEXPIRE of the memo, which may be absent, change nothing)
  r = redis.pcall('ZADD', KEYS[3], 'XX', now, token)
  if bad(r) then return failed('ZADD', r) end
  r = redis.pcall('PEXPIRE', KEYS[3], keep)
  if bad(r) then return failed('PEXPIRE', r) end
  r = redis.pcall('ZREM', KEYS[2], token)
  if bad(r) then return failed('ZREM', r) end
  live = live - 1
  r = redis.pcall('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - keep)
  if bad(r) then return failed('ZREMRANGEBYSCORE', r) end
  redis.pcall('ZADD', KEYS[3], now, token)
  redis.pcall('PEXPIRE', KEYS[3], keep)
  local left = gen
  if live == 0 then
    local e = close()
    if e then return e end
  end
  local nxt, err = leases()
  if not nxt then return err end
  return {'ok', live, left, nxt}
end

-- enter
local lease, want = tonumber(ARGV[3]), tonumber(ARGV[4])
if gen > 0 and mine then  -- sent again: as it is
  local nxt, err = leases()
  if not nxt then return err end
  return {state == 'open' and 'open' or 'wait', gen, live, parties, nxt}
end
if state == 'open' then
  local nxt, err = leases()
  if not nxt then return err end
  return {'full', gen, live, parties, nxt}
end
if gen > 0 and parties ~= want then return {'mismatch', gen, live, parties, -1} end
local first, last = leases()
if not first then return last end
local ends = now + lease
-- Redis 6.2 has no preflight: the commands that follow a write are tried first where they
-- change nothing (the keys' expiry set as it will be, a no-op on a new round's absent
-- keys; ZADD XX of a non-member; the round's state written as it is).
local e = settle(math.max(last, ends))
if e then return e end
r = redis.pcall('ZADD', KEYS[2], 'XX', ends, token)
if bad(r) then return failed('ZADD', r) end
if gen > 0 then
  r = redis.pcall('HSET', KEYS[1], 'state', state)
  if bad(r) then return failed('HSET', r) end
end
if gen == 0 then
  local d = redis.pcall('DEL', KEYS[2])  -- a members set without its round: not a round's
  if bad(d) then return failed('DEL', d) end
  local g, cmd = next_fence(KEYS[4])
  if cmd then return failed(cmd, g) end
  gen, state, parties = g, 'enter', want
  r = redis.pcall('HSET', KEYS[1], 'gen', gen, 'state', state, 'parties', parties)
  if bad(r) then return failed('HSET', r) end
end
r = redis.pcall('ZADD', KEYS[2], ends, token)
if bad(r) then return failed('ZADD', r) end
live = live + 1
local status = 'wait'
if live >= parties then
  status, state = 'open', 'open'
  r = redis.pcall('HSET', KEYS[1], 'state', 'open')
  if bad(r) then return failed('HSET', r) end
  -- Refused only on Redis 6.2 (7 checked it first): the waiters find it by their re-checks.
  redis.pcall('PUBLISH', KEYS[1], 'B|open|' .. gen)
end
e = settle(math.max(last, ends))
if e then return e end
local nxt, err = leases()
if not nxt then return err end
return {status, gen, live, parties, nxt}
