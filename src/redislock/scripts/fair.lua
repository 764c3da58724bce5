-- fair: a mutex granted in arrival (FIFO) order with direct hand-off (Lock and FairLock).
-- Design: Redisson's RedissonFairLock (a queue of waiters, each with a timeout), but each
-- waiter's lease is short and renewed by the waiter itself while it waits, so a dead waiter
-- is skipped about one waiter lease after it stopped renewing; and a release grants the
-- lock to the next live waiter itself (one push wakes exactly that waiter), so the waiter
-- needs no further round trip to take it, and the releasing client cannot take it back.
-- While nobody is queued, an acquire is Lock's SET NX and INCR and a release Lock's
-- compare-and-delete (the fast paths below: no ACL preflight, no TIME).
-- The lock key, fencing counter, done key, lock_extend.lua and lock_status.lua are those of
-- Lock; MultiLock (multi.lua) takes the same lock keys and wakes the head of this queue.
--
-- KEYS[1] lock key      string "<token>|<meta>" with a PX TTL (as Lock)
-- KEYS[2] fence key     integer counter, INCR per grant, never expires
-- KEYS[3] queue         list of waiter tokens in arrival order
-- KEYS[4] waiter leases sorted set: token -> server time (ms) at which its waiter lease ends
-- KEYS[5] waiter info   hash: token -> "<lease_ms>|<meta>" (what a grant writes for it)
-- KEYS[6] done key      release, optional: string "<token>", the last release of this name,
--                       PX ARGV[3] (Lock's done key, see lock_release.lua)
-- KEYS[7] waiters key   release, force, optional (with KEYS[6]): MultiLock's marker "some
--                       client is waiting" (see multi.lua); its presence makes a release
--                       push one wake-up to KEYS[8]
-- KEYS[8] wake key      with KEYS[7]: list, PX ARGV[4] (MultiLock's waiters BLPOP it)
-- ARGV[1] op            acquire | release | cancel | force
-- ARGV[2] token         owner token
-- acquire only (each op sends only its own arguments, so the fast paths parse few):
-- ARGV[3] lease_ms      lease of the lock once held, milliseconds
-- ARGV[4] meta          holder metadata "<host>|<pid>|<acquired_unix_ms>"
-- ARGV[5] waiter_ms     waiter lease, milliseconds; 0 for a single try (never queues)
-- ARGV[6] queue_max     most waiters the queue takes; 0: no limit
-- release and force only:
-- ARGV[3] done_ms       milliseconds the done key (KEYS[6], release) remembers this release:
--                       the window in which a client may send it again
-- ARGV[4] wake_ttl_ms   with KEYS[7]: how long an unconsumed wake-up stays, milliseconds
-- A waiter's grant list is KEYS[1] .. ":grant:" .. sha1(token)[1..20] (a key of the same
-- hash tag, FairKeys.grant; the waiter BLPOPs it). A grant pushes the fencing token;
-- multi.lua's release pushes "0" (a wake-up: try again).
-- returns
--   acquire  {"ok", fence, lease_ms}  held (taken now, or granted to this token by a release)
--            {"busy", hint_ms}        queued (or, for a single try, not taken); hint_ms bounds
--                                     the wait before the next try, -1 when the lock has no TTL
--            {"full", length}         the queue is full; the caller is not queued
--   release  "ok" | "gone" | "taken"  as lock_release.lua; "ok" grants to the next waiter;
--                                     also "ok" for a repeat of this token's release (a
--                                     client retrying after a lost reply)
--   cancel   {"ok", fence, lease_ms}  the lock was granted to this token meanwhile: it holds it
--            {"left", 0}              no longer queued
--   force    1 if a lock key was deleted, else 0 (operator override; grants to the next waiter)
--   any op   error "NOPERM redislock: <COMMAND> ..."  the ACL refused a command; nothing was
--            changed (a fast path: at most a spurious wake-up, as lock_release.lua)
-- A failed SET NX of the lock key is always followed by a GET of it (the audit relies on it).
-- include: _acl.lua

