-- redlock_fence: raise a master's fencing counters to the fencing tokens a Redlock hold was given,
-- so that a majority of masters has counters >= those tokens before the acquire returns.
-- KEYS[1] fence key     integer counter, never expires; only ever raised, never lowered. KEYS[i]
--                       for i > 1: more fence keys (MultiRedlock: one per name), each with ARGV[i]
-- ARGV[1] fence         the fencing token for KEYS[1] (integer >= 1); ARGV[i] for KEYS[i]
-- returns n             the number of counters now >= their token (always #KEYS)
-- Quorum fencing (see redislock/_core/quorum.py): the hold's token is the largest counter
-- value among the masters that granted it; any later grant takes a majority, which meets
-- this majority in one master whose counter is already >= the token, and INCRs past it.
local done = 0
for i = 1, #KEYS do
  local want = tonumber(ARGV[i])
  local have = tonumber(redis.call('GET', KEYS[i]) or '0')
  if have < want then
    redis.call('SET', KEYS[i], ARGV[i])
  end
  done = done + 1
end
return done
