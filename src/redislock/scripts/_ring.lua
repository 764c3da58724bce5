-- _ring: shared by the scripts of Lock, FairLock and the redis-py drop-ins, written into each
-- one where it says "-- include: _ring.lua", after "-- include: _acl.lua" (uses its bad());
-- not a script of its own.
-- A slot's release ring "<prefix>{<slot tag>}:slotrel" (redislock/_core/keys.py) remembers
-- which of the last RING fencing tokens of the slot's counter were released by their holder:
-- the bit (fence mod RING) of a string, cleared when such a kind issues the token, set by
-- the holder's release just before the DEL. A release sent again after its reply was lost
-- (redis-py's client retries it) finds its lock key gone or another holder's, and answers
-- "ok" if its token's bit is set: the first send worked, however many holders came and went
-- in between, with no key of the name left behind (a bit per token, at most RING / 8 bytes
-- per slot). A token more than RING tokens behind the counter cannot be told any more: its
-- bit may be a newer token's (it is neither set nor read then).
-- Only the holder's own release sets a bit (release --force does not), and only a kind that
-- clears the bit when it issues the token reads it: the other kinds' tokens of the slot
-- move the counter (and so the window) but never use their bits.
-- Keys and the commands run on them (for preflight in _acl.lua): the ring GETBIT, SETBIT;
-- the counter GET.

local RING = 8192  -- tokens per slot whose release is remembered (1 KiB per slot)

-- Fence f was just issued: clear its bit (it may hold the release of f - RING). Returns an
-- error reply and its command, or nil.
local function ring_issue(ring, f)
  local bit = f % RING
  local r = redis.pcall('GETBIT', ring, bit)
  if bad(r) then return r, 'GETBIT' end
  if r == 1 then
    r = redis.pcall('SETBIT', ring, bit, 0)
    if bad(r) then return r, 'SETBIT' end
  end
  return nil
end

-- Whether fence f is one of the last RING tokens of counter (its bit is its own). Returns
-- (true or false), or (nil, error reply, command).
local function ring_window(counter, f)
  local c = redis.pcall('GET', counter)
  if bad(c) then return nil, c, 'GET' end
  c = tonumber(c or '0')
  return f >= 1 and f <= c and c - f < RING
end

-- The holder of fence f releases: set its bit (nothing outside the window: that bit may be
-- a newer token's). Returns an error reply and its command, or (nil, nil, whether it set
-- the bit).
local function ring_mark(ring, counter, f)
  local inside, e, cmd = ring_window(counter, f)
  if e then return e, cmd end
  if not inside then return nil, nil, false end
  local r = redis.pcall('SETBIT', ring, f % RING, 1)
  if bad(r) then return r, 'SETBIT' end
  return nil, nil, true
end

-- Undo a ring_mark that set the bit (the DEL after it failed); through pcall, errors
-- ignored.
local function ring_unmark(ring, f)
  redis.pcall('SETBIT', ring, f % RING, 0)
end

-- Whether the holder of fence f released it (a release sent again finds its bit set).
-- Returns (true or false), or (nil, error reply, command).
local function ring_released(ring, counter, f)
  local inside, e, cmd = ring_window(counter, f)
  if e then return nil, e, cmd end
  if not inside then return false end
  local r = redis.pcall('GETBIT', ring, f % RING)
  if bad(r) then return nil, r, 'GETBIT' end
  return r == 1
end
