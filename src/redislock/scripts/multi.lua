-- multi: take, release, extend or check a chunk of several plain locks at once, all or nothing (MultiLock).
-- Every name is an ordinary Lock: the same keys, the same value "<token>|<meta>" with a PX
-- TTL and the same fencing counter, so lock_acquire.lua, lock_release.lua, lock_status.lua
-- and `redislock inspect` see each name exactly as if a Lock held it.
-- KEYS[1] lock key of the first name   string "<token>|<meta>", always with a PX TTL
-- KEYS[2] acquire: its fence key (INCR per acquisition, never expires); release: its waiters key
-- KEYS[3] acquire: its waiters key (marker, see lock_acquire.lua); release: its wake key (list)
--         The keys of name i follow those of name i-1; keys per name by op:
--           acquire: lock, fence, waiters (3);  release: lock, waiters, wake (3);
--           extend, status: lock (1).  So name i's lock key is KEYS[3i-2] or KEYS[i].
-- ARGV[1] op            "acquire", "release", "extend" or "status"
-- ARGV[2] n             number of names in KEYS
-- ARGV[3] token         owner token (>= 32 hex chars, no '|'), one for all the names
-- ARGV[4] ttl_ms        acquire: lease length; extend: the amount (see ARGV[8]); milliseconds (integer >= 1)
-- ARGV[5] meta          acquire: holder metadata "<host>|<pid>|<acquired_unix_ms>"
-- ARGV[6] wait_ms       acquire: 0 for a single try; else how long a busy name's waiters marker lasts, milliseconds
-- ARGV[7] wake_ttl_ms   release: how long an unconsumed wake-up stays, milliseconds
-- ARGV[8] mode          extend: "add" (remaining + ARGV[4]), "set" (ARGV[4]) or "max" (at least ARGV[4])
-- returns acquire: {"ok", fence_1, ..., fence_n}  all n taken; fence_i is name i's new fencing token
--                  {"busy", pttl_ms, i}  name i is another owner's (pttl_ms its remaining TTL, -1: no
--                                        TTL); nothing was written but name i's waiters marker
--         release: {"ok", n, 0}          all released, one wake-up pushed per name with waiters
--                  {status, released, i} name i was the first not ours ("gone" or "taken"); the
--                                        ones still ours were released, others' keys untouched
--         extend:  {"ok", pttl_ms, 0}    all extended; pttl_ms is the least new TTL
--         status:  {"ok", pttl_ms, 0}    all ours; pttl_ms is the least remaining TTL
--         extend, status: {"gone" or "taken", 0, i}  name i is not ours; nothing was changed
-- A name already held by this token counts as taken (its fence is read, not increased), so a
-- retry of a chunk whose reply was lost succeeds instead of waiting on itself.
local op, n = ARGV[1], tonumber(ARGV[2])
local mine = ARGV[3] .. '|'
local len = #mine
local stride = (op == 'acquire' or op == 'release') and 3 or 1

-- Name i's lock key is KEYS[stride * (i - 1) + 1]; one MGET reads them all. n stays far
-- below Lua's unpack limit (about 8000): the client sends at most 1000 names per call.
local locks = {}
for i = 1, n do
  locks[i] = KEYS[stride * (i - 1) + 1]
end
local values = redis.call('MGET', unpack(locks))

if op == 'acquire' then
  -- Every name is checked before any is written, so a busy chunk leaves nothing behind.
  local present = 0
  for i = 1, n do
    local v = values[i]
    if v then
      present = present + 1
      if string.sub(v, 1, len) ~= mine then
        if ARGV[6] ~= '0' then
          redis.call('SET', KEYS[3 * i], '1', 'PX', ARGV[6])
        end
        return {'busy', redis.call('PTTL', locks[i]), i}
      end
    end
  end
  if redis.call('EXISTS', unpack(locks)) ~= present then
    -- MGET reads a key of another type (an RLock's hash) as nil: fail with WRONGTYPE.
    for i = 1, n do
      if not values[i] then
        redis.call('GET', locks[i])
      end
    end
  end
  local value = mine .. ARGV[5]
  local reply = {'ok'}
  for i = 1, n do
    if values[i] then
      reply[i + 1] = tonumber(redis.call('GET', KEYS[3 * i - 1]))
    else
      redis.call('SET', locks[i], value, 'PX', ARGV[4])
      reply[i + 1] = redis.call('INCR', KEYS[3 * i - 1])
    end
  end
  return reply
end

if op == 'release' then
  local ours, gone, markers = {}, {}, {}
  local status, first = 'ok', 0
  for i = 1, n do
    local v = values[i]
    if v and string.sub(v, 1, len) == mine then
      ours[#ours + 1] = i
      gone[#gone + 1] = locks[i]
      markers[#markers + 1] = KEYS[3 * i - 1]
    elseif first == 0 then
      first = i
      status = v and 'taken' or 'gone'
    end
  end
  if #ours > 0 then
    redis.call('DEL', unpack(gone))
    local waiting = redis.call('MGET', unpack(markers))
    for j = 1, #ours do
      if waiting[j] then
        local wake = KEYS[3 * ours[j]]
        redis.call('DEL', wake)
        redis.call('RPUSH', wake, '1')
        redis.call('PEXPIRE', wake, ARGV[7])
      end
    end
  end
  return {status, #ours, first}
end

if op == 'extend' or op == 'status' then
  for i = 1, n do
    local v = values[i]
    if not v then
      return {'gone', 0, i}
    end
    if string.sub(v, 1, len) ~= mine then
      return {'taken', 0, i}
    end
  end
  local least = -1
  for i = 1, n do
    local ms
    if op == 'extend' and ARGV[8] == 'set' then
      ms = tonumber(ARGV[4])
    else
      ms = redis.call('PTTL', locks[i])
      if op == 'extend' then
        local pttl = ms
        ms = tonumber(ARGV[4])
        if ARGV[8] == 'add' and pttl > 0 then
          ms = ms + pttl
        elseif ARGV[8] == 'max' and pttl > ms then
          ms = pttl
        end
      end
    end
    if op == 'extend' then
      redis.call('PEXPIRE', locks[i], ms)
    end
    if least < 0 or ms < least then
      least = ms
    end
  end
  return {'ok', least, 0}
end

return redis.error_reply('unknown multi op ' .. tostring(op))
