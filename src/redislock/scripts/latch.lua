-- latch: a CountDownLatch's count and generation, in one hash with a TTL; each set starts a generation.
-- KEYS[1] latch key     "<prefix>{<name>}:latch": hash {count, gen, since} (below); also the
--                       name of the channel a count reaching zero is published on
-- KEYS[2] done key      set, down: "<latch key>:done": sorted set op id -> server time (ms)
--                       the call ran, for the calls of the last done_ms, so that the same
--                       call sent again (a client's retry after a lost reply) counts once
-- KEYS[3] fence key     set: the slot's fencing counter (_fence.lua): a generation is the
--                       next fencing token of the name's hash slot
-- ARGV[1] op            "set" (start a generation), "down" (count one down) or "read"
-- ARGV[2] op_id         set, down: hex digits, new per call
-- ARGV[3] count         set: the count to start from, an integer >= 1
-- ARGV[4] ttl_ms        set, down: the TTL the latch key gets, milliseconds
-- ARGV[5] done_ms       set, down: how long an op id is remembered, milliseconds
-- The hash: count (what is left, >= 0), gen (its generation: a fencing token, so it strictly
-- increases) and since (every generation of this latch from since up to gen, gen excluded,
-- reached zero: since is the first generation set while the key was absent). A waiter of
-- generation g that finds gen > g knows that g reached zero if and only if since <= g.
-- returns set:  {"ok", count, gen}      a new generation counts down from count
--               {"busy", count, gen}    the latch is counting (count > 0): nothing written
--         down: {"ok", count, gen}      the count after this one; at 0 "Z|<gen>" was
--                                       published on KEYS[1] (the waiters' wake-up)
--               {"none", 0, gen}        not counting (count 0; gen 0: no latch): nothing
--                                       written
--         set, down whose op id ran already: {"ok", count, gen} of the latch now, nothing
--                                       written (the first call's reply was lost)
--         read: {count, gen, since, pttl_ms}   {0, 0, 0, -2} when there is no latch
--         error "ERR redislock latch: ..."   an unknown op or bad arguments; nothing read
--                                       or written
--         error "redislock - <key> ..."   the latch key holds a hash this script did not
--                                       write; nothing written
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command; nothing
--                                       written (Redis 7: checked first; 6.2: the command
--                                       that would come after a write is tried first)

-- include: _acl.lua
-- include: _fence.lua

-- The latch's count, gen and since (0, 0, 0: no latch), or nil for a hash not written here.
local function decode(v)
  if not v[1] and not v[2] and not v[3] then return 0, 0, 0 end
  for i = 1, 3 do
    if not v[i] or not string.match(v[i], '^%d+$') then return nil end
  end
  return tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
end

local function foreign()
  return redis.error_reply('redislock - ' .. KEYS[1] .. ' holds a hash that is not a '
    .. 'CountDownLatch (its count, gen and since fields are not all digits)')
end

local op = ARGV[1]
if op == 'read' then
  local v = redis.pcall('HMGET', KEYS[1], 'count', 'gen', 'since')
  if bad(v) then return failed('HMGET', v) end
  local count, gen, since = decode(v)
  if not count then return foreign() end
  local pttl = redis.pcall('PTTL', KEYS[1])
  if bad(pttl) then return failed('PTTL', pttl) end
  return {count, gen, since, pttl}
end
if op ~= 'set' and op ~= 'down' then
  return redis.error_reply('ERR redislock latch: unknown op ' .. tostring(op))
end
local id, n, ttl, keep = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local positive = '^[1-9]%d*$'
if not string.match(id or '', '^%x+$') or not string.match(ttl or '', positive)
    or not string.match(keep or '', positive)
    or (op == 'set' and not string.match(n or '', positive)) then
  return redis.error_reply('ERR redislock latch: bad arguments for ' .. op)
end

local uses = {
  KEYS[2], 'ZREMRANGEBYSCORE', KEYS[2], 'ZSCORE', KEYS[1], 'HMGET', KEYS[2], 'ZADD',
  KEYS[2], 'PEXPIRE', KEYS[1], 'PEXPIRE',
}
if op == 'set' then
  for _, pair in ipairs({{KEYS[3], 'INCR'}, {KEYS[1], 'HSET'}}) do
    uses[#uses + 1] = pair[1]
    uses[#uses + 1] = pair[2]
  end
else
  uses[#uses + 1] = KEYS[1]
  uses[#uses + 1] = 'HINCRBY'
  uses[#uses + 1] = KEYS[1]
  uses[#uses + 1] = 'PUBLISH'
end
local no = preflight(uses, true)
if no then return refused(no) end

local t = redis.pcall('TIME')
if bad(t) then return failed('TIME', t) end
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local r = redis.pcall('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(keep))
if bad(r) then return failed('ZREMRANGEBYSCORE', r) end
local seen = redis.pcall('ZSCORE', KEYS[2], id)
if bad(seen) then return failed('ZSCORE', seen) end
local v = redis.pcall('HMGET', KEYS[1], 'count', 'gen', 'since')
if bad(v) then return failed('HMGET', v) end
local count, gen, since = decode(v)
if not count then return foreign() end
if seen then return {'ok', count, gen} end
if op == 'set' and count > 0 then return {'busy', count, gen} end
if op == 'down' and count == 0 then return {'none', 0, gen} end

-- Redis 6.2 has no preflight: the commands that follow the write are tried first, where
-- they change nothing (id is no member yet; a PEXPIRE of an absent key does nothing; else
-- it refreshes a TTL the call refreshes anyway), so a refusal comes before any write.
r = redis.pcall('ZADD', KEYS[2], 'XX', now, id)
if bad(r) then return failed('ZADD', r) end
r = redis.pcall('PEXPIRE', KEYS[2], keep)
if bad(r) then return failed('PEXPIRE', r) end
r = redis.pcall('PEXPIRE', KEYS[1], ttl)
if bad(r) then return failed('PEXPIRE', r) end

if op == 'set' then
  local g, cmd = next_fence(KEYS[3])
  if cmd then return failed(cmd, g) end
  if gen == 0 then since = g end  -- no latch before: nothing is known of earlier generations
  r = redis.pcall('HSET', KEYS[1], 'count', n, 'gen', g, 'since', since)
  if bad(r) then return failed('HSET', r) end
  count, gen = tonumber(n), g
else
  count = redis.pcall('HINCRBY', KEYS[1], 'count', -1)
  if bad(count) then return failed('HINCRBY', count) end
end
redis.pcall('PEXPIRE', KEYS[1], ttl)  -- allowed: tried above
redis.pcall('ZADD', KEYS[2], now, id)
redis.pcall('PEXPIRE', KEYS[2], keep)
if op == 'down' and count == 0 then
  -- Refused only on Redis 6.2 (7 checked it first): the count is down all the same, and
  -- the waiters find it by their re-checks.
  redis.pcall('PUBLISH', KEYS[1], 'Z|' .. gen)
end
return {'ok', count, gen}