-- include: _queue.lua

local op, token = ARGV[1], ARGV[2]

local function mine(v)
  return v and string.sub(v, 1, #token + 1) == token .. '|'
end

-- MultiLock's waiters leave a marker on a busy name and block on its wake list: a release
-- (or force) that was given KEYS[7] pushes one wake-up when the marker is there. Through
-- pcall, so a fast path can call it too; returns an error reply, or nil.
local function wake_marked()
  if not KEYS[7] then return nil end
  local r = redis.pcall('EXISTS', KEYS[7])
  if bad(r) then return failed('EXISTS', r) end
  if r == 1 then
    r = redis.pcall('DEL', KEYS[8])
    if bad(r) then return failed('DEL', r) end
    r = redis.pcall('RPUSH', KEYS[8], '1')
    if bad(r) then return failed('RPUSH', r) end
    r = redis.pcall('PEXPIRE', KEYS[8], ARGV[4])
    if bad(r) then
      redis.pcall('DEL', KEYS[8])  -- undo: never a wake list without a TTL
      return failed('PEXPIRE', r)
    end
  end
  return nil
end

-- Fast paths, while nobody is queued (every command through pcall, the writes in an order
-- whose every prefix is safe, as lock_acquire.lua and lock_release.lua): Lock's one round
-- trip when uncontended. Anything else falls through to the queue below.
if op == 'acquire' then
  local q = redis.pcall('EXISTS', KEYS[3])
  if bad(q) then return failed('EXISTS', q) end
  if q == 0 then
    local r = redis.pcall('SET', KEYS[1], token .. '|' .. ARGV[4], 'NX', 'PX', ARGV[3])
    if bad(r) then return failed('SET', r) end
    if r then
      local fence = redis.pcall('INCR', KEYS[2])
      if bad(fence) then
        redis.pcall('DEL', KEYS[1])  -- undo: no hold without its fencing token
        return failed('INCR', fence)
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
      local r
      if KEYS[6] then
        r = redis.pcall('SET', KEYS[6], token, 'PX', ARGV[3])
        if bad(r) then return failed('SET', r) end
      end
      r = redis.pcall('DEL', KEYS[1])
      if bad(r) then
        -- Not released: forget the release (SET just worked; DEL did not).
        if KEYS[6] then redis.pcall('SET', KEYS[6], '', 'PX', 1) end
        return failed('DEL', r)
      end
      return 'ok'
    end
  end
end

local function grant_key(tok)
  return grant_list(KEYS[1] .. ':grant:', tok)
end

-- ACL (docs/acl.md): each command this script may run on each key it declares (and on a
-- grant list) is checked before anything is read or written, so a refused one makes the
-- call answer "NOPERM redislock: <COMMAND> ..." having changed nothing (Redis >= 7).
do
  local uses = {
    {KEYS[1], {'GET', 'SET', 'DEL', 'PTTL'}},
    {KEYS[2], {'INCR'}},
    {KEYS[3], {'DEL', 'LINDEX', 'LLEN', 'LREM', 'PEXPIRE', 'RPUSH'}},
    {KEYS[4], {'DEL', 'PEXPIRE', 'ZADD', 'ZRANGE', 'ZRANGEBYSCORE', 'ZREM', 'ZSCORE'}},
    {KEYS[5], {'DEL', 'HDEL', 'HGET', 'HSET', 'PEXPIRE'}},
    {grant_key(token), {'DEL', 'RPUSH', 'PEXPIRE'}},
  }
  if KEYS[6] then uses[#uses + 1] = {KEYS[6], {'GET', 'SET'}} end
  if KEYS[7] then
    uses[#uses + 1] = {KEYS[7], {'EXISTS'}}
    uses[#uses + 1] = {KEYS[8], {'DEL', 'RPUSH', 'PEXPIRE'}}
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

-- the queue's keys live as long as its latest waiter lease
local function settle()
  local last = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')
  if #last == 0 then
    redis.call('DEL', KEYS[3], KEYS[4], KEYS[5])
  else
    local ms = tonumber(last[2]) - now
    redis.call('PEXPIRE', KEYS[3], ms)
    redis.call('PEXPIRE', KEYS[4], ms)
    redis.call('PEXPIRE', KEYS[5], ms)
  end
end

-- hand the free lock to the next live waiter: write its hold and push its fence to it
local function grant_next()
  local head = redis.call('LINDEX', KEYS[3], 0)
  if not head then return false end
  local info = redis.call('HGET', KEYS[5], head)
  local lease, meta = string.match(info or '', '^(%d+)|(.*)$')
  if not lease then
    forget(head)
    return redis.error_reply('redislock - waiter info of ' .. KEYS[3] .. ' is malformed')
  end
  redis.call('SET', KEYS[1], head .. '|' .. meta, 'PX', lease)
  local fence = redis.call('INCR', KEYS[2])
  forget(head)
  local g = grant_key(head)
  redis.call('DEL', g)
  redis.call('RPUSH', g, fence)
  redis.call('PEXPIRE', g, lease)
  settle()
  return true
end

if op == 'acquire' then
  local v = redis.call('GET', KEYS[1])
  if mine(v) then  -- granted by a release, or a repeat after a lost reply
    local g = grant_key(token)
    redis.call('DEL', g)
    forget(token)
    settle()
    return {'ok', tonumber(redis.call('GET', KEYS[2])), redis.call('PTTL', KEYS[1])}
  end
  if not v then
    local head = redis.call('LINDEX', KEYS[3], 0)
    if not head or head == token then
      redis.call('SET', KEYS[1], token .. '|' .. ARGV[4], 'PX', ARGV[3])
      local fence = redis.call('INCR', KEYS[2])
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
  if ARGV[5] == '0' then
    return {'busy', redis.call('PTTL', KEYS[1])}
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
  redis.call('HSET', KEYS[5], token, ARGV[3] .. '|' .. ARGV[4])
  settle()
  return {'busy', redis.call('PTTL', KEYS[1])}
end

if op == 'release' then
  local v = redis.call('GET', KEYS[1])
  if not mine(v) and KEYS[6] and redis.call('GET', KEYS[6]) == token then
    return 'ok'  -- released already (and maybe granted on): the same release sent again
  end
  if not v then  -- expired: the next waiter need not wait for its own retry
    local r = grant_next()
    if r ~= true and r ~= false then return r end
    return 'gone'
  end
  if not mine(v) then return 'taken' end
  local r = wake_marked()  -- checked by the preflight: cannot fail now
  if r then return r end
  redis.call('DEL', KEYS[1])
  if KEYS[6] then
    redis.call('SET', KEYS[6], token, 'PX', ARGV[3])
  end
  r = grant_next()
  if r ~= true and r ~= false then return r end
  return 'ok'
end

if op == 'cancel' then
  local v = redis.call('GET', KEYS[1])
  if mine(v) then
    local g = grant_key(token)
    redis.call('DEL', g)
    return {'ok', tonumber(redis.call('GET', KEYS[2])), redis.call('PTTL', KEYS[1])}
  end
  forget(token)
  local g = grant_key(token)
  redis.call('DEL', g)
  if not v then
    local r = grant_next()
    if r ~= true and r ~= false then return r end
  end
  settle()
  return {'left', 0}
end

if op == 'force' then
  local n = redis.call('DEL', KEYS[1])
  local r = wake_marked()
  if r then return r end
  r = grant_next()
  if r ~= true and r ~= false then return r end
  return n
end

return redis.error_reply('redislock - unknown fair op ' .. tostring(op))
