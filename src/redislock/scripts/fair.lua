-- fair: a mutex granted in arrival (FIFO) order with direct hand-off (Lock and FairLock).
-- Design: Redisson's RedissonFairLock (a queue of waiters, each with a timeout), but each
-- waiter's lease is short and renewed by the waiter itself while it waits, so a dead waiter
-- is skipped about one waiter lease after it stopped renewing; and a release grants the
-- lock to the next live waiter itself (one message on its process's grant channel of the
-- name, tagged for exactly that waiter), so the waiter needs no further round trip to take it, and the
-- releasing client cannot take it back.
-- While nobody is queued, an acquire is Lock's SET NX (the value carries the next fencing
-- token, issued only if it was set) and a release Lock's compare-and-delete (the fast paths
-- below: no ACL preflight, and TIME only for a hold with a lock-delay).
-- The lock key, fencing counter, release ring, lock_extend.lua and lock_status.lua are those
-- of Lock; MultiLock (multi.lua) takes the same lock keys and wakes the head of this queue.
--
-- KEYS[1] lock key      string "<token>|<fence>|<meta>" with a PX TTL (as Lock)
-- KEYS[2] fence key     the name's slot counter (_fence.lua), INCR per grant, never expires
-- KEYS[3] queue         list of waiter tokens in arrival order
-- KEYS[4] waiter leases sorted set: token -> server time (ms) at which its waiter lease ends
-- KEYS[5] waiter info   hash: token -> "<lease_ms>|<meta>" (what a grant writes for it)
-- KEYS[6] release ring  optional: the slot's release ring (_ring.lua), a bit per recent
--                       fencing token: cleared when a token is issued here, set by its
--                       holder's release, read by a release sent again after a lost reply
-- KEYS[7] waiters key   release, force, optional (with KEYS[6]): MultiLock's marker "some
--                       client is waiting" (see multi.lua); its presence makes a release
--                       publish one wake-up to KEYS[8]
-- KEYS[8] wake channel  with KEYS[7]: "P{N}:wake", PUBLISHed "*" (MultiLock's waiters listen
--                       on it, see lock_release.lua); declared as a key, never written as one
-- KEYS[9] delay key     optional (with KEYS[6..8]): "P{N}:delay", string "<delay_ms>", the
--                       lock-delay of the hold (ARGV[7]), PXAT = the lock key's deadline +
--                       delay_ms (both from one TIME),
--                       written with the hold and moved with each extend (lock_extend.lua);
--                       a release or force DELetes it with the lock key. While it exists
--                       and the lock key does not (the hold ended WITHOUT a release), nobody
--                       takes the lock: acquire answers busy with its PTTL, grants wait
-- ARGV[1] op            acquire | release | cancel | force
-- ARGV[2] token         owner token
-- acquire only (each op sends only its own arguments, so the fast paths parse few):
-- ARGV[3] lease_ms      lease of the lock once held, milliseconds
-- ARGV[4] meta          holder metadata "<host>|<pid>|<acquired_unix_ms>"
-- ARGV[5] waiter_ms     waiter lease, milliseconds; 0 for a single try (never queues)
-- ARGV[6] queue_max     most waiters the queue takes; 0: no limit
-- ARGV[7] delay_ms      optional, with KEYS[9]: lock-delay of the hold taken, milliseconds;
--                       0 or absent: none. A queued waiter keeps it in its waiter info as
--                       "<lease_ms>d<delay_ms>|<meta>" for its grant
-- release only:
-- ARGV[3] fence         the hold's fencing token (from its acquire), for the release ring:
--                       a release sent again finds it released there; 0: not known
-- force: ARGV op, "" (no token)
-- The name's grant channels are KEYS[1] .. ":grant:<process tag>" (FairKeys.grant_for,
-- GRANT_SUFFIX; pub/sub channels, not keys); a grant PUBLISHes "<tag>|<fence>", where tag =
-- sha1(token)[1..20] of the waiter granted, to that waiter's process's channel (see
-- _queue.lua: grant_channel); multi.lua's release publishes "<tag>|0" there (a wake-up:
-- try again now).
-- returns
--   acquire  {"ok", fence, lease_ms}  held (taken now, or granted to this token by a release)
--            {"busy", hint_ms, fence} queued (or, for a single try, not taken); hint_ms bounds
--                                     the wait before the next try, -1 when the lock has no TTL
--                                     (the delay key's PTTL while a lock-delay holds it off);
--                                     fence: the name's fencing counter now (its slot's; 0 if
--                                     absent), so a grant message received later is known
--                                     to be newer (fence above);
--                                     a single try on the fast path returns {"busy", hint_ms}
--            {"full", length}         the queue is full; the caller is not queued
--   release  "ok" | "gone" | "taken"  as lock_release.lua; "ok" grants to the next waiter;
--                                     also "ok" for a repeat of this token's release (a
--                                     client retrying after a lost reply) while its fence
--                                     is in the release ring's window (_ring.lua)
--   cancel   {"ok", fence, lease_ms}  the lock was granted to this token meanwhile: it holds it
--            {"left", 0}              no longer queued
--   force    1 if a lock key was deleted, plus 2 if a lock-delay (KEYS[9]) was ended: 0..3
--            (operator override; grants to the next waiter)
--   any op   error "NOPERM redislock: <COMMAND> ..."  the ACL refused a command; nothing was
--            changed (a fast path: at most a spurious wake-up, as lock_release.lua)
-- A failed SET NX of the lock key is always followed by a GET of it (the audit relies on it).
-- include: _acl.lua
-- include: _fence.lua
-- include: _ring.lua
-- include: _queue.lua

