-- waiter_keep: the waiter leases of many queued waiters (Lock, FairLock: fair_acquire.lua's queue)
-- renewed in one call, each waiter told whether the lock became its own meanwhile.
-- Design: as Redisson's RedissonFairLock, a queued waiter that stops renewing is skipped; but
-- the renewals of one process's waiters go together (redislock._core.wake: Keep), every third
-- of their waiter lease, instead of each waiter trying fair_acquire.lua again: with 10,000
-- waiters that was 30,000 acquire scripts a second. The answer is also the waiter's bounded
-- re-check: a grant whose message was lost is found here.
-- KEYS[1] lock key      of waiter 1 (fair_acquire.lua KEYS[1])
-- KEYS[2] queue         of waiter 1 (fair_acquire.lua KEYS[3])
-- KEYS[3] waiter leases of waiter 1 (fair_acquire.lua KEYS[4]: token -> server ms
--                       its lease ends)
-- KEYS[4] waiter info   of waiter 1 (fair_acquire.lua KEYS[5])
--         and so on: waiter n's four keys are KEYS[4n-3] .. KEYS[4n] (any number of
--         waiters; one node: in a Cluster the client sends one call per hash slot)
-- ARGV[1] renewals   "<token> <ms> <token> <ms> ...": per waiter, in KEYS order, its token
--                    and its waiter lease in milliseconds (integer >= 1). One argument.
-- returns one entry per waiter, in order:
--   {"queued", 0}       still queued; its waiter lease now ends ms from now (never added:
--                       a waiter no longer queued is not queued again)
--   {"granted", fence}  the lock is this waiter's (a release granted it); fence: its fencing
--                       token (0 if the value does not show one: try fair_acquire.lua)
--   {"free", 0}         the lock is free and this waiter is first in the queue, or the
--                       waiter ahead of it stopped renewing: try fair_acquire.lua now
--   {"gone", 0}         not queued (its waiter lease ended, it was dropped, it left): try
--                       fair_acquire.lua, which queues it again
--   error "NOPERM redislock: <COMMAND> ..."   (an error entry, not an error reply) the ACL
--                       refused a command for this waiter; its lease was not changed
-- Writes: a few waiters whose lease ended leave the queue (as _fair.lua's drop_ended); then
-- ZADD XX of the waiter's own score and PEXPIRE of its queue's keys (each prefix safe: the
-- keys keep a TTL either way). Idempotent: repeated, every lease ends at the same time or later.

-- include: _acl.lua

local t = redis.pcall('TIME')
if bad(t) then return failed('TIME', t) end
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Drop (once a call per queue) a few waiters whose waiter lease ended, as the queue's scripts do
-- on every call: a dead waiter leaves the queue about one waiter lease after it stopped
-- renewing. Returns an error reply, or nil.
local pruned = {}
local function prune(queue, leases, info)
  if pruned[leases] then return nil end
  pruned[leases] = true
  local ended = redis.pcall('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, 16)
  if bad(ended) then return failed('ZRANGEBYSCORE', ended) end
  for _, tok in ipairs(ended) do
    -- list, then sorted set, then hash: a prefix leaves an ended score _fair.lua forgets
    local r = redis.pcall('LREM', queue, 1, tok)
    if bad(r) then return failed('LREM', r) end
    r = redis.pcall('ZREM', leases, tok)
    if bad(r) then return failed('ZREM', r) end
    r = redis.pcall('HDEL', info, tok)
    if bad(r) then return failed('HDEL', r) end
  end
  return nil
end

-- one waiter: returns its entry
local function keep(lock, queue, leases, info, token, ms)
  local v = redis.pcall('GET', lock)
  if bad(v) then return failed('GET', v) end
  if v and string.sub(v, 1, #token + 1) == token .. '|' then
    return {'granted', tonumber(string.match(v, '^[^|]*|(%d+)|') or '0')}
  end
  local no = prune(queue, leases, info)
  if no then return no end
  local score = redis.pcall('ZSCORE', leases, token)
  if bad(score) then return failed('ZSCORE', score) end
  if not score or tonumber(score) <= now then return {'gone', 0} end
  if not v then
    local head = redis.pcall('LINDEX', queue, 0)
    if bad(head) then return failed('LINDEX', head) end
    if head == token then return {'free', 0} end
    if head then
      local ends = redis.pcall('ZSCORE', leases, head)
      if bad(ends) then return failed('ZSCORE', ends) end
      if not ends or tonumber(ends) <= now then return {'free', 0} end
    end
  end
  local r = redis.pcall('ZADD', leases, 'XX', now + ms, token)
  if bad(r) then return failed('ZADD', r) end
  -- the queue's keys live at least as long as its latest waiter lease (as fair_acquire.lua's
  -- stretch): twice this one when extended, so not every renewal extends them
  local pttl = redis.pcall('PTTL', leases)
  if bad(pttl) then return failed('PTTL', pttl) end
  if pttl < ms then
    for _, key in ipairs({leases, queue, info}) do
      r = redis.pcall('PEXPIRE', key, 2 * ms)
      if bad(r) then return failed('PEXPIRE', r) end
    end
  end
  return {'queued', 0}
end

local out = {}
local pairs_of = string.gmatch(ARGV[1], '(%S+) (%d+)')
for i = 1, #KEYS, 4 do
  local token, ms = pairs_of()
  if not token then
    out[#out + 1] = redis.error_reply(
      'ERR waiter_keep: no "<token> <ms>" pair for key number ' .. i)
  else
    out[#out + 1] = keep(KEYS[i], KEYS[i + 1], KEYS[i + 2], KEYS[i + 3], token, tonumber(ms))
  end
end
return out
