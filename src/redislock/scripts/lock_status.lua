-- lock_status: what this owner token holds, for owned(), remaining() and adopting a lock by token.
-- KEYS[1] lock key
-- KEYS[2] fence key     while the lock is held, its value is the holder's fencing token
-- ARGV[1] token         owner token
-- returns {"ok", pttl_ms, fence}   this token holds the lock; fence is its fencing token
--         {"gone", 0, 0}           no lock key
--         {"taken", 0, 0}          another owner holds the key
local v = redis.call('GET', KEYS[1])
if not v then
  return {'gone', 0, 0}
end
if string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '|' then
  return {'taken', 0, 0}
end
return {'ok', redis.call('PTTL', KEYS[1]), tonumber(redis.call('GET', KEYS[2]) or '0')}
