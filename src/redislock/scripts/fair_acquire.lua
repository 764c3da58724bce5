-- fair_acquire: take a mutex granted in arrival (FIFO) order, or queue for it (Lock and FairLock).
-- Design: Redisson's RedissonFairLock (a queue of waiters, each with a timeout), but each
-- waiter's lease is short and renewed by the waiter itself while it waits (waiter_keep.lua),
-- so a dead waiter is skipped about one waiter lease after it stopped renewing; and a
-- release grants the lock to the next live waiter itself (fair_release.lua: one message on
-- its process's grant channel of the name, tagged for exactly that waiter), so the waiter
-- needs no further round trip to take it, and the releasing client cannot take it back.
-- While nobody is queued, an acquire is Lock's SET NX (the value carries the next fencing
-- token, issued only if it was set; the fast path below: no ACL preflight, and TIME only
-- for a hold with a lock-delay). The lock key, fencing counter, release ring,
-- lock_extend.lua and lock_status.lua are those of Lock; MultiLock (multi_*.lua) takes the
-- same lock keys and wakes the head of this queue.
--
-- KEYS[1] lock key      string "<token>|<fence>|<meta>" with a PX TTL (as Lock)
-- KEYS[2] fence key     the name's slot counter (_fence.lua), INCR per grant, never expires
-- KEYS[3] queue         list of waiter tokens in arrival order
-- KEYS[4] waiter leases sorted set: token -> server time (ms) at which its waiter lease ends
-- KEYS[5] waiter info   hash: token -> "<lease_ms>|<meta>" (what a grant writes for it)
-- KEYS[6] release ring  optional: the slot's release ring (_ring.lua), a bit per recent
--                       fencing token: cleared when a token is issued here
-- KEYS[7] delay key     optional (with KEYS[6]): "P{N}:delay", string "<delay_ms>", the
--                       lock-delay of the hold (ARGV[6]), PXAT = the lock key's deadline +
--                       delay_ms (both from one TIME), written with the hold and moved with
--                       each extend (lock_extend.lua); fair_release.lua and fair_force.lua
--                       DELete it with the lock key. While it exists and the lock key does
--                       not (the hold ended WITHOUT a release), nobody takes the lock: an
--                       acquire answers busy with its PTTL, grants wait
-- ARGV[1] token         owner token
-- ARGV[2] lease_ms      lease of the lock once held, milliseconds
-- ARGV[3] meta          holder metadata "<host>|<pid>|<acquired_unix_ms>"
-- ARGV[4] waiter_ms     waiter lease, milliseconds; 0 for a single try (never queues)
-- ARGV[5] queue_max     most waiters the queue takes; 0: no limit
-- ARGV[6] delay_ms      optional, with KEYS[7]: lock-delay of the hold taken, milliseconds;
--                       0 or absent: none. A queued waiter keeps it in its waiter info as
--                       "<lease_ms>d<delay_ms>|<meta>" for its grant
-- A grant PUBLISHes "<tag>|<fence>", where tag = sha1(token)[1..20] of the waiter granted,
-- to that waiter's process's grant channel of the name, KEYS[1] .. ":grant:<process tag>"
-- (FairKeys.grant_for, GRANT_SUFFIX; _queue.lua: grant_channel; a pub/sub channel, not a
-- key); multi_release.lua publishes "<tag>|0" there (a wake-up: try again now).
-- returns {"ok", fence, lease_ms}  held (taken now, or granted to this token by a release)
--         {"busy", hint_ms, fence} queued (or, for a single try, not taken); hint_ms bounds
--                                  the wait before the next try, -1 when the lock has no TTL
--                                  (the delay key's PTTL while a lock-delay holds it off);
--                                  fence: the name's fencing counter now (its slot's; 0 if
--                                  absent), so a grant message received later is known
--                                  to be newer (fence above);
--                                  a single try on the fast path returns {"busy", hint_ms}
--         {"full", length}         the queue is full; the caller is not queued
--         error "NOPERM redislock: <COMMAND> ..."  the ACL refused a command; nothing was
--                                  changed
-- A failed SET NX of the lock key is always followed by a GET of it (the audit relies on it).
-- include: _acl.lua
-- include: _fence.lua
-- include: _ring.lua

