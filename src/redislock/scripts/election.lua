-- election: the advertised leader of an Election (redislock.Election), next to its lock.
-- The lock key is a Lock's (fair_acquire.lua; value "<token>|<fence>|<meta>"); the leader
-- key, in the same hash slot, is "<term>|<identity>|<value>", where term is the leader's fence.
-- Every change is PUBLISHed on the channel named like the leader key, as
-- "L|<term>|<identity>|<value>" (a new leader or a proclaim) or "L|0" (the leader resigned).
-- KEYS[1] lock key
-- KEYS[2] leader key    "<lock key>:leader"; also the channel's name
-- ARGV[1] op            "advertise": write the leader key (after campaign, on proclaim)
--                       "keep": refresh its TTL (after each watchdog renewal); write it
--                               again as "advertise" does if it is missing
--                       "clear": delete it (on resign, before the lock is released)
--                       "read": the lock's fence and PTTL and the leader key (leader())
-- ARGV[2] token         owner token ("" for read)
-- ARGV[3] term          the owner's fencing token ("0" for read)
-- ARGV[4] entry         advertise, keep: "<identity>|<value>"
-- returns advertise, keep: {"ok", pttl_ms}   the token holds the lock; the leader key has
--                                            TTL 4 * the lock's PTTL (longer than the
--                                            lease, so a renewal need not refresh it;
--                                            leader() checks its term against the lock,
--                                            so it is never reported past the lease)
--                          {"gone", 0}       no lock key, or another owner's (nothing written)
--         clear: {"ok", 1}  deleted (and published); {"ok", 0} it was another term's
--         read: {fence, pttl_ms, leader}     fence 0 and pttl 0 when no lock key; leader is
--                                            the leader key's value or false
--         error "ERR redislock election: unknown op ..."   ARGV[1] is none of the four;
--                                            nothing read or written
--         error "ERR redislock election: bad arguments ..."  term not digits, or ARGV[4]
--                                            missing (but for read); nothing read or written
--         error "NOPERM redislock: <COMMAND> ..."   the ACL refused a command

-- include: _acl.lua

local op = ARGV[1]
if op ~= 'read' and op ~= 'advertise' and op ~= 'keep' and op ~= 'clear' then
  return redis.error_reply('ERR redislock election: unknown op ' .. tostring(op))
end
if not string.match(ARGV[3] or '', '^%d+$') or (op ~= 'read' and not ARGV[4]) then
  return redis.error_reply('ERR redislock election: bad arguments for ' .. op)
end
local v = redis.pcall('GET', KEYS[1])
if bad(v) then return failed('GET', v) end

if op == 'read' then
  local leader = redis.pcall('GET', KEYS[2])
  if bad(leader) then return failed('GET', leader) end
  if not v then return {0, 0, leader} end
  local pttl = redis.pcall('PTTL', KEYS[1])
  if bad(pttl) then return failed('PTTL', pttl) end
  local fence = tonumber(string.match(v, '^[^|]*|(%d+)|')) or 0
  return {fence, pttl, leader}
end

local term = ARGV[3]
if op == 'clear' then
  local leader = redis.pcall('GET', KEYS[2])
  if bad(leader) then return failed('GET', leader) end
  if not leader or string.sub(leader, 1, #term + 1) ~= term .. '|' then return {'ok', 0} end
  local d = redis.pcall('DEL', KEYS[2])
  if bad(d) then return failed('DEL', d) end
  local p = redis.pcall('PUBLISH', KEYS[2], 'L|0')
  if bad(p) then return failed('PUBLISH', p) end
  return {'ok', 1}
end

local token = ARGV[2]
if not v or string.sub(v, 1, #token + #term + 2) ~= token .. '|' .. term .. '|' then
  return {'gone', 0}
end
local pttl = redis.pcall('PTTL', KEYS[1])
if bad(pttl) then return failed('PTTL', pttl) end
if pttl <= 0 then return {'gone', 0} end

if op == 'keep' then
  local leader = redis.pcall('GET', KEYS[2])
  if bad(leader) then return failed('GET', leader) end
  if leader and string.sub(leader, 1, #term + 1) == term .. '|' then
    local e = redis.pcall('PEXPIRE', KEYS[2], 4 * pttl)
    if bad(e) then return failed('PEXPIRE', e) end
    return {'ok', pttl}
  end
  op = 'advertise'  -- the leader key went (deleted by hand): written again
end

if op == 'advertise' then
  local entry = term .. '|' .. ARGV[4]
  local s = redis.pcall('SET', KEYS[2], entry, 'PX', 4 * pttl)
  if bad(s) then return failed('SET', s) end
  local p = redis.pcall('PUBLISH', KEYS[2], 'L|' .. entry)
  if bad(p) then return failed('PUBLISH', p) end
  return {'ok', pttl}
end
