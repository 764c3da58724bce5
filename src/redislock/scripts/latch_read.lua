-- latch_read: a CountDownLatch's count, generation and since, and its key's TTL, read without writing anything.
-- KEYS[1] latch key     "<prefix>{<name>}:latch": hash {count, gen, since} (_latch.lua)
-- ARGV: none
-- returns {count, gen, since, pttl_ms}   {0, 0, 0, -2} when there is no latch
--         error "redislock - <key> ..."   the latch key holds a hash these scripts did not
--                                       write
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command

-- include: _acl.lua
-- include: _latch.lua

local latch = KEYS[1]
local count, gen, since = latch_state(latch)
if not count then return gen end
local pttl = redis.pcall('PTTL', latch)
if bad(pttl) then return failed('PTTL', pttl) end
return {count, gen, since, pttl}