local op, token = ARGV[1], ARGV[2]

local function mine(v)
  return v and string.sub(v, 1, #token + 1) == token .. '|'
end

-- The fencing token in lock value v ("<token>|<fence>|..."); 0 if it has none
local function value_fence(v)
  return tonumber(string.match(v, '^[^|]*|(%d+)|') or '0')
end

-- MultiLock's waiters leave a marker on a busy name and wait on its wake channel: a release
-- (or force) that was given KEYS[7] publishes one wake-up when the marker is there. Through
-- pcall, so a fast path can call it too; returns an error reply, or nil.
local function wake_marked()
  if not KEYS[7] then return nil end
  local r = redis.pcall('EXISTS', KEYS[7])
  if bad(r) then return failed('EXISTS', r) end
  if r == 1 then
    r = redis.pcall('PUBLISH', KEYS[8], '*')
    if bad(r) then return failed('PUBLISH', r) end
  end
  return nil
end

-- The lock-delay left (ms) when the lock key is absent and the delay key (KEYS[9]) exists:
-- the last hold ended without a release and nobody may take the lock yet; nil otherwise
-- (also without KEYS[9]). Through pcall: returns (ms or nil, error reply or nil).
local function delay_left()
  if not KEYS[9] then return nil, nil end
  local d = redis.pcall('PTTL', KEYS[9])
  if bad(d) then return nil, failed('PTTL', d) end
  if d == -2 then return nil, nil end
  local e = redis.pcall('EXISTS', KEYS[1])
  if bad(e) then return nil, failed('EXISTS', e) end
  if e == 1 then return nil, nil end
  return d, nil
end

-- Write the delay key of a hold of lease_ms with lock-delay delay_ms (a string; nothing for
-- "0" or nil); through pcall: returns an error reply, or nil.
local function has_delay(delay_ms)
  return KEYS[9] and delay_ms and delay_ms ~= '' and delay_ms ~= '0'
end

-- The deadline (server ms, as exact integer text for PXAT) lease_ms from the server's clock
-- (TIME): a hold with a lock-delay writes its lock key and its delay key from ONE reading,
-- so the delay key ends exactly delay_ms after the lease (two relative PX are counted from
-- the millisecond each command runs in). Through pcall: returns (deadline or nil, error).
local function deadline(lease_ms)
  local t = redis.pcall('TIME')
  if bad(t) then return nil, failed('TIME', t) end
  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(lease_ms)
  return at, nil
end

local function num(v)
  return string.format('%.0f', v)
end

-- Write the delay key of a hold whose lock key ends at server time at_ms (deadline()) with
-- lock-delay delay_ms (a string; nothing for "0" or nil); through pcall: returns an error
-- reply, or nil.
local function set_delay(at_ms, delay_ms)
  if not has_delay(delay_ms) then return nil end
  local r = redis.pcall('SET', KEYS[9], delay_ms, 'PXAT', num(at_ms + tonumber(delay_ms)))
  if bad(r) then return failed('SET', r) end
  return nil
end

-- Fast paths, while nobody is queued (every command through pcall, the writes in an order
-- whose every prefix is safe, as lock_acquire.lua and lock_release.lua): Lock's one round
-- trip when uncontended. Anything else falls through to the queue below.
if op == 'acquire' then
  local q = redis.pcall('EXISTS', KEYS[3])
  if bad(q) then return failed('EXISTS', q) end
  local held_off, no = nil, nil
  if q == 0 then
    held_off, no = delay_left()
    if no then return no end
    if held_off and ARGV[5] == '0' then return {'busy', held_off} end
  end
  if q == 0 and not held_off then
    -- The value is written once, with the token it would get (_fence.lua: peek_fence)
    local fence, no = peek_fence(KEYS[2])
    if no then return failed(no, fence) end
    local value = token .. '|' .. fence .. '|' .. ARGV[4]
    local r, at
    if has_delay(ARGV[7]) then  -- TIME only for a hold with a lock-delay
      at, no = deadline(ARGV[3])
      if no then return no end
      r = redis.pcall('SET', KEYS[1], value, 'NX', 'PXAT', num(at))
    else
      r = redis.pcall('SET', KEYS[1], value, 'NX', 'PX', ARGV[3])
    end
    if bad(r) then return failed('SET', r) end
    if r then
      no = set_delay(at, ARGV[7])
      if no then
        redis.pcall('DEL', KEYS[1])  -- undo: no hold without its lock-delay
        return no
      end
      r, no = next_fence(KEYS[2])  -- issues that token
      if not no and KEYS[6] then r, no = ring_issue(KEYS[6], fence) end
      if no then
        redis.pcall('DEL', KEYS[1])  -- undo: no hold without its fencing token (and bit)
        if KEYS[9] then redis.pcall('DEL', KEYS[9]) end
        return failed(no, r)
      end
      return {'ok', fence, tonumber(ARGV[3])}
    end
    local v = redis.pcall('GET', KEYS[1])
    if bad(v) then return failed('GET', v) end
    if ARGV[5] == '0' and not mine(v) then  -- a single try on a held lock: busy
      r = redis.pcall('PTTL', KEYS[1])
      if bad(r) then return failed('PTTL', r) end
      return {'busy', r}
    end
  end
elseif op == 'release' then
  local v = redis.pcall('GET', KEYS[1])
  if bad(v) then return failed('GET', v) end
  if mine(v) then
    -- one EXISTS for the queue and MultiLock's marker: usually neither is there
    local q
    if KEYS[7] then
      q = redis.pcall('EXISTS', KEYS[3], KEYS[7])
    else
      q = redis.pcall('EXISTS', KEYS[3])
    end
    if bad(q) then return failed('EXISTS', q) end
    if q > 0 and KEYS[7] then  -- which one: only the marker keeps the fast path
      q = redis.pcall('EXISTS', KEYS[3])
      if bad(q) then return failed('EXISTS', q) end
      if q == 0 then
        local r = wake_marked()
        if r then return r end
      end
    end
    if q == 0 then
      local r, cmd, marked
      local fence = value_fence(v)
      if KEYS[6] then
        r, cmd, marked = ring_mark(KEYS[6], KEYS[2], fence)
        if r then return failed(cmd, r) end
      end
      if KEYS[9] then  -- the lock-delay goes with a release (one DEL: both or neither)
        r = redis.pcall('DEL', KEYS[1], KEYS[9])
      else
        r = redis.pcall('DEL', KEYS[1])
      end
      if bad(r) then
        -- Not released: forget the release (the bit was just set; DEL failed).
        if marked then ring_unmark(KEYS[6], fence) end
        return failed('DEL', r)
      end
      return 'ok'
    end
  end
end

local grant = KEYS[1] .. ':grant'  -- the base of the name's grant channels (see above)

-- ACL (docs/acl.md): each command this script may run on each key it declares (and on the
-- grant channel) is checked before anything is read or written, so a refused one makes the
-- call answer "NOPERM redislock: <COMMAND> ..." having changed nothing (Redis >= 7).
do
  local k1, k2, k3, k4, k5 = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
  local uses = {
    k1, 'GET', k1, 'SET', k1, 'DEL', k1, 'PTTL',
    k2, 'GET', k2, 'INCR',
    k3, 'DEL', k3, 'LINDEX', k3, 'LLEN', k3, 'LREM', k3, 'PEXPIRE', k3, 'PTTL', k3, 'RPUSH',
    k4, 'DEL', k4, 'PEXPIRE', k4, 'ZADD', k4, 'ZCARD', k4, 'ZRANGEBYSCORE', k4, 'ZREM',
    k4, 'ZSCORE',
    k5, 'DEL', k5, 'HDEL', k5, 'HGET', k5, 'HSET', k5, 'PEXPIRE',
    grant .. ':0', 'PUBLISH',  -- a process's channel (any tag: checked as one)
  }
  if KEYS[6] then
    uses[#uses + 1], uses[#uses + 2], uses[#uses + 3], uses[#uses + 4] =
      KEYS[6], 'GETBIT', KEYS[6], 'SETBIT'
  end
  if KEYS[7] then
    uses[#uses + 1], uses[#uses + 2], uses[#uses + 3], uses[#uses + 4] =
      KEYS[7], 'EXISTS', KEYS[8], 'PUBLISH'
  end
  if KEYS[9] then
    uses[#uses + 1], uses[#uses + 2], uses[#uses + 3], uses[#uses + 4] =
      KEYS[9], 'PTTL', KEYS[9], 'SET'
    uses[#uses + 1], uses[#uses + 2], uses[#uses + 3], uses[#uses + 4] =
      KEYS[9], 'DEL', KEYS[9], 'EXISTS'
  end
  local no = preflight(uses, true)
  if no then return refused(no) end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function forget(tok)
  redis.call('LREM', KEYS[3], 1, tok)
  redis.call('ZREM', KEYS[4], tok)
  redis.call('HDEL', KEYS[5], tok)
end

-- drop waiters whose waiter lease ended (they stopped renewing: dead or gone)
for _, tok in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)) do
  forget(tok)
end

-- The queue's keys live at least as long as its latest waiter lease: a waiter that queues
-- (or renews, waiter_keep.lua) with waiter lease ms extends them to twice that when they
-- have less than ms left, so not every call extends them; once nobody is queued they are
-- deleted. (A TTL is only ever raised, so it stays above every live waiter's lease.)
local function stretch(ms)
  if redis.call('PTTL', KEYS[3]) < ms then
    redis.call('PEXPIRE', KEYS[3], 2 * ms)
    redis.call('PEXPIRE', KEYS[4], 2 * ms)
    redis.call('PEXPIRE', KEYS[5], 2 * ms)
  end
end

local function settle()
  if redis.call('ZCARD', KEYS[4]) == 0 then
    redis.call('DEL', KEYS[3], KEYS[4], KEYS[5])
  end
end

-- hand the free lock to the next live waiter: write its hold and publish its fence to it
-- (called only while the lock key is absent); none while a lock-delay holds the lock off:
-- the head waiter takes it itself once the delay key is gone (its keep finds it free)
local function grant_next()
  if KEYS[9] and redis.call('EXISTS', KEYS[9]) == 1 then return false end
  local head = redis.call('LINDEX', KEYS[3], 0)
  if not head then return false end
  local info = redis.call('HGET', KEYS[5], head)
  local lease, delay, meta = string.match(info or '', '^(%d+)d?(%d*)|(.*)$')
  if not lease then
    forget(head)
    return redis.error_reply('redislock - waiter info of ' .. KEYS[3] .. ' is malformed')
  end
  local fence, no = next_fence(KEYS[2])
  if no then return failed(no, fence) end
  if KEYS[6] then  -- checked by the preflight: cannot fail now
    local e, cmd = ring_issue(KEYS[6], fence)
    if e then return failed(cmd, e) end
  end
  if has_delay(delay) then  -- one deadline for both keys (deadline() above)
    local at = now + tonumber(lease)
    redis.call('SET', KEYS[1], head .. '|' .. fence .. '|' .. meta, 'PXAT', num(at))
    redis.call('SET', KEYS[9], delay, 'PXAT', num(at + tonumber(delay)))
  else
    redis.call('SET', KEYS[1], head .. '|' .. fence .. '|' .. meta, 'PX', lease)
  end
  forget(head)
  local channel = grant_channel(grant, head)
  if channel then redis.call('PUBLISH', channel, grant_tag(head) .. '|' .. fence) end
  settle()
  return true
end

if op == 'acquire' then
  local v = redis.call('GET', KEYS[1])
  if mine(v) then  -- granted by a release, or a repeat after a lost reply
    forget(token)
    settle()
    return {'ok', held_fence(v), redis.call('PTTL', KEYS[1])}
  end
  local held_off = KEYS[9] and not v and redis.call('PTTL', KEYS[9])
  if held_off == -2 then held_off = nil end
  if not v and not held_off then
    local head = redis.call('LINDEX', KEYS[3], 0)
    if not head or head == token then
      local fence, no = next_fence(KEYS[2])
      if no then return failed(no, fence) end
      if KEYS[6] then  -- checked by the preflight: cannot fail now
        local e, cmd = ring_issue(KEYS[6], fence)
        if e then return failed(cmd, e) end
      end
      local at = now + tonumber(ARGV[3])
      redis.call('SET', KEYS[1], token .. '|' .. fence .. '|' .. ARGV[4], 'PXAT', num(at))
      no = set_delay(at, ARGV[7])  -- checked by the preflight: cannot fail now
      if no then return no end
      if head then
        forget(token)
        settle()
      end
      return {'ok', fence, tonumber(ARGV[3])}
    end
    -- free, but another live waiter is first (its holder expired instead of releasing)
    local r = grant_next()
    if r ~= true and r ~= false then return r end
  end
  -- The counter this name's next token comes from, as it is now (the slot counter:
  -- peek_fence - 1). The counter is shared by all the names of the slot, so other names
  -- raise it too; still, every grant to this waiter runs after this reply and takes its
  -- token from the same counter with INCR, so its fence is always above this value: the
  -- waiter's "grant fence above busy fence" check holds.
  local fence_now, no = peek_fence(KEYS[2])
  if no then return failed(no, fence_now) end
  fence_now = fence_now - 1
  local hint = held_off or redis.call('PTTL', KEYS[1])
  if ARGV[5] == '0' then
    return {'busy', hint, fence_now}
  end
  if not redis.call('ZSCORE', KEYS[4], token) then
    local len = redis.call('LLEN', KEYS[3])
    local most = tonumber(ARGV[6])
    if most > 0 and len >= most then
      return {'full', len}
    end
    redis.call('RPUSH', KEYS[3], token)
  end
  redis.call('ZADD', KEYS[4], now + tonumber(ARGV[5]), token)
  local delay = ARGV[7] and ARGV[7] ~= '' and ARGV[7] ~= '0' and 'd' .. ARGV[7] or ''
  redis.call('HSET', KEYS[5], token, ARGV[3] .. delay .. '|' .. ARGV[4])
  stretch(tonumber(ARGV[5]))
  return {'busy', hint, fence_now}
end

if op == 'release' then
  local v = redis.call('GET', KEYS[1])
  local fence = tonumber(ARGV[3] or '0') or 0
  if not mine(v) and KEYS[6] then
    local done, e, cmd = ring_released(KEYS[6], KEYS[2], fence)
    if e then return failed(cmd, e) end
    if done then  -- released already (and maybe granted on): the same release sent again
      if not v then  -- nobody was granted it yet
        local r = grant_next()
        if r ~= true and r ~= false then return r end
      end
      return 'ok'
    end
  end
  if not v then  -- expired: the next waiter need not wait for its own retry
    local r = grant_next()
    if r ~= true and r ~= false then return r end
    return 'gone'
  end
  if not mine(v) then return 'taken' end
  local r = wake_marked()  -- checked by the preflight: cannot fail now
  if r then return r end
  if KEYS[6] then
    local e, cmd = ring_mark(KEYS[6], KEYS[2], value_fence(v))
    if e then return failed(cmd, e) end
  end
  redis.call('DEL', KEYS[1])
  if KEYS[9] then redis.call('DEL', KEYS[9]) end  -- a release ends the lock-delay too
  r = grant_next()
  if r ~= true and r ~= false then return r end
  return 'ok'
end

if op == 'cancel' then
  local v = redis.call('GET', KEYS[1])
  if mine(v) then
    return {'ok', held_fence(v), redis.call('PTTL', KEYS[1])}
  end
  forget(token)
  if not v then
    local r = grant_next()
    if r ~= true and r ~= false then return r end
  end
  settle()
  return {'left', 0}
end

if op == 'force' then
  local n = redis.call('DEL', KEYS[1])
  -- an operator's override ends the lock-delay too (to keep it, let the lease run out)
  if KEYS[9] then n = n + 2 * redis.call('DEL', KEYS[9]) end
  local r = wake_marked()
  if r then return r end
  r = grant_next()
  if r ~= true and r ~= false then return r end
  return n
end

return redis.error_reply('redislock - unknown fair op ' .. tostring(op))
