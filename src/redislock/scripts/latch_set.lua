-- latch_set: start a CountDownLatch's new generation counting down from count, unless it is counting.
-- KEYS[1] latch key     "<prefix>{<name>}:latch": hash {count, gen, since} (_latch.lua)
-- KEYS[2] done key      "<latch key>:done": the op ids of the last done_ms (_latch.lua)
-- KEYS[3] fence key     the slot's fencing counter (_fence.lua): a generation is the next
--                       fencing token of the name's hash slot
-- ARGV[1] op_id         hex digits, new per call
-- ARGV[2] count         the count to start from, an integer >= 1
-- ARGV[3] ttl_ms        the TTL the latch key gets, milliseconds
-- ARGV[4] done_ms       how long an op id is remembered, milliseconds
-- returns {"ok", count, gen}      a new generation counts down from count
--         {"busy", count, gen}    the latch is counting (count > 0): nothing written
--         {"ok", count, gen}      of the latch now, when op_id ran already: nothing written
--                                 (the first call's reply was lost)
--         error "ERR redislock latch: bad arguments for set"   nothing read or written
--         error "redislock - <key> ..."   the latch key holds a hash these scripts did not
--                                 write; nothing written
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command; nothing
--                                 written (Redis 7: checked first; 6.2: the command that
--                                 would come after a write is tried first)

-- include: _acl.lua
-- include: _fence.lua
-- include: _latch.lua

local latch, done, fence = KEYS[1], KEYS[2], KEYS[3]
local id, n, ttl, keep = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ok = string.match(n or '', '^[1-9]%d*$') ~= nil
local now, seen, count, gen, since = latch_begin(latch, done, 'set', ok, id, ttl, keep,
  {fence, 'INCR', latch, 'HSET'})
if not now then return seen end
if seen then return {'ok', count, gen} end
if count > 0 then return {'busy', count, gen} end

local e = latch_write(latch, done, id, now, ttl, keep, function()
  local g, cmd = next_fence(fence)
  if cmd then return failed(cmd, g) end
  if gen == 0 then since = g end  -- no latch before: nothing is known of earlier generations
  local r = redis.pcall('HSET', latch, 'count', n, 'gen', g, 'since', since)
  if bad(r) then return failed('HSET', r) end
  gen = g
  return nil
end)
if e then return e end
return {'ok', tonumber(n), gen}
