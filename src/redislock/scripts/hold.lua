-- hold: reentrant, shared and counted holds kept in one hash, each with its own lease.
-- Used by RLock (mode w), ReadWriteLock (read: r, write: w) and Semaphore (mode p).
-- Design: Redisson's RLock (a hash owner -> count, in Lua) and RReadWriteLock, but with
-- one lease per hold stored in the hold itself, so one key serves all holders (cluster-safe)
-- and a crashed reader or permit holder frees its share when its own lease ends.
-- Cost: a call reads only the holds it is about (HGET) and asks the expiry index (KEYS[9])
-- how many live holds of each mode there are and when the first and the last lease end
-- (ZCOUNT, ZRANGEBYSCORE ... LIMIT 0 1: O(log n) in the number of holds n), so a read hold,
-- a permit, a re-entry, a release and a renewal cost O(log n), also with 10,000 holds on
-- one name. Ended holds are removed a few at a time (at most PRUNE per mode per call); they
-- are never counted, since counts and bounds only look at scores after now. Hash-field
-- expiry (HPEXPIRE: Redis 7.4, Valkey 9) is not used: it could drop ended holds, but not
-- count the live ones per mode nor find the latest lease, and Redis 6.2 and 7.0 lack it.
--
-- KEYS[1] hash          one field per hold:
--                         field  owner token
--                         value  "<mode>|<count>|<expires_ms>|<fence>|<host>|<pid>|<acquired_unix_ms>"
--                                optionally followed by "|o<op_id>": the last call applied to
--                                this hold (a call sent again with the same op id changes
--                                nothing and answers as the first did)
--                                mode w: exclusive, reentrant; r: shared, reentrant;
--                                p: a semaphore permit; expires_ms: server time (TIME) in
--                                milliseconds at which this hold's lease ends
--                       The hash is the record; KEYS[9] indexes it. The key expires when the
--                       latest lease ends (PEXPIREAT that expires_ms), so it vanishes with it.
-- KEYS[2] fence key     the name's slot counter (_fence.lua), INCR once per new hold (not per
--                       re-entry), never expires
-- KEYS[3] waiters       sorted set: token of each waiting w/p waiter -> server time (ms) its
--                       entry ends (refreshed by every failed try, removed when it gets in or
--                       leaves). For ReadWriteLock these are writers: while one waits, new
--                       readers wait too (writer preference).
-- KEYS[4] wake channel  PUBLISHed "*" when a w/p waiter may now succeed (see lock_release.lua)
-- KEYS[5] rwait marker  a reader is waiting
-- KEYS[6] rwake channel PUBLISHed "*" when a reader may now succeed
-- KEYS[7] permits key   Semaphore: the permit count set at run time (no TTL); absent: ARGV[9]
-- KEYS[8] released      optional: sorted set of the holds released lately: token -> server
--                       time in milliseconds at which it is forgotten (ARGV[12] after the
--                       release); the key's TTL is ARGV[12]. A release sent again after a
--                       lost reply finds its token there and answers "ok"
-- KEYS[9] expiry index  sorted set, one member per field of KEYS[1]: owner token ->
--                       BAND[mode] + expires_ms (BAND: w 0, r 1e13, p 2e13; SPAN 1e13 ms
--                       keeps each mode in its own score band until the year 2286), so the
--                       live holds of a mode are the scores in (BAND + now, BAND + SPAN).
--                       Same TTL as KEYS[1]. Its size always equals the hash's: when they
--                       differ (a field or the index changed by hand, or a call that a
--                       refused command stopped between a write of the hash and of the index
--                       on Redis 6.2, which has no ACL preflight), the call rebuilds the index
--                       from the hash once (HGETALL, O(n)) before it does anything else. The
--                       hash is the record: a hold is pruned only if its hash value says its
--                       lease ended.
-- ARGV[1] op            acquire | release | extend | status | count | leave | force
-- ARGV[2] token         owner token (>= 32 hex chars)
-- ARGV[3] mode          w | r | p (acquire)
-- ARGV[4] ms            acquire: lease, milliseconds (>= 1); extend: milliseconds (>= 1)
-- ARGV[5] meta          holder metadata "<host>|<pid>|<acquired_unix_ms>" (acquire)
-- ARGV[6] marker_ms     acquire: milliseconds a failed try stays registered as waiting; 0: single try
-- ARGV[7] reenter       acquire: "1" if the caller already holds (re-entry); "0" for a new hold
-- ARGV[8] companion     acquire r: the caller's own write token ("" if none): a writer may
--                       take a read hold beside its write hold (downgrade)
-- ARGV[9] permits       the permit count when KEYS[7] is absent (Semaphore); 0 otherwise
-- ARGV[10] extend_mode  extend: "add" (remaining + ms), "set" (ms), "max" (at least ms)
-- ARGV[11] op_id        "" or a random id per call (re-entry, release, "add" extend): a call
--                       whose op id equals the hold's last one is a client's retry after a
--                       lost reply (redis-py resends on a dropped connection)
-- ARGV[12] done_ms      with KEYS[8]: how long a released hold is remembered, milliseconds
-- ARGV[13] roles        optional: which keys KEYS holds, one letter per key in order: h hash,
--                       f fence, w waiters, k wake, r rwait, s rwake, p permits, d released,
--                       x expiry index (KEYS[1] to KEYS[9] above); "" or absent: "hfwkrspdx",
--                       all nine. Every op but status and leave needs h and x. A call
--                       declares only the keys it may touch (hold.py: hold_roles), so during a
--                       Cluster slot migration a status is a one-key script that follows ASK
--                       (an extend: the hash and its index, which exist together) instead of
--                       failing with TRYAGAIN on keys that do not exist.
--                       A key left out is treated as absent (no waiters, no wake-up, no
--                       permit count: ARGV[9]).
-- returns
--   acquire  {"ok", fence, count, lease_ms}  held; count is the hold count after this call
--            {"busy", hint_ms}              another hold blocks; hint_ms: when the earliest
--                                           blocking lease ends, at most (a recheck bound)
--            {"gone", 0}                    re-entry, but the hold no longer exists
--   release  {"ok", count}                  count left (0: the hold was removed; also a
--                                           repeat of a release within ARGV[12] ms)
--            {"gone", 0}                    no such hold (expired or deleted)
--   extend   {"ok", lease_ms}               this hold's new remaining lease
--            {"gone", 0}
--   status   {"ok", lease_ms, fence, count, mode} | {"gone", 0, 0, 0, ""}   (reads KEYS[1] only)
--   leave    1 (the waiter ARGV[2] gave up: it no longer counts as waiting)
--   count    {writers, readers, permits held, permit count}   live holds of each mode
--   force    number of holds removed (operator override; wakes every kind of waiter)
--   any op   error "redislock - <key> holds ... not written by redislock ..."   a hold field
--            of the hash, or the permits key (KEYS[7], not an integer >= 1), that redislock
--            did not write: no hold was taken or released

