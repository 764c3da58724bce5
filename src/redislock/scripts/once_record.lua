-- once_record: write the record of a job's run for one period, only while the writer still holds the lock.
-- KEYS[1] lock key     P{N}: the Lock of the name, "<token>|<fence>|<meta>"
--                      (see fair_acquire.lua)
-- KEYS[2] record key   P{N}:once:<period key>: string "<fence>|<host>|<pid>|<unix_ms>"
-- ARGV[1] token        the lock holder's owner token
-- ARGV[2] record       the record to write, "<fence>|<host>|<pid>|<unix_ms>"
-- ARGV[3] ttl_ms       how long the record lives, milliseconds (until the period's end)
-- returns {"ok", record}      written
--         {"done", record}    a record of the period was already there: it is kept
--         {"gone"}            no lock key (the lease ran out or was deleted): nothing written
--         {"taken"}           the lock is another owner's: nothing written
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command (nothing written)

-- include: _acl.lua

local v = redis.pcall('GET', KEYS[1])
if bad(v) then return failed('GET', v) end
if not v then return {'gone'} end
if string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '|' then return {'taken'} end
local old = redis.pcall('GET', KEYS[2])
if bad(old) then return failed('GET', old) end
if old then return {'done', old} end
local r = redis.pcall('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
if bad(r) then return failed('SET', r) end
return {'ok', ARGV[2]}
