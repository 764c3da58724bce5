-- _hold: shared by the hold_* scripts (the holds of RLock, ReadWriteLock and Semaphore), written
-- into each one where it says "-- include: _hold.lua", after "-- include: _acl.lua" (uses its
-- preflight()); not a script of its own. Functions and constants only: every key is a
-- parameter, which each script passes from its own KEYS[n] (its header says which).
-- Design: Redisson's RLock (a hash owner -> count, in Lua) and RReadWriteLock, but with one
-- lease per hold stored in the hold itself, so one key serves all holders (cluster-safe) and a
-- crashed reader or permit holder frees its share when its own lease ends.
-- The keys (parameter names):
--   hash      one field per hold: field: owner token; value
--             "<mode>|<count>|<expires_ms>|<fence>|<host>|<pid>|<acquired_unix_ms>",
--             optionally followed by "|o<op_id>": the last call applied to this hold (a call
--             sent again with the same op id changes nothing and answers as the first did).
--             mode w: exclusive, reentrant; r: shared, reentrant; p: a semaphore permit;
--             expires_ms: server time (TIME) in milliseconds at which this hold's lease ends.
--             The hash is the record; the index indexes it. The key expires when the latest
--             lease ends (PEXPIREAT that expires_ms), so it vanishes with it.
--   index     the expiry index, a sorted set with one member per field of the hash: owner
--             token -> BAND[mode] + expires_ms (BAND: w 0, r 1e13, p 2e13; SPAN 1e13 ms keeps
--             each mode in its own score band until the year 2286), so the live holds of a
--             mode are the scores in (BAND + now, BAND + SPAN). Same TTL as the hash. Its size
--             always equals the hash's: when they differ (a field or the index changed by
--             hand, or a call that a refused command stopped between a write of the hash and
--             of the index on Redis 6.2, which has no ACL preflight), tidy() rebuilds the index
--             from the hash once (HGETALL, O(n)) before the call does anything else. The hash
--             is the record: a hold is pruned only if its hash value says its lease ended.
--   waiters   sorted set: token of each waiting w/p waiter -> server time (ms) its entry ends
--             (refreshed by every failed try, removed when it gets in or leaves). For
--             ReadWriteLock these are writers: while one waits, new readers wait too (writer
--             preference).
--   wake      channel PUBLISHed "*" when a w/p waiter may now succeed (see lock_release.lua)
--   rwait     marker: a reader is waiting
--   rwake     channel PUBLISHed "*" when a reader may now succeed
--   pkey      Semaphore: the permit count set at run time (no TTL); absent: the caller's
--   released  sorted set of the holds released lately: token -> server time in milliseconds
--             at which it is forgotten (done_ms after the release); the key's TTL is done_ms.
--             A release sent again after a lost reply finds its token there and answers "ok"
-- Cost: a call reads only the holds it is about (HGET) and asks the index how many live holds
-- of each mode there are and when the first and the last lease end (ZCOUNT, ZRANGEBYSCORE ...
-- LIMIT 0 1: O(log n) in the number of holds n), so a read hold, a permit, a re-entry, a
-- release and a renewal cost O(log n), also with 10,000 holds on one name. Ended holds are
-- removed a few at a time (at most PRUNE per mode per call); they are never counted, since
-- counts and bounds only look at scores after now. Hash-field expiry (HPEXPIRE: Redis 7.4,
-- Valkey 9) is not used: it could drop ended holds, but not count the live ones per mode nor
-- find the latest lease, and Redis 6.2 and 7.0 lack it.

local MODES = {'w', 'r', 'p'}
local BAND = {w = 0, r = 1e13, p = 2e13}
local SPAN = 1e13
local PRUNE = 4  -- ended holds removed per mode per call, at most
local SHAPE = '^([wrp])|(%d+)|(%d+)|(%d+)|(.*)$'

-- ACL (docs/acl.md): what a script may run on each of its keys, for check() below
local ON_HASH = {'HGET', 'HLEN', 'HGETALL', 'HDEL', 'HSET', 'PEXPIREAT', 'DEL'}
local ON_INDEX = {'ZCARD', 'ZCOUNT', 'ZRANGEBYSCORE', 'ZREVRANGEBYSCORE', 'ZADD', 'ZREM',
  'PEXPIREAT', 'DEL'}
