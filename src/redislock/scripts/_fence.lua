-- _fence: shared by the scripts that issue or read fencing tokens, written into each one where
-- it says "-- include: _fence.lua", after "-- include: _acl.lua" (uses its bad()); not a
-- script of its own.
-- Fencing counters are per hash slot (redislock/_core/keys.py): a name's tokens come from
-- the counter "<prefix>{<slot tag>}:slotfence" of its slot, so they strictly increase per
-- name, and a released name leaves no key of its own behind.
-- Keys and the commands run on them (for preflight in _acl.lua): the counter GET, INCR.
-- A lock value is "<token>|<fence>|<host>|<pid>|<acquired_unix_ms>": the holder's token is in it.

-- The next fencing token of a name: returns fence, or (error reply, command) if INCR failed.
local function next_fence(counter)
  local fence = redis.pcall('INCR', counter)
  if bad(fence) then return fence, 'INCR' end
  return fence
end

-- The token next_fence would issue now, read without writing anything: returns fence, or
-- (error reply, command). A script that writes a fresh lock value only if the key is free
-- (SET NX) peeks first, puts the token into that one write, and only if it succeeded issues
-- the token with next_fence, which then returns the same number (one script: nothing runs
-- in between), so the value is written once and a failed try writes nothing.
local function peek_fence(counter)
  local have = redis.pcall('GET', counter)
  if bad(have) then return have, 'GET' end
  local n = tonumber(have or '0')
  if not n then  -- not a counter: as INCR would answer
    return redis.error_reply('ERR value is not an integer or out of range'), 'GET'
  end
  return n + 1
end

-- The fencing token stored in lock value v (a holder's own, as the scripts write it); 0 for
-- a value without one (not written by redislock).
local function held_fence(v)
  return tonumber(string.match(v, '^[^|]*|(%d+)|[^|]*|[^|]*|[^|]*$') or '0')
end
