-- _barrier: shared by the Barrier scripts (barrier_enter, barrier_check, barrier_renew,
-- barrier_leave, barrier_left, barrier_read), written into each one where it says
-- "-- include: _barrier.lua", after "-- include: _acl.lua" (uses its bad(), failed(),
-- refused() and preflight()); not a script of its own.
-- A double barrier's rounds: the first party to enter when no live party is in starts a
-- round (a new generation, its party count); each enters as a member; the member that makes
-- the live members `parties` opens it; a party that comes to an open round waits until it
-- closed ("full"), then starts or joins the next. The round closes when no live member is
-- left (the last left, or the leases of the others ended): its keys are deleted. Both keys
-- expire when the latest member lease ends (PEXPIREAT).
-- The barrier key "<prefix>{<name>}:barrier": hash {gen, state, parties} of the current
-- round (state "enter" until it opens, then "open"); also the name of the channel its
-- changes are published on: "B|open|<gen>" when it opens, "B|closed|<gen>" when its last
-- member left. The members key "<barrier key>:members": sorted set token -> server time
-- (ms) its party's lease ends; a party whose lease ended is no member (the next call that
-- looks removes it).
-- next_ms, in the replies: milliseconds until the earliest member lease ends (a re-check
-- then sees whether that party renewed or went), -1 without members.
-- Keys and the commands run on them (the helpers take them as arguments): the barrier key
-- HMGET, PEXPIREAT, DEL, PUBLISH; the members key ZRANGE, ZREMRANGEBYSCORE, ZCARD,
-- PEXPIREAT, ZSCORE, DEL.

local BARRIER_POSITIVE = '^[1-9]%d*$'

-- Whether token is an owner token (hex digits and dots).
local function barrier_token(token)
  return string.match(token or '', '^[%x.]+$') ~= nil
end

local function barrier_bad_args(op)
  return redis.error_reply('ERR redislock barrier: bad arguments for ' .. op)
end

-- The server time in ms, or nil and an error reply.
local function barrier_time()
  local t = redis.pcall('TIME')
  if bad(t) then return nil, failed('TIME', t) end
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The round: gen, state, parties (0, '', 0: none), or nil and an error reply (the HMGET
-- failed, or the hash was not written by these scripts).
local function barrier_round(bkey)
  local v = redis.pcall('HMGET', bkey, 'gen', 'state', 'parties')
  if bad(v) then return nil, failed('HMGET', v) end
  if not v[1] and not v[2] and not v[3] then return 0, '', 0 end
  if not string.match(v[1] or '', '^%d+$') or (v[2] ~= 'enter' and v[2] ~= 'open')
      or not string.match(v[3] or '', '^%d+$') then
    return nil, redis.error_reply('redislock - ' .. bkey .. ' holds a hash that is not '
      .. 'a Barrier (gen, state and parties)')
  end
  return tonumber(v[1]), v[2], tonumber(v[3])
end

-- Milliseconds until the earliest member lease ends (-1: no member) and the latest end, or
-- nil and an error reply.
local function barrier_leases(members, now)
  local first = redis.pcall('ZRANGE', members, 0, 0, 'WITHSCORES')
  if bad(first) then return nil, failed('ZRANGE', first) end
  if #first == 0 then return -1, 0 end
  local last = redis.pcall('ZRANGE', members, -1, -1, 'WITHSCORES')
  if bad(last) then return nil, failed('ZRANGE', last) end
  return math.max(0, tonumber(first[2]) - now), tonumber(last[2])
end

-- Both keys expire when the latest member lease ends (last, ms): nil, or an error reply.
local function barrier_settle(bkey, members, now, last)
  if last <= now then return nil end
  local r = redis.pcall('PEXPIREAT', bkey, last)
  if bad(r) then return failed('PEXPIREAT', r) end
  r = redis.pcall('PEXPIREAT', members, last)
  if bad(r) then return failed('PEXPIREAT', r) end
  return nil
end

-- The round of gen in state ends: its keys go, and if it was open its leavers are told.
-- nil, or an error reply.
local function barrier_close(bkey, members, gen, state)
  local d = redis.pcall('DEL', bkey, members)
  if bad(d) then return failed('DEL', d) end
  if state == 'open' then
    -- Refused only on Redis 6.2 (7 checked it first): the round is closed all the same,
    -- and the waiters find it by their re-checks.
    redis.pcall('PUBLISH', bkey, 'B|closed|' .. gen)
  end
  return nil
end

-- Redis 7: every command the call may run is checked before anything is read or written:
-- the common ones, a renewal's (renew) or the others', and the pairs of more {key, COMMAND,
-- ...}. Returns the first refused command, or nil.
local function barrier_preflight(bkey, members, renew, more)
  local uses = {members, 'ZSCORE', members, 'ZRANGE', bkey, 'PEXPIREAT', members, 'PEXPIREAT'}
  local own
  if renew then
    own = {members, 'ZADD'}
  else
    own = {members, 'ZREMRANGEBYSCORE', members, 'ZCARD', bkey, 'HMGET', bkey, 'DEL',
      members, 'DEL', bkey, 'PUBLISH'}
  end
  for _, x in ipairs(own) do uses[#uses + 1] = x end
  for _, x in ipairs(more) do uses[#uses + 1] = x end
  return preflight(uses, true)
end

-- The start of an enter, check, leave or left (after its arguments were checked): the
-- preflight (more: the op's own {key, COMMAND, ...}), the server time, the ended leases
-- removed, and the round, closed if nobody is in any more. Returns {now, live, gen, state,
-- parties} (gen 0: no round), or nil and an error reply.
local function barrier_begin(bkey, members, more)
  local no = barrier_preflight(bkey, members, false, more)
  if no then return nil, refused(no) end
  local now, e = barrier_time()
  if not now then return nil, e end
  local r = redis.pcall('ZREMRANGEBYSCORE', members, '-inf', now)
  if bad(r) then return nil, failed('ZREMRANGEBYSCORE', r) end
  local live = redis.pcall('ZCARD', members)
  if bad(live) then return nil, failed('ZCARD', live) end
  local gen, state, parties = barrier_round(bkey)
  if not gen then return nil, state end
  if gen > 0 and live == 0 then  -- nobody is in any more
    e = barrier_close(bkey, members, gen, state)
    if e then return nil, e end
    gen, state, parties = 0, '', 0
  end
  return {now = now, live = live, gen = gen, state = state, parties = parties}
end

-- Whether token is a member: its lease end (a string) or false; nil and an error reply.
local function barrier_member(members, token)
  local s = redis.pcall('ZSCORE', members, token)
  if bad(s) then return nil, failed('ZSCORE', s) end
  return s
end

-- A reply {status, gen, live, parties, next_ms} for round b (from barrier_begin), or an
-- error reply.
local function barrier_reply(members, status, b)
  local nxt, err = barrier_leases(members, b.now)
  if not nxt then return err end
  return {status, b.gen, b.live, b.parties, nxt}
end