local ON_FENCE = {'INCR'}  -- the fencing counter (next_fence, _fence.lua)
-- waiters: a write's or a permit's try (it may queue), else only pruned and read
local ON_QUEUE = {'ZREMRANGEBYSCORE', 'ZCARD', 'ZADD', 'PTTL', 'PEXPIRE', 'ZRANGE', 'ZREM'}
local ON_WAITERS = {'ZREMRANGEBYSCORE', 'ZCARD', 'ZRANGE'}
local ON_WAKE = {'PUBLISH'}  -- either wake channel
-- rwait: a reader's try (it may set the marker), else only read
local ON_MARKER = {'SET', 'EXISTS'}
local ON_RWAIT = {'EXISTS'}
local ON_PERMITS = {'GET'}
local ON_RELEASED = {'ZSCORE', 'ZREMRANGEBYSCORE', 'ZADD', 'PEXPIRE'}

-- Before anything is read or written: each command of the list after each key (pairs key,
-- ON_* of the arguments; a nil key, an optional key the call left out, is skipped) is checked
-- (redis.acl_check_cmd, Redis >= 7), so a refused one makes the call answer "NOPERM
-- redislock: <COMMAND> ..." having changed nothing. Returns that error reply, or nil. Redis
-- 6.2 has no such check: there a refusal names no command and may come after a write.
local function check(...)
  local uses = {}
  for i = 1, select('#', ...), 2 do
    local key, cmds = select(i, ...)
    if key then
      for _, cmd in ipairs(cmds) do
        uses[#uses + 1] = key
        uses[#uses + 1] = cmd
      end
    end
  end
  local no = preflight(uses, true)
  if no then return refused(no) end
  return nil
end

-- the server's time in milliseconds, read once per call (after check())
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function malformed(hash)
  return 'redislock - ' .. hash .. ' holds a field not written by redislock'
end

-- a score as exact integer text (Lua's own number format keeps only 14 digits)
local function num(v)
  return string.format('%.0f', v)
end

-- live holds of one mode: O(log n)
local function live(index, mode, now)
  return redis.call('ZCOUNT', index, '(' .. num(BAND[mode] + now), '(' .. num(BAND[mode] + SPAN))
end

-- when the first (last: the latest) live lease of one mode ends, server ms; nil if none
local function bound(index, mode, last, now)
  local lo, hi = '(' .. num(BAND[mode] + now), '(' .. num(BAND[mode] + SPAN)
  local r
  if last then
    r = redis.call('ZREVRANGEBYSCORE', index, hi, lo, 'WITHSCORES', 'LIMIT', 0, 1)
  else
    r = redis.call('ZRANGEBYSCORE', index, lo, hi, 'WITHSCORES', 'LIMIT', 0, 1)
  end
  if #r == 0 then return nil end
  return tonumber(r[2]) - BAND[mode]
end

-- the live hold of token tok, or nil (an ended one is removed, unless index is nil: a status
-- reads the hash only)
local function get(hash, index, tok, now)
  if tok == '' then return nil end
  local v = redis.call('HGET', hash, tok)
  if not v then return nil end
  local mode, count, exp, fence, meta = string.match(v, SHAPE)
  if not mode then error(malformed(hash)) end
  local last = ''
  local bare, o = string.match(meta, '^(.*)|o(%x*)$')
  if bare then meta, last = bare, o end
  exp = tonumber(exp)
  if exp <= now then
    if index then
      redis.call('HDEL', hash, tok)
      redis.call('ZREM', index, tok)
    end
    return nil
  end
  return {mode = mode, count = tonumber(count), exp = exp, fence = fence, meta = meta, op = last}
end

local function store(hash, index, tok, h)
  local suffix = ''
  if h.op and h.op ~= '' then suffix = '|o' .. h.op end
  local score = num(BAND[h.mode] + h.exp)
  if not redis.acl_check_cmd then
    -- Redis 6.2 (no preflight): an ACL without ZADD refuses here, before the HSET could
    -- leave a new hash without a TTL (XX: only updates a hold already indexed)
    redis.call('ZADD', index, 'XX', score, tok)
  end
  redis.call('HSET', hash, tok,
    h.mode .. '|' .. h.count .. '|' .. h.exp .. '|' .. h.fence .. '|' .. h.meta .. suffix)
  redis.call('ZADD', index, score, tok)
end

-- whether this call (op id op_id, "" for none) repeats the last one applied to hold h (a
-- client's retry after a lost reply: redis-py resends on a dropped connection)
local function repeated(h, op_id)
  return op_id ~= '' and h.op == op_id
end

-- the keys live exactly as long as the latest lease: they expire at its end, a server time
-- (PEXPIREAT), not "latest - now" ms from when PEXPIRE runs: now was read when this call
-- began, and Redis (7.0 checked) reads its wall clock again at each command, so a step back
-- of that clock during the call (NTP, an operator's date -s) would end the keys that much
-- before the latest lease their own holds record (a live hold gone early); forward, after it
-- ends, the keys go at once, as the holds, ended by their own deadlines, already have
local function settle(hash, index, now)
  local latest
  for _, mode in ipairs(MODES) do
    local e = bound(index, mode, true, now)
    if e and (not latest or e > latest) then latest = e end
  end
  if not latest then
    redis.call('DEL', hash, index)
  else
    redis.call('PEXPIREAT', hash, num(latest))
    redis.call('PEXPIREAT', index, num(latest))
  end
end

-- First thing of every call but a status and a leave: drop a few ended holds (they are never
-- counted: see live() and bound()); the hash is the record, so each is checked there first.
-- Then, if the index does not have one member per field, rebuild it from the hash. Returns an
-- error reply (no index given, or a field redislock did not write), or nil.
local function tidy(hash, index, now)
  if not index then
    return redis.error_reply('redislock - this hold call needs the expiry index')
  end
  for _, mode in ipairs(MODES) do
    local ended = redis.call('ZRANGEBYSCORE', index, num(BAND[mode]), num(BAND[mode] + now),
      'LIMIT', 0, PRUNE)
    for _, tok in ipairs(ended) do
      local v = redis.call('HGET', hash, tok)
      local vmode, _, exp = string.match(v or '', SHAPE)
      if v and not vmode then return redis.error_reply(malformed(hash)) end
      if vmode and tonumber(exp) > now then
        redis.call('ZADD', index, num(BAND[vmode] + tonumber(exp)), tok)
      else
        if v then redis.call('HDEL', hash, tok) end
        redis.call('ZREM', index, tok)
      end
    end
  end
  if redis.call('HLEN', hash) ~= redis.call('ZCARD', index) then
    local flat = redis.call('HGETALL', hash)
    local found = {}
    for i = 1, #flat, 2 do
      local mode, _, exp = string.match(flat[i + 1], SHAPE)
      if not mode then return redis.error_reply(malformed(hash)) end
      found[#found + 1] = {flat[i], mode, tonumber(exp)}
    end
    redis.call('DEL', index)
    for _, f in ipairs(found) do
      if f[3] <= now then
        redis.call('HDEL', hash, f[1])
      else
        redis.call('ZADD', index, num(BAND[f[2]] + f[3]), f[1])
      end
    end
    settle(hash, index, now)
  end
  return nil
end

-- The start of every call but a status and a leave: check() of the hash, the index and the
-- uses given (pairs key, ON_* as check() takes them), the server's time, tidy(). Returns now,
-- or (nil, the error reply to return).
local function begin(hash, index, ...)
  local refusal = check(hash, ON_HASH, index, ON_INDEX, ...)
  if refusal then return nil, refusal end
  local now = server_ms()
  local broken = tidy(hash, index, now)
  if broken then return nil, broken end
  return now
end

-- the permit count: pkey's (set_permits writes an integer >= 1), else the caller's default;
-- read before any hold changes, so a bad count fails the call having changed nothing (a
-- release must not end a hold and then fail on the count when it wakes the waiters)
local function permit_count(pkey, default)
  local set = redis.call('GET', pkey)
  if not set then return tonumber(default) end
  local n = tonumber(set)
  if not n or n < 1 or n ~= math.floor(n) then
    error('redislock - ' .. pkey .. ' holds a permit count not written by redislock ('
      .. string.format('%q', string.sub(set, 1, 40)) .. ')')
  end
  return n
end

-- wakes one waiter per process of the channel wake (redislock._core.wake), who passes it on
local function wake_one(wake)
  redis.call('PUBLISH', wake, '*')
end

-- whether a live w/p waiter (for ReadWriteLock: a writer) is registered
local function writers_wait(waiters, now)
  if not waiters then return false end
  redis.call('ZREMRANGEBYSCORE', waiters, '-inf', now)
  return redis.call('ZCARD', waiters) > 0
end

-- whether a reader is waiting (false without the marker key: a Semaphore's call)
local function readers_wait(rwait)
  return rwait ~= nil and redis.call('EXISTS', rwait) == 1
end

-- after a hold ended: wake whoever may now succeed (writers first: writer preference);
-- permits: the permit count (0 for a lock's holds); rwait and rwake nil for a Semaphore
local function wake_waiters(index, waiters, wake, rwait, rwake, permits, now)
  local writer_waits = writers_wait(waiters, now)
  local nw = live(index, 'w', now)
  if writer_waits and nw == 0 and live(index, 'r', now) == 0 then
    local np = live(index, 'p', now)
    if np == 0 or np < permits then wake_one(wake) end
  elseif nw == 0 and not writer_waits and readers_wait(rwait) then
    wake_one(rwake)
  end
end

-- an acquire's reply while token already holds (a repeat of a first acquisition whose reply
-- was lost: idempotent), or nil
local function holding(hash, index, token, now)
  local mine = get(hash, index, token, now)
  if not mine then return nil end
  return {'ok', tonumber(mine.fence), mine.count, mine.exp - now}
end

-- a blocked try that may wait stays registered as a waiting w/p waiter for marker_ms
local function queue(waiters, token, marker_ms, now)
  redis.call('ZADD', waiters, now + tonumber(marker_ms), token)
  if redis.call('PTTL', waiters) < tonumber(marker_ms) then  -- never cut another's entry
    redis.call('PEXPIRE', waiters, marker_ms)
  end
end

-- a blocked try's reply: {"busy", hint_ms}, when the earliest blocking lease ends at most
local function busy(index, waiters, now)
  local hint = -1
  for _, m in ipairs(MODES) do
    local e = bound(index, m, false, now)
    if e and (hint < 0 or e - now < hint) then hint = e - now end
  end
  if hint < 0 then  -- blocked only by waiting writers: until the last entry ends
    local last = waiters and redis.call('ZRANGE', waiters, -1, -1, 'WITHSCORES') or {}
    if #last > 0 then hint = tonumber(last[2]) - now end
  end
  return {'busy', hint}
end

-- a new hold of token in mode, its lease lease_ms; fence, no: what next_fence (_fence.lua)
-- answered, passed as the last arguments. Returns the acquire's reply: {"ok", fence, 1,
-- lease_ms}, or the error reply of a refused INCR (nothing written)
local function grant(hash, index, token, mode, lease_ms, meta, now, fence, no)
  if no then return failed(no, fence) end
  local h = {mode = mode, count = 1, exp = now + tonumber(lease_ms), fence = fence, meta = meta}
  store(hash, index, token, h)
  settle(hash, index, now)
  return {'ok', fence, 1, h.exp - now}
end

-- a release of token's hold (op id op_id; done_ms > 0: remembered in released, if given, that
-- long); wakes whoever may now enter (wake_waiters' arguments)
local function release(hash, index, released, token, op_id, done_ms, waiters, wake, rwait,
    rwake, permits, now)
  local mine = get(hash, index, token, now)
  if not mine then
    settle(hash, index, now)
    if released then
      local until_ms = redis.call('ZSCORE', released, token)
      if until_ms and tonumber(until_ms) > now then
        return {'ok', 0}  -- released already: this is the same release sent again
      end
    end
    return {'gone', 0}
  end
  if repeated(mine, op_id) then
    return {'ok', mine.count}  -- this decrement was applied already
  end
  if mine.count > 1 then
    mine.count = mine.count - 1
    if op_id ~= '' then mine.op = op_id end
    store(hash, index, token, mine)
    return {'ok', mine.count}
  end
  done_ms = tonumber(done_ms)
  if released and done_ms > 0 then  -- remembered, so a repeat of this release answers "ok"
    redis.call('ZREMRANGEBYSCORE', released, '-inf', now)
    -- PEXPIRE before ZADD too: a Redis 6.2 ACL (no preflight) that refuses it then refuses
    -- before the ZADD could leave a new key without a TTL
    redis.call('PEXPIRE', released, done_ms)
    redis.call('ZADD', released, now + done_ms, token)
    redis.call('PEXPIRE', released, done_ms)
  end
  redis.call('HDEL', hash, token)
  redis.call('ZREM', index, token)
  -- The hold is gone now: what follows only settles the keys' TTL and wakes waiters, and
  -- nothing it meets may turn the release into a failure (the caller would believe it still
  -- holds). On Redis 7+ the preflight above already refused a call whose ACL lacks one of
  -- these commands; Redis 6.2 has no preflight, so a refusal here is caught: the keys keep
  -- the TTL they had (never none), the waiters find out by their own re-checks.
  pcall(settle, hash, index, now)
  pcall(wake_waiters, index, waiters, wake, rwait, rwake, permits, now)
  return {'ok', 0}
end
