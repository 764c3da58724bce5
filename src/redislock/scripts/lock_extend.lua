-- lock_extend: lengthen the lease of a lock this owner token still holds. Never re-creates a key.
-- KEYS[1] lock key
-- KEYS[2] done key      optional, with ARGV[4]: string "<token>|<op_id>", the last "add" extend
--                       of this name (the same key as lock_release.lua's), PX ARGV[5]
-- KEYS[3] delay key     optional, with ARGV[7] (and KEYS[2]): the hold's lock-delay key
--                       (fair_acquire.lua's KEYS[7]); an extend that worked sets it to
--                       "<delay_ms>" with PXAT = the lock key's new deadline + delay_ms
--                       (one TIME for both), so it outlives the lease by exactly the delay
-- ARGV[1] token         owner token
-- ARGV[2] ms            milliseconds (integer >= 1)
-- ARGV[3] mode          "add": new TTL = remaining TTL + ms;  "set": new TTL = ms;
--                       "max": new TTL = max(remaining TTL, ms) (watchdog: never shortens)
-- ARGV[4] op_id         optional, "add" only: random per call (hex); a call that finds its own
--                       op_id in the done key was already applied: it answers the current TTL
--                       and adds nothing (a client retrying after the reply was lost)
-- ARGV[5] done_ms       with ARGV[4]: how long the done key remembers the call, milliseconds
-- ARGV[6] ownership     optional: "exact" for a lock in redis-py's format (compat_acquire.lua,
--                       value = token); otherwise the value starts with "<token>|"
-- ARGV[7] delay_ms      optional, with KEYS[3]: the hold's lock-delay, milliseconds (>= 1)
-- returns {"ok", pttl_ms}  extended; pttl_ms is the new TTL (for a repeated call: the TTL now)
--         {"gone", 0}      no lock key (expired or deleted)
--         {"taken", 0}     another owner holds the key
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command (the TTL may
--                          be longer than before, never shorter than the caller believes)
-- "set" and "max" are idempotent by themselves: repeated, they end at the same TTL or later.

-- include: _acl.lua

local v = redis.pcall('GET', KEYS[1])
if bad(v) then return failed('GET', v) end
if not v then
  return {'gone', 0}
end
if ARGV[6] == 'exact' then
  if v ~= ARGV[1] then return {'taken', 0} end
elseif string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '|' then
  return {'taken', 0}
end
local op = ARGV[3] == 'add' and KEYS[2] and ARGV[4] and ARGV[4] ~= '' and ARGV[1] .. '|' .. ARGV[4]
local r
if op then
  r = redis.pcall('GET', KEYS[2])
  if bad(r) then return failed('GET', r) end
  if r == op then
    r = redis.pcall('PTTL', KEYS[1])
    if bad(r) then return failed('PTTL', r) end
    -- The same TTL again: no time added, but a write on this connection, so a WAIT after
    -- it (replicas=k) waits for the first call's write instead of counting nothing.
    if r > 0 then
      local w = redis.pcall('PEXPIRE', KEYS[1], r)
      if bad(w) then return failed('PEXPIRE', w) end
    end
    return {'ok', r}
  end
end
local ms = tonumber(ARGV[2])
if ARGV[3] ~= 'set' then
  local pttl = redis.pcall('PTTL', KEYS[1])
  if bad(pttl) then return failed('PTTL', pttl) end
  if ARGV[3] == 'add' and pttl > 0 then
    ms = ms + pttl
  elseif pttl > ms then
    ms = pttl
  end
end
if KEYS[3] and ARGV[7] and ARGV[7] ~= '' and ARGV[7] ~= '0' then
  -- One deadline for both keys, from one reading of the server's clock (TIME): two relative
  -- TTLs (PX) are counted from the millisecond each command runs in, so the delay key could
  -- end a millisecond off "lease end + delay". The delay key first: for a longer lease, a
  -- prefix leaves it outliving the lease by more. The lock key's deadline is set with SET XX
  -- PXAT (its value unchanged), the command every kind that extends already may run.
  local t = redis.pcall('TIME')
  if bad(t) then return failed('TIME', t) end
  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ms
  r = redis.pcall(
    'SET', KEYS[3], ARGV[7], 'PXAT', string.format('%.0f', at + tonumber(ARGV[7])))
  if bad(r) then return failed('SET', r) end
  r = redis.pcall('SET', KEYS[1], v, 'XX', 'PXAT', string.format('%.0f', at))
  if bad(r) then return failed('SET', r) end
else
  r = redis.pcall('PEXPIRE', KEYS[1], ms)
  if bad(r) then return failed('PEXPIRE', r) end
end
if op then
  r = redis.pcall('SET', KEYS[2], op, 'PX', ARGV[5])
  if bad(r) then return failed('SET', r) end
end
return {'ok', ms}
