-- redlock_fence: raise a master's fencing counters to the fencing tokens a Redlock hold was given,
-- so that a majority of masters has counters >= those tokens before the acquire returns.
-- KEYS[1] fence key     the name's slot counter (_fence.lua), never expires; only ever raised,
--                       never lowered. KEYS[i] for i > 1: more fence keys (MultiRedlock: one per
--                       name; names of one slot share one, raised to the greatest of their tokens)
--                       each with ARGV[i]
-- ARGV[1] fence         the fencing token for KEYS[1] (integer >= 1); ARGV[i] for KEYS[i]
-- returns n             the number of counters now >= their token (always #KEYS)
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command (counters
--                       raised before it stay raised: raising one is always safe)
-- Quorum fencing (see redislock/_core/quorum.py): the hold's token is the largest counter
-- value among the masters that granted it; any later grant takes a majority, which meets
-- this majority in one master whose counter is already >= the token, and INCRs past it.

-- include: _acl.lua

local done = 0
for i = 1, #KEYS do
  local want = tonumber(ARGV[i])
  local have = redis.pcall('GET', KEYS[i])
  if bad(have) then return failed('GET', have) end
  if tonumber(have or '0') < want then
    local r = redis.pcall('SET', KEYS[i], ARGV[i])
    if bad(r) then return failed('SET', r) end
  end
  done = done + 1
end
return done
