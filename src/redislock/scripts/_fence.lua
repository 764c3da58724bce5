-- _fence: shared by the scripts that issue or read fencing tokens, written into each one where
-- it says "-- include: _fence.lua", after "-- include: _acl.lua" (uses its bad()); not a
-- script of its own.
-- Fencing counters are per hash slot (redislock/_core/keys.py): a name's tokens come from
-- the counter "<prefix>{<slot tag>}:slotfence" of its slot, so they strictly increase per
-- name, and a released name leaves no key of its own behind. The per-name counter
-- "<prefix>{<name>}:fence" of earlier versions ("legacy") is moved into the slot counter by
-- the first token issued for the name after the upgrade: counter = max(counter, legacy),
-- then the legacy key is deleted, then INCR, all in one script. All clients of a name must
-- run this version: an older one would INCR a fresh legacy counter from 1.
-- Keys and the commands run on them (for preflight in _acl.lua): the counter GET, SET, INCR;
-- the legacy key GET, DEL.
-- A lock value is "<token>|<fence>|<host>|<pid>|<acquired_unix_ms>": the holder's token is in it.

-- The next fencing token of a name: returns fence, or (error reply, command) if a command
-- failed (the counter may have been raised; it never goes down).
local function next_fence(counter, legacy)
  local old = redis.pcall('GET', legacy)
  if bad(old) then return old, 'GET' end
  if old then
    local have = redis.pcall('GET', counter)
    if bad(have) then return have, 'GET' end
    if tonumber(old) > tonumber(have or '0') then
      local r = redis.pcall('SET', counter, old)
      if bad(r) then return r, 'SET' end
    end
    local r = redis.pcall('DEL', legacy)
    if bad(r) then return r, 'DEL' end
  end
  local fence = redis.pcall('INCR', counter)
  if bad(fence) then return fence, 'INCR' end
  return fence
end

-- The token next_fence would issue now, read without writing anything: returns fence, or
-- (error reply, command). A script that writes a fresh lock value only if the key is free
-- (SET NX) peeks first, puts the token into that one write, and only if it succeeded issues
-- the token with next_fence, which then returns the same number (one script: nothing runs
-- in between), so the value is written once and a failed try writes nothing.
local function peek_fence(counter, legacy)
  local have = redis.pcall('GET', counter)
  if bad(have) then return have, 'GET' end
  local old = redis.pcall('GET', legacy)
  if bad(old) then return old, 'GET' end
  local n, o = tonumber(have or '0'), tonumber(old or '0')
  if not n or not o then  -- not a counter: as INCR would answer
    return redis.error_reply('ERR value is not an integer or out of range'), 'GET'
  end
  if o > n then n = o end
  return n + 1
end

-- The fencing token stored in lock value v (a holder's own, as the scripts write it); 0 for
-- a value without one (not written by redislock).
local function held_fence(v)
  return tonumber(string.match(v, '^[^|]*|(%d+)|[^|]*|[^|]*|[^|]*$') or '0')
end
