-- lock_status: what this owner token holds, for owned(), remaining() and adopting a lock by token.
-- KEYS[1] lock key
-- ARGV[1] token         owner token
-- returns {"ok", pttl_ms, fence}   this token holds the lock; fence is its fencing token
--         {"gone", 0, 0}           no lock key
--         {"taken", 0, 0}          another owner holds the key
local v = redis.call('GET', KEYS[1])
if not v then
  return {'gone', 0, 0}
end
local n = #ARGV[1]
if string.sub(v, 1, n + 1) ~= ARGV[1] .. '|' then
  return {'taken', 0, 0}
end
local rest = string.sub(v, n + 2)
local fence = tonumber(string.match(rest, '^(%d+)')) or 0
return {'ok', redis.call('PTTL', KEYS[1]), fence}
