-- _fair: shared by the scripts of Lock's and FairLock's queue (fair_acquire.lua,
-- fair_release.lua, fair_cancel.lua, fair_force.lua), written into each one where it says
-- "-- include: _fair.lua", after _acl.lua, _fence.lua, _ring.lua and _queue.lua (uses their
-- functions); not a script of its own. Each script includes it after its fast path (the
-- one round trip while nobody is queued), which defines none of these functions.
-- The queue of a name: its lock key's waiters in arrival order (queue, a list of tokens),
-- their waiter leases (leases, a sorted set token -> server ms its lease ends) and what a
-- grant writes for each (info, a hash token -> "<lease_ms>|<meta>", or
-- "<lease_ms>d<delay_ms>|<meta>" for a hold with a lock-delay). The keys are the caller's
-- KEYS, passed in; the grant channels are pub/sub channels of the lock key (_queue.lua).
-- Keys and the commands run on them (open_queue's preflight, _acl.lua): the lock key SET;
-- the counter INCR (and GET, _ring.lua); the queue DEL, LINDEX, LREM; the leases DEL,
-- ZCARD, ZRANGEBYSCORE, ZREM; the info DEL, HDEL, HGET; the ring GETBIT, SETBIT; the delay
-- key EXISTS, SET; a grant channel PUBLISH.

local GRANT = ':grant'  -- a name's grant channels: <lock key> .. GRANT .. ':<process tag>'

-- Whether lock value v (nil: no lock key) is token's hold
local function owns(v, token)
  return v and string.sub(v, 1, #token + 1) == token .. '|'
end

local function forget(queue, leases, info, tok)
  redis.call('LREM', queue, 1, tok)
  redis.call('ZREM', leases, tok)
  redis.call('HDEL', info, tok)
end

-- Drop the waiters whose waiter lease ended by server time now (they stopped renewing:
-- dead or gone); every call past a fast path does this first.
local function drop_ended(queue, leases, info, now)
  for _, tok in ipairs(redis.call('ZRANGEBYSCORE', leases, '-inf', now)) do
    forget(queue, leases, info, tok)
  end
end

-- What every call of the queue's scripts does past its fast path, before anything else.
-- ACL (docs/acl.md): each command the call may run on each key it declares (and on a grant
-- channel) is checked first (with TIME), so a refused one makes the call answer "NOPERM
-- redislock: <COMMAND> ..." having changed nothing (Redis >= 7): the pairs key, COMMAND of
-- own (the script's own commands, preflight's list), to which this adds those of this
-- file's functions, and of _wake.lua's wake_marked when waiters is given (with wake). ring,
-- delay_key and waiters may be nil (not given). Then the server's clock is read and
-- drop_ended runs. Returns now (server ms), or (nil, the refusal's error reply).
local function open_queue(own, lock, counter, queue, leases, info, ring, delay_key, waiters, wake)
  local shared = {
    lock, 'SET', counter, 'INCR',
    queue, 'DEL', queue, 'LINDEX', queue, 'LREM',
    leases, 'DEL', leases, 'ZCARD', leases, 'ZRANGEBYSCORE', leases, 'ZREM',
    info, 'DEL', info, 'HDEL', info, 'HGET',
    lock .. GRANT .. ':0', 'PUBLISH',  -- a process's channel (any tag: checked as one)
  }
  if ring then
    shared[#shared + 1], shared[#shared + 2], shared[#shared + 3], shared[#shared + 4] =
      ring, 'GETBIT', ring, 'SETBIT'
  end
  if waiters then
    shared[#shared + 1], shared[#shared + 2], shared[#shared + 3], shared[#shared + 4] =
      waiters, 'EXISTS', wake, 'PUBLISH'
  end
  if delay_key then
    shared[#shared + 1], shared[#shared + 2], shared[#shared + 3], shared[#shared + 4] =
      delay_key, 'EXISTS', delay_key, 'SET'
  end
  local no = preflight(own, true) or preflight(shared, false)
  if no then return nil, refused(no) end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  drop_ended(queue, leases, info, now)
  return now
end

-- Once nobody is queued, the queue's keys go.
local function settle(queue, leases, info)
  if redis.call('ZCARD', leases) == 0 then
    redis.call('DEL', queue, leases, info)
  end
end

-- The name's next fencing token (from counter), its bit in the release ring (when ring is
-- given) cleared (_ring.lua: a release sent again must not find it released): returns
-- fence, or (nil, error reply). After the preflight: the ring's commands cannot fail.
local function issue(counter, ring)
  local fence, no = next_fence(counter)
  if no then return nil, failed(no, fence) end
  if ring then
    local e, cmd = ring_issue(ring, fence)
    if e then return nil, failed(cmd, e) end
  end
  return fence
end

-- Hand the free lock to the next live waiter: write its hold and publish its fence to it
-- (called only while the lock key is absent, after drop_ended); none while a lock-delay
-- holds the lock off (delay_key exists): the head waiter takes it itself once the delay
-- key is gone (its keep finds it free). Returns true (granted), false (nobody to grant),
-- or an error reply.
local function grant_next(lock, counter, queue, leases, info, ring, delay_key, now)
  if delay_key and redis.call('EXISTS', delay_key) == 1 then return false end
  local head = redis.call('LINDEX', queue, 0)
  if not head then return false end
  local meta = redis.call('HGET', info, head)
  local lease, delay, rest = string.match(meta or '', '^(%d+)d?(%d*)|(.*)$')
  if not lease then
    forget(queue, leases, info, head)
    return redis.error_reply('redislock - waiter info of ' .. queue .. ' is malformed')
  end
  local fence, no = issue(counter, ring)
  if not fence then return no end
  local value = head .. '|' .. fence .. '|' .. rest
  if delay_key and delay ~= '' and delay ~= '0' then  -- one deadline for both keys
    local at = now + tonumber(lease)
    redis.call('SET', lock, value, 'PXAT', string.format('%.0f', at))
    redis.call('SET', delay_key, delay, 'PXAT', string.format('%.0f', at + tonumber(delay)))
  else
    redis.call('SET', lock, value, 'PX', lease)
  end
  forget(queue, leases, info, head)
  local channel = grant_channel(lock .. GRANT, head)
  if channel then redis.call('PUBLISH', channel, grant_tag(head) .. '|' .. fence) end
  settle(queue, leases, info)
  return true
end
