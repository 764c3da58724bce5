-- barrier_renew: move a Barrier party's lease end later (the watchdog's renewal), never earlier.
-- KEYS[1] barrier key   "<prefix>{<name>}:barrier": the round's hash (_barrier.lua)
-- KEYS[2] members key   "<barrier key>:members": the members' lease ends (_barrier.lua)
-- ARGV[1] token         the party's owner token
-- ARGV[2] lease_ms      the party's lease from now, milliseconds
-- returns {"ok", lease_ms} the lease now ends lease_ms from now; {"gone", 0} the token is no
--                member (its lease ended): nothing written
--         error "ERR redislock barrier: bad arguments for renew"   nothing read or written
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command: nothing
--                written (Redis 7: checked first; 6.2: refused where it is reached)

-- include: _acl.lua
-- include: _barrier.lua

local bkey, members = KEYS[1], KEYS[2]
local token = ARGV[1]
if not barrier_token(token) or not string.match(ARGV[2] or '', BARRIER_POSITIVE) then
  return barrier_bad_args('renew')
end
local no = barrier_preflight(bkey, members, true, {})
if no then return refused(no) end
local now, e = barrier_time()
if not now then return e end
local score
score, e = barrier_member(members, token)
if score == nil then return e end
if not score or tonumber(score) <= now then return {'gone', 0} end
local ends = math.max(tonumber(score), now + tonumber(ARGV[2]))
local first, last = barrier_leases(members, now)
if not first then return last end
e = barrier_settle(bkey, members, now, math.max(last, ends))  -- first: a refusal leaves
if e then return e end                                        -- the lease as it was
local r = redis.pcall('ZADD', members, 'XX', ends, token)
if bad(r) then return failed('ZADD', r) end
return {'ok', ends - now}
