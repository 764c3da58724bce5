-- latch_down: count a CountDownLatch one down, publishing its generation when the count reaches zero.
-- KEYS[1] latch key     "<prefix>{<name>}:latch": hash {count, gen, since} (_latch.lua);
--                       also the channel "Z|<gen>" is published on at zero
-- KEYS[2] done key      "<latch key>:done": the op ids of the last done_ms (_latch.lua)
-- ARGV[1] op_id         hex digits, new per call
-- ARGV[2] ttl_ms        the TTL the latch key gets, milliseconds
-- ARGV[3] done_ms       how long an op id is remembered, milliseconds
-- returns {"ok", count, gen}      the count after this one; at 0 "Z|<gen>" was published on
--                                 KEYS[1] (the waiters' wake-up)
--         {"none", 0, gen}        not counting (count 0; gen 0: no latch): nothing written
--         {"ok", count, gen}      of the latch now, when op_id ran already: nothing written
--                                 (the first call's reply was lost)
--         error "ERR redislock latch: bad arguments for down"   nothing read or written
--         error "redislock - <key> ..."   the latch key holds a hash these scripts did not
--                                 write; nothing written
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command; nothing
--                                 written (Redis 7: checked first; 6.2: the command that
--                                 would come after a write is tried first)

-- include: _acl.lua
-- include: _latch.lua

local latch, done = KEYS[1], KEYS[2]
local id, ttl, keep = ARGV[1], ARGV[2], ARGV[3]
local now, seen, count, gen = latch_begin(latch, done, 'down', true, id, ttl, keep,
  {latch, 'HINCRBY', latch, 'PUBLISH'})
if not now then return seen end
if seen then return {'ok', count, gen} end
if count == 0 then return {'none', 0, gen} end

local e = latch_write(latch, done, id, now, ttl, keep, function()
  local c = redis.pcall('HINCRBY', latch, 'count', -1)
  if bad(c) then return failed('HINCRBY', c) end
  count = c
  return nil
end)
if e then return e end
if count == 0 then
  -- Refused only on Redis 6.2 (7 checked it first): the count is down all the same, and
  -- the waiters find it by their re-checks.
  redis.pcall('PUBLISH', latch, 'Z|' .. gen)
end
return {'ok', count, gen}
