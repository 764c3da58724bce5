-- lock_renew: the watchdog's renewal of many locks in one call, each as lock_extend "max".
-- KEYS[1] lock key      of lock 1; KEYS[i] is lock i's (any number of locks, one node:
--                       plain Redis only, the keys may be in different hash slots)
-- ARGV[1] renewals      "<token> <ms> <token> <ms> ...": per lock, in KEYS order, its owner
--                       token and the milliseconds (integer >= 1) its new TTL is at least:
--                       the larger of its remaining TTL and ms (never shortened). One
--                       argument, not two per lock: the client packs one string.
-- returns one entry per lock, in order, as lock_extend "max" answers:
--         {"ok", pttl_ms}  extended; pttl_ms is the new TTL
--         {"gone", 0}      no lock key (expired or deleted)
--         {"taken", 0}     another owner holds the key
--         error "NOPERM redislock: <COMMAND> ..."   (an error entry, not an error reply) the
--                          ACL refused a command for this lock; the others are renewed
-- Idempotent: repeated, every TTL ends at the same value or later.

-- include: _acl.lua

local out = {}
local pairs_of = string.gmatch(ARGV[1], '(%S+) (%d+)')
for i = 1, #KEYS do
  local token, ms = pairs_of()
  ms = tonumber(ms)
  local v = token and redis.pcall('GET', KEYS[i])
  if not token then
    out[i] = redis.error_reply('ERR lock_renew: no "<token> <ms>" pair for key number ' .. i)
  elseif bad(v) then
    out[i] = failed('GET', v)
  elseif not v then
    out[i] = {'gone', 0}
  elseif string.sub(v, 1, #token + 1) ~= token .. '|' then
    out[i] = {'taken', 0}
  else
    local pttl = redis.pcall('PTTL', KEYS[i])
    if bad(pttl) then
      out[i] = failed('PTTL', pttl)
    else
      if pttl > ms then ms = pttl end
      local r = redis.pcall('PEXPIRE', KEYS[i], ms)
      if bad(r) then
        out[i] = failed('PEXPIRE', r)
      else
        out[i] = {'ok', ms}
      end
    end
  end
end
return out
