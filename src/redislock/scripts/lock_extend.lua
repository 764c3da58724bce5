-- lock_extend: lengthen the lease of a lock this owner token still holds. Never re-creates a key.
-- KEYS[1] lock key
-- ARGV[1] token         owner token
-- ARGV[2] ms            milliseconds (integer >= 1)
-- ARGV[3] mode          "add": new TTL = remaining TTL + ms;  "set": new TTL = ms;
--                       "max": new TTL = max(remaining TTL, ms) (watchdog: never shortens)
-- returns {"ok", pttl_ms}  extended; pttl_ms is the new TTL
--         {"gone", 0}      no lock key (expired or deleted)
--         {"taken", 0}     another owner holds the key
local v = redis.call('GET', KEYS[1])
if not v then
  return {'gone', 0}
end
if string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '|' then
  return {'taken', 0}
end
local ms = tonumber(ARGV[2])
if ARGV[3] ~= 'set' then
  local pttl = redis.call('PTTL', KEYS[1])
  if ARGV[3] == 'add' and pttl > 0 then
    ms = ms + pttl
  elseif pttl > ms then
    ms = pttl
  end
end
redis.call('PEXPIRE', KEYS[1], ms)
return {'ok', ms}
