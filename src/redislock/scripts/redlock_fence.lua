-- redlock_fence: raise a master's fencing counter to the fencing token a Redlock hold was given,
-- so that a majority of masters has a counter >= that token before the acquire returns.
-- KEYS[1] fence key     integer counter, never expires; only ever raised, never lowered
-- ARGV[1] fence         the fencing token of the new hold (integer >= 1)
-- returns counter       the counter after the call (>= ARGV[1])
-- Quorum fencing (see redislock/_core/quorum.py): the hold's token is the largest counter
-- value among the masters that granted it; any later grant takes a majority, which meets
-- this majority in one master whose counter is already >= the token, and INCRs past it.
local want = tonumber(ARGV[1])
local have = tonumber(redis.call('GET', KEYS[1]) or '0')
if have < want then
  redis.call('SET', KEYS[1], ARGV[1])
  return want
end
return have