-- include: _acl.lua
-- include: _fence.lua

local op, token = ARGV[1], ARGV[2]
local K = {}
local roles = ARGV[13] or ''
if roles == '' then roles = 'hfwkrspdx' end
for i = 1, #roles do K[string.sub(roles, i, i)] = KEYS[i] end

-- ACL (docs/acl.md): before anything is read or written, each command this script may run on
-- each key this call declares is checked (redis.acl_check_cmd, Redis >= 7), so a refused one
-- makes the call answer "NOPERM redislock: <COMMAND> ..." having changed nothing. Redis 6.2
-- has no such check: there a refusal names no command and may come after a write.
do
  local uses = {
    h = {'HGET', 'HLEN', 'HGETALL', 'HDEL', 'HSET', 'PEXPIREAT', 'DEL'},
    f = {'INCR'},
    w = {'ZREMRANGEBYSCORE', 'ZCARD', 'ZADD', 'PTTL', 'PEXPIRE', 'ZRANGE', 'ZREM'},
    k = {'PUBLISH'},
    r = {'SET', 'EXISTS'},
    s = {'PUBLISH'},
    p = {'GET'},
    d = {'ZSCORE', 'ZREMRANGEBYSCORE', 'ZADD', 'PEXPIRE'},
    x = {'ZCARD', 'ZCOUNT', 'ZRANGEBYSCORE', 'ZREVRANGEBYSCORE', 'ZADD', 'ZREM', 'PEXPIREAT',
      'DEL'},
  }
  local declared = {}
  for i = 1, #roles do
    local role = string.sub(roles, i, i)
    for _, cmd in ipairs(uses[role]) do
      declared[#declared + 1] = K[role]
      declared[#declared + 1] = cmd
    end
  end
  local no = preflight(declared, true)
  if no then return refused(no) end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local op_id = ARGV[11] or ''
local MODES = {'w', 'r', 'p'}
local BAND = {w = 0, r = 1e13, p = 2e13}
local SPAN = 1e13
local PRUNE = 4  -- ended holds removed per mode per call, at most
local SHAPE = '^([wrp])|(%d+)|(%d+)|(%d+)|(.*)$'
local function malformed()
  return 'redislock - ' .. K.h .. ' holds a field not written by redislock'
end

-- a score as exact integer text (Lua's own number format keeps only 14 digits)
local function num(v)
  return string.format('%.0f', v)
end

-- live holds of one mode: O(log n)
local function live(mode)
  return redis.call('ZCOUNT', K.x, '(' .. num(BAND[mode] + now), '(' .. num(BAND[mode] + SPAN))
end

-- when the first (last: the latest) live lease of one mode ends, server ms; nil if none
local function bound(mode, last)
  local lo, hi = '(' .. num(BAND[mode] + now), '(' .. num(BAND[mode] + SPAN)
  local r
  if last then
    r = redis.call('ZREVRANGEBYSCORE', K.x, hi, lo, 'WITHSCORES', 'LIMIT', 0, 1)
  else
    r = redis.call('ZRANGEBYSCORE', K.x, lo, hi, 'WITHSCORES', 'LIMIT', 0, 1)
  end
  if #r == 0 then return nil end
  return tonumber(r[2]) - BAND[mode]
end

-- the live hold of token tok, or nil (an ended one is removed when the index is declared)
local function get(tok)
  if tok == '' then return nil end
  local v = redis.call('HGET', K.h, tok)
  if not v then return nil end
  local mode, count, exp, fence, meta = string.match(v, SHAPE)
  if not mode then error(malformed()) end
  local last = ''
  local bare, o = string.match(meta, '^(.*)|o(%x*)$')
  if bare then meta, last = bare, o end
  exp = tonumber(exp)
  if exp <= now then
    if K.x then
      redis.call('HDEL', K.h, tok)
      redis.call('ZREM', K.x, tok)
    end
    return nil
  end
  return {mode = mode, count = tonumber(count), exp = exp, fence = fence, meta = meta, op = last}
end

local function store(tok, h)
  local suffix = ''
  if h.op and h.op ~= '' then suffix = '|o' .. h.op end
  local score = num(BAND[h.mode] + h.exp)
  if not redis.acl_check_cmd then
    -- Redis 6.2 (no preflight): an ACL without ZADD refuses here, before the HSET could
    -- leave a new hash without a TTL (XX: only updates a hold already indexed)
    redis.call('ZADD', K.x, 'XX', score, tok)
  end
  redis.call('HSET', K.h, tok,
    h.mode .. '|' .. h.count .. '|' .. h.exp .. '|' .. h.fence .. '|' .. h.meta .. suffix)
  redis.call('ZADD', K.x, score, tok)
end

local function remove(tok)
  redis.call('HDEL', K.h, tok)
  redis.call('ZREM', K.x, tok)
end

-- whether this call repeats the last one applied to hold h (a retry after a lost reply)
local function repeated(h)
  return op_id ~= '' and h.op == op_id
end

-- the keys live exactly as long as the latest lease: they expire at its end, a server time
-- (PEXPIREAT), not "latest - now" ms from when PEXPIRE runs: now was read when this call
-- began, and Redis (7.0 checked) reads its wall clock again at each command, so a step back
-- of that clock during the call (NTP, an operator's date -s) would end the keys that much
-- before the latest lease their own holds record (a live hold gone early); forward, after it
-- ends, the keys go at once, as the holds, ended by their own deadlines, already have
local function settle()
  local latest
  for _, mode in ipairs(MODES) do
    local e = bound(mode, true)
    if e and (not latest or e > latest) then latest = e end
  end
  if not latest then
    redis.call('DEL', K.h, K.x)
  else
    redis.call('PEXPIREAT', K.h, num(latest))
    redis.call('PEXPIREAT', K.x, num(latest))
  end
end

if op ~= 'status' and op ~= 'leave' then
  if not K.x then
    return redis.error_reply('redislock - hold ' .. tostring(op) .. ' needs the expiry index')
  end
  -- drop a few ended holds (they are never counted: see live() and bound()); the hash is the
  -- record, so each is checked there first (an index out of step with it is mended below)
  for _, mode in ipairs(MODES) do
    local ended = redis.call('ZRANGEBYSCORE', K.x, num(BAND[mode]), num(BAND[mode] + now),
      'LIMIT', 0, PRUNE)
    for _, tok in ipairs(ended) do
      local v = redis.call('HGET', K.h, tok)
      local vmode, _, exp = string.match(v or '', SHAPE)
      if v and not vmode then return redis.error_reply(malformed()) end
      if vmode and tonumber(exp) > now then
        redis.call('ZADD', K.x, num(BAND[vmode] + tonumber(exp)), tok)
      else
        if v then redis.call('HDEL', K.h, tok) end
        redis.call('ZREM', K.x, tok)
      end
    end
  end
  -- the index has one member per field; otherwise rebuild it from the hash (see KEYS[9])
  if redis.call('HLEN', K.h) ~= redis.call('ZCARD', K.x) then
    local flat = redis.call('HGETALL', K.h)
    local found = {}
    for i = 1, #flat, 2 do
      local mode, _, exp = string.match(flat[i + 1], SHAPE)
      if not mode then return redis.error_reply(malformed()) end
      found[#found + 1] = {flat[i], mode, tonumber(exp)}
    end
    redis.call('DEL', K.x)
    for _, f in ipairs(found) do
      if f[3] <= now then
        redis.call('HDEL', K.h, f[1])
      else
        redis.call('ZADD', K.x, num(BAND[f[2]] + f[3]), f[1])
      end
    end
    settle()
  end
end

local function wake_w()  -- wakes one w/p waiter per process (redislock._core.wake)
  if not K.k then return end
  redis.call('PUBLISH', K.k, '*')
end

local function wake_r()  -- wakes one reader per process (who passes it on)
  if not K.s then return end
  redis.call('PUBLISH', K.s, '*')
end

local permit_count  -- read once per call (checked below, before any hold changes)
local function permits()
  if permit_count then return permit_count end
  local set = K.p and redis.call('GET', K.p)
  if not set then
    permit_count = tonumber(ARGV[9])
    return permit_count
  end
  local n = tonumber(set)
  if not n or n < 1 or n ~= math.floor(n) then  -- set_permits writes an integer >= 1
    error('redislock - ' .. K.p .. ' holds a permit count not written by redislock ('
      .. string.format('%q', string.sub(set, 1, 40)) .. ')')
  end
  permit_count = n
  return n
end
-- before any hold is taken or released: a bad count fails the call having changed nothing
-- (a release must not end a hold and then fail on the count when it wakes the waiters)
if K.p then permits() end

-- whether a live w/p waiter (for ReadWriteLock: a writer) is registered
local function writers_wait()
  if not K.w then return false end
  redis.call('ZREMRANGEBYSCORE', K.w, '-inf', now)
  return redis.call('ZCARD', K.w) > 0
end

-- whether a reader is waiting
local function readers_wait()
  return K.r ~= nil and redis.call('EXISTS', K.r) == 1
end

-- after a hold ended: wake whoever may now succeed (writers first: writer preference)
local function wake_waiters()
  local writer_waits = writers_wait()
  local nw = live('w')
  if writer_waits and nw == 0 and live('r') == 0 then
    local np = live('p')
    if np == 0 or np < permits() then wake_w() end
  elseif nw == 0 and not writer_waits and readers_wait() then
    wake_r()
  end
end

if op == 'acquire' then
  local mode = ARGV[3]
  local mine = get(token)
  if mine then
    if ARGV[7] == '1' and not repeated(mine) then
      mine.count = mine.count + 1
      if op_id ~= '' then mine.op = op_id end
      if now + tonumber(ARGV[4]) > mine.exp then mine.exp = now + tonumber(ARGV[4]) end
      store(token, mine)
      settle()
    end
    -- ARGV[7] == "0": a repeat of a first acquisition whose reply was lost (idempotent)
    return {'ok', tonumber(mine.fence), mine.count, mine.exp - now}
  end
  if ARGV[7] == '1' then
    return {'gone', 0}
  end
  local blocked
  if mode == 'w' then
    blocked = live('w') + live('r') + live('p') > 0
  elseif mode == 'r' then
    local companion = get(ARGV[8])
    local own_write = companion ~= nil and companion.mode == 'w'
    blocked = not own_write and (live('w') > 0 or writers_wait())
  else
    blocked = live('w') + live('r') > 0 or live('p') >= permits()
  end
  if blocked then
    if ARGV[6] ~= '0' and mode == 'r' then
      redis.call('SET', K.r, '1', 'PX', ARGV[6])
    elseif ARGV[6] ~= '0' then
      redis.call('ZADD', K.w, now + tonumber(ARGV[6]), token)
      if redis.call('PTTL', K.w) < tonumber(ARGV[6]) then  -- never cut another's entry
        redis.call('PEXPIRE', K.w, ARGV[6])
      end
    end
    local hint = -1
    for _, m in ipairs(MODES) do
      local e = bound(m, false)
      if e and (hint < 0 or e - now < hint) then hint = e - now end
    end
    if hint < 0 then  -- blocked only by waiting writers: until the last entry ends
      local last = K.w and redis.call('ZRANGE', K.w, -1, -1, 'WITHSCORES') or {}
      if #last > 0 then hint = tonumber(last[2]) - now end
    end
    return {'busy', hint}
  end
  local fence, no = next_fence(K.f)
  if no then return failed(no, fence) end
  local h = {mode = mode, count = 1, exp = now + tonumber(ARGV[4]), fence = fence, meta = ARGV[5]}
  store(token, h)
  settle()
  if mode ~= 'r' and K.w then redis.call('ZREM', K.w, token) end
  -- pass the wake-up on: more readers, or more permits, may enter now
  if mode == 'r' and readers_wait() and not writers_wait() then
    wake_r()
  elseif mode == 'p' and writers_wait() and live('p') < permits() then
    wake_w()
  end
  return {'ok', fence, 1, h.exp - now}
end

if op == 'release' then
  local mine = get(token)
  if not mine then
    settle()
    if K.d then
      local until_ms = redis.call('ZSCORE', K.d, token)
      if until_ms and tonumber(until_ms) > now then
        return {'ok', 0}  -- released already: this is the same release sent again
      end
    end
    return {'gone', 0}
  end
  if repeated(mine) then
    return {'ok', mine.count}  -- this decrement was applied already
  end
  if mine.count > 1 then
    mine.count = mine.count - 1
    if op_id ~= '' then mine.op = op_id end
    store(token, mine)
    return {'ok', mine.count}
  end
  local done_ms = tonumber(ARGV[12] or '0')
  if K.d and done_ms > 0 then  -- remembered, so a repeat of this release answers "ok"
    redis.call('ZREMRANGEBYSCORE', K.d, '-inf', now)
    -- PEXPIRE before ZADD too: a Redis 6.2 ACL (no preflight) that refuses it then refuses
    -- before the ZADD could leave a new key without a TTL
    redis.call('PEXPIRE', K.d, done_ms)
    redis.call('ZADD', K.d, now + done_ms, token)
    redis.call('PEXPIRE', K.d, done_ms)
  end
  remove(token)
  -- The hold is gone now: what follows only settles the keys' TTL and wakes waiters, and
  -- nothing it meets may turn the release into a failure (the caller would believe it still
  -- holds). On Redis 7+ the preflight above already refused a call whose ACL lacks one of
  -- these commands; Redis 6.2 has no preflight, so a refusal here is caught: the keys keep
  -- the TTL they had (never none), the waiters find out by their own re-checks.
  pcall(settle)
  pcall(wake_waiters)
  return {'ok', 0}
end

if op == 'extend' then
  local mine = get(token)
  if not mine then
    return {'gone', 0}
  end
  local ms = tonumber(ARGV[4])
  local mode = ARGV[10]
  if repeated(mine) then
    return {'ok', mine.exp - now}  -- this extend was applied already
  end
  if op_id ~= '' then mine.op = op_id end
  if mode == 'add' then
    mine.exp = mine.exp + ms
  elseif mode == 'set' then
    mine.exp = now + ms
  elseif now + ms > mine.exp then
    mine.exp = now + ms
  end
  store(token, mine)
  settle()
  return {'ok', mine.exp - now}
end

if op == 'status' then
  local mine = get(token)
  if not mine then
    return {'gone', 0, 0, 0, ''}
  end
  return {'ok', mine.exp - now, tonumber(mine.fence), mine.count, mine.mode}
end

if op == 'leave' then
  if K.w then redis.call('ZREM', K.w, token) end
  return 1
end

if op == 'count' then
  return {live('w'), live('r'), live('p'), permits()}
end

if op == 'force' then
  local removed = live('w') + live('r') + live('p')
  redis.call('DEL', K.h, K.x)
  if writers_wait() then wake_w() end
  if readers_wait() then wake_r() end
  return removed
end

return redis.error_reply('redislock - unknown hold op ' .. tostring(op))
