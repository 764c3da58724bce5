-- hold_leave: a w/p waiter that gave up (or whose try failed) no longer counts as waiting.
-- KEYS[1] waiters       sorted set, token of each waiting w/p waiter -> server time (ms) its
--                       entry ends (_hold.lua)
-- ARGV[1] token         the waiter's owner token
-- returns 1

-- include: _acl.lua

local waiters = KEYS[1]
local no = preflight({waiters, 'ZREM'}, false)
if no then return refused(no) end
redis.call('ZREM', waiters, ARGV[1])
return 1
