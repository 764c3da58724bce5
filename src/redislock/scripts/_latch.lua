-- _latch: shared by the CountDownLatch scripts (latch_set, latch_down, latch_read), written
-- into each one where it says "-- include: _latch.lua", after "-- include: _acl.lua" (uses
-- its bad(), failed() and preflight()); not a script of its own.
-- The latch key "<prefix>{<name>}:latch" is a hash with a TTL: count (what is left, >= 0),
-- gen (its generation: a fencing token, so it strictly increases) and since (every
-- generation of this latch from since up to gen, gen excluded, reached zero: since is the
-- first generation set while the key was absent). A waiter of generation g that finds
-- gen > g knows that g reached zero if and only if since <= g. The key is also the name of
-- the channel a count reaching zero is published on ("Z|<gen>").
-- The done key "<latch key>:done": sorted set op id -> server time (ms) the call ran, for
-- the calls of the last done_ms, so that a set or count-down sent again counts once.
-- Keys and the commands run on them (the helpers take them as arguments): the latch key
-- HMGET, PEXPIRE; the done key ZREMRANGEBYSCORE, ZSCORE, ZADD, PEXPIRE.

-- The latch's count, gen and since (0, 0, 0: no latch), or nil and an error reply (the
-- HMGET failed, or the hash was not written by these scripts).
local function latch_state(latch)
  local v = redis.pcall('HMGET', latch, 'count', 'gen', 'since')
  if bad(v) then return nil, failed('HMGET', v) end
  if not v[1] and not v[2] and not v[3] then return 0, 0, 0 end
  for i = 1, 3 do
    if not v[i] or not string.match(v[i], '^%d+$') then
      return nil, redis.error_reply('redislock - ' .. latch .. ' holds a hash that is not a '
        .. 'CountDownLatch (its count, gen and since fields are not all digits)')
    end
  end
  return tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
end

-- A set's or a count-down's start: checks its arguments (op: "set" or "down", for the
-- error; ok: the op's own arguments are fine), then (Redis 7) every command the call may
-- run, the common ones and the pairs of more {key, COMMAND, ...}; reads the server time,
-- forgets the op ids older than keep ms and reads the latch. Returns now, seen (the op id
-- ran already: its score, else false), count, gen, since; or nil and an error reply;
-- nothing is written.
local function latch_begin(latch, done, op, ok, id, ttl, keep, more)
  local positive = '^[1-9]%d*$'
  if not ok or not string.match(id or '', '^%x+$') or not string.match(ttl or '', positive)
      or not string.match(keep or '', positive) then
    return nil, redis.error_reply('ERR redislock latch: bad arguments for ' .. op)
  end
  local uses = {
    done, 'ZREMRANGEBYSCORE', done, 'ZSCORE', latch, 'HMGET', done, 'ZADD',
    done, 'PEXPIRE', latch, 'PEXPIRE',
  }
  for _, x in ipairs(more) do uses[#uses + 1] = x end
  local no = preflight(uses, true)
  if no then return nil, refused(no) end
  local t = redis.pcall('TIME')
  if bad(t) then return nil, failed('TIME', t) end
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local r = redis.pcall('ZREMRANGEBYSCORE', done, '-inf', now - tonumber(keep))
  if bad(r) then return nil, failed('ZREMRANGEBYSCORE', r) end
  local seen = redis.pcall('ZSCORE', done, id)
  if bad(seen) then return nil, failed('ZSCORE', seen) end
  local count, gen, since = latch_state(latch)
  if not count then return nil, gen end
  return now, seen, count, gen, since
end

-- A set's or a count-down's write: write() (returns nil, or an error reply), with the latch
-- key's TTL set to ttl ms and the op id remembered for keep ms. Redis 6.2 has no preflight:
-- the commands that follow the write are tried first, where they change nothing (id is no
-- member yet; a PEXPIRE of an absent key does nothing; else it refreshes a TTL the call
-- refreshes anyway), so a refusal comes before any write. Returns nil, or an error reply.
local function latch_write(latch, done, id, now, ttl, keep, write)
  local r = redis.pcall('ZADD', done, 'XX', now, id)
  if bad(r) then return failed('ZADD', r) end
  r = redis.pcall('PEXPIRE', done, keep)
  if bad(r) then return failed('PEXPIRE', r) end
  r = redis.pcall('PEXPIRE', latch, ttl)
  if bad(r) then return failed('PEXPIRE', r) end
  local e = write()
  if e then return e end
  redis.pcall('PEXPIRE', latch, ttl)  -- allowed: tried above
  redis.pcall('ZADD', done, now, id)
  redis.pcall('PEXPIRE', done, keep)
  return nil
end