local token = ARGV[1]
-- a hold with a lock-delay: the delay key is written with the lock key (KEYS[7], ARGV[6])
local delayed = KEYS[7] and ARGV[6] and ARGV[6] ~= '' and ARGV[6] ~= '0'

-- A deadline in server ms as exact integer text, for PXAT
local function num(v)
  return string.format('%.0f', v)
end

-- Write the delay key of a hold whose lock key ends at server time at_ms (nothing without
-- a lock-delay); through pcall: returns an error reply, or nil.
local function set_delay(at_ms)
  if not delayed then return nil end
  local r = redis.pcall('SET', KEYS[7], ARGV[6], 'PXAT', num(at_ms + tonumber(ARGV[6])))
  if bad(r) then return failed('SET', r) end
  return nil
end

-- Fast path, while nobody is queued (every command through pcall, the writes in an order
-- whose every prefix is safe, as lock_acquire.lua): Lock's one round trip when
-- uncontended. Anything else falls through to the queue below.
do
  local q = redis.pcall('EXISTS', KEYS[3])
  if bad(q) then return failed('EXISTS', q) end
  local held_off = nil
  if q == 0 and KEYS[7] then
    -- The lock-delay left (ms) when the lock key is absent and the delay key exists: the
    -- last hold ended without a release and nobody may take the lock yet.
    local d = redis.pcall('PTTL', KEYS[7])
    if bad(d) then return failed('PTTL', d) end
    if d ~= -2 then
      local e = redis.pcall('EXISTS', KEYS[1])
      if bad(e) then return failed('EXISTS', e) end
      if e == 0 then held_off = d end
    end
    if held_off and ARGV[4] == '0' then return {'busy', held_off} end
  end
  if q == 0 and not held_off then
    -- The value is written once, with the token it would get (_fence.lua: peek_fence)
    local fence, no = peek_fence(KEYS[2])
    if no then return failed(no, fence) end
    local value = token .. '|' .. fence .. '|' .. ARGV[3]
    local r, at
    if delayed then
      -- TIME only for a hold with a lock-delay: its lock key and its delay key are written
      -- from ONE reading, so the delay key ends exactly delay_ms after the lease (two
      -- relative PX are counted from the millisecond each command runs in)
      local t = redis.pcall('TIME')
      if bad(t) then return failed('TIME', t) end
      at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
      r = redis.pcall('SET', KEYS[1], value, 'NX', 'PXAT', num(at))
    else
      r = redis.pcall('SET', KEYS[1], value, 'NX', 'PX', ARGV[2])
    end
    if bad(r) then return failed('SET', r) end
    if r then
      no = set_delay(at)
      if no then
        redis.pcall('DEL', KEYS[1])  -- undo: no hold without its lock-delay
        return no
      end
      r, no = next_fence(KEYS[2])  -- issues that token
      if not no and KEYS[6] then r, no = ring_issue(KEYS[6], fence) end
      if no then
        redis.pcall('DEL', KEYS[1])  -- undo: no hold without its fencing token (and bit)
        if KEYS[7] then redis.pcall('DEL', KEYS[7]) end
        return failed(no, r)
      end
      return {'ok', fence, tonumber(ARGV[2])}
    end
    local v = redis.pcall('GET', KEYS[1])
    if bad(v) then return failed('GET', v) end
    if ARGV[4] == '0' and string.sub(v or '', 1, #token + 1) ~= token .. '|' then
      r = redis.pcall('PTTL', KEYS[1])  -- a single try on a held lock: busy
      if bad(r) then return failed('PTTL', r) end
      return {'busy', r}
    end
  end
end

-- include: _queue.lua
-- include: _fair.lua

local lock, counter, queue, leases, info = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local ring, delay_key = KEYS[6], KEYS[7]
local own = {  -- the commands of this script past its fast path, beyond _fair.lua's
  lock, 'GET', lock, 'PTTL', counter, 'GET',
  queue, 'LLEN', queue, 'PEXPIRE', queue, 'PTTL', queue, 'RPUSH',
  leases, 'PEXPIRE', leases, 'ZADD', leases, 'ZSCORE',
  info, 'HSET', info, 'PEXPIRE',
}
if delay_key then own[#own + 1], own[#own + 2] = delay_key, 'PTTL' end
local now, refusal = open_queue(own, lock, counter, queue, leases, info, ring, delay_key)
if not now then return refusal end

-- The queue's keys live at least as long as its latest waiter lease: a waiter that queues
-- (or renews, waiter_keep.lua) with waiter lease ms extends them to twice that when they
-- have less than ms left, so not every call extends them; once nobody is queued they are
-- deleted. (A TTL is only ever raised, so it stays above every live waiter's lease.)
local function stretch(ms)
  if redis.call('PTTL', queue) < ms then
    redis.call('PEXPIRE', queue, 2 * ms)
    redis.call('PEXPIRE', leases, 2 * ms)
    redis.call('PEXPIRE', info, 2 * ms)
  end
end

local v = redis.call('GET', lock)
if owns(v, token) then  -- granted by a release, or a repeat after a lost reply
  forget(queue, leases, info, token)
  settle(queue, leases, info)
  return {'ok', held_fence(v), redis.call('PTTL', lock)}
end
local held_off = delay_key and not v and redis.call('PTTL', delay_key)
if held_off == -2 then held_off = nil end
if not v and not held_off then
  local head = redis.call('LINDEX', queue, 0)
  if not head or head == token then
    local fence, no = issue(counter, ring)
    if not fence then return no end
    local at = now + tonumber(ARGV[2])
    redis.call('SET', lock, token .. '|' .. fence .. '|' .. ARGV[3], 'PXAT', num(at))
    no = set_delay(at)  -- checked by the preflight: cannot fail now
    if no then return no end
    if head then
      forget(queue, leases, info, token)
      settle(queue, leases, info)
    end
    return {'ok', fence, tonumber(ARGV[2])}
  end
  -- free, but another live waiter is first (its holder expired instead of releasing)
  local r = grant_next(lock, counter, queue, leases, info, ring, delay_key, now)
  if r ~= true and r ~= false then return r end
end
-- The counter this name's next token comes from, as it is now (the slot counter:
-- peek_fence - 1). The counter is shared by all the names of the slot, so other names
-- raise it too; still, every grant to this waiter runs after this reply and takes its
-- token from the same counter with INCR, so its fence is always above this value: the
-- waiter's "grant fence above busy fence" check holds.
local fence_now, no = peek_fence(counter)
if no then return failed(no, fence_now) end
fence_now = fence_now - 1
local hint = held_off or redis.call('PTTL', lock)
if ARGV[4] == '0' then
  return {'busy', hint, fence_now}
end
if not redis.call('ZSCORE', leases, token) then
  local len = redis.call('LLEN', queue)
  local most = tonumber(ARGV[5])
  if most > 0 and len >= most then
    return {'full', len}
  end
  redis.call('RPUSH', queue, token)
end
redis.call('ZADD', leases, now + tonumber(ARGV[4]), token)
local delay = ARGV[6] and ARGV[6] ~= '' and ARGV[6] ~= '0' and 'd' .. ARGV[6] or ''
redis.call('HSET', info, token, ARGV[2] .. delay .. '|' .. ARGV[3])
stretch(tonumber(ARGV[4]))
return {'busy', hint, fence_now}
