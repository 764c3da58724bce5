-- _election: shared by the election_* scripts (the advertised leader of an Election), written
-- into each one where it says "-- include: _election.lua", after "-- include: _acl.lua" (uses
-- its bad() and failed()); not a script of its own. Functions only: every key is a parameter,
-- which each script passes from its own KEYS[n].
-- The lock key is a Lock's (fair_acquire.lua; value "<token>|<fence>|<meta>"); the leader key, in the
-- same hash slot ("<lock key>:leader"), is "<term>|<identity>|<value>", where term is the
-- leader's fence. Every change is PUBLISHed on the channel named like the leader key, as
-- "L|<term>|<identity>|<value>" (a new leader or a proclaim) or "L|0" (the leader resigned).
-- The leader key's TTL is 4 * the lock's PTTL when written (longer than the lease, so a
-- renewal need not refresh it; leader() checks its term against the lock, so it is never
-- reported past the lease).

-- a call's arguments (op: the script's operation, for the message): term digits, entry
-- given; returns the error reply, or nil. Checked before anything is read or written.
local function bad_arguments(op, term, entry)
  if not string.match(term or '', '^%d+$') or not entry then
    return redis.error_reply('ERR redislock election: bad arguments for ' .. op)
  end
  return nil
end

-- an advertise's or a keep's (op) start: the lock's PTTL (ms) if token holds the lock in
-- term; else nil and the reply to give: bad_arguments'; {"gone", 0} (no lock key, another
-- owner's or term's, or no TTL); or a refused command's
local function owner_pttl(op, lock, token, term, entry)
  local wrong = bad_arguments(op, term, entry)
  if wrong then return nil, wrong end
  local v = redis.pcall('GET', lock)
  if bad(v) then return nil, failed('GET', v) end
  if not v or string.sub(v, 1, #token + #term + 2) ~= token .. '|' .. term .. '|' then
    return nil, {'gone', 0}
  end
  local pttl = redis.pcall('PTTL', lock)
  if bad(pttl) then return nil, failed('PTTL', pttl) end
  if pttl <= 0 then return nil, {'gone', 0} end
  return pttl
end

-- write the leader key "<term>|<entry>" for 4 * pttl ms and publish it: {"ok", pttl}
local function advertise(leader, term, entry, pttl)
  local value = term .. '|' .. entry
  local s = redis.pcall('SET', leader, value, 'PX', 4 * pttl)
  if bad(s) then return failed('SET', s) end
  local p = redis.pcall('PUBLISH', leader, 'L|' .. value)
  if bad(p) then return failed('PUBLISH', p) end
  return {'ok', pttl}
end
