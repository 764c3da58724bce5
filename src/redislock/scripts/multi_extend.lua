-- multi_extend: lengthen the leases of a chunk of several plain locks this token holds, all or none (MultiLock).
-- Every name is an ordinary Lock (_multi.lua); nothing is changed unless every name is
-- still this token's, and no key is ever re-created.
-- KEYS[1] lock key      of name 1: string "<token>|<fence>|<meta>" (multi_acquire.lua)
--         and so on, one key a name: name i's lock key is KEYS[i], for i = 1 .. n (ARGV[2])
--         KEYS[n + 1] done key of name 1: optional, with ARGV[5]: string "<token>|<op_id>",
--         the last "add" of the chunk (the same key as lock_release.lua's), PX ARGV[6]
-- ARGV[1] token         owner token, one for all the names
-- ARGV[2] n             number of names (lock keys) in KEYS
-- ARGV[3] ms            milliseconds (integer >= 1)
-- ARGV[4] mode          "add": new TTL = remaining TTL + ms;  "set": new TTL = ms;
--                       "max": new TTL = max(remaining TTL, ms) (watchdog: never shortens)
-- ARGV[5] op_id         optional, "add" only, with KEYS[n + 1]: random per call; a call that
--                       finds its op_id in the done key was applied already: it answers the
--                       least TTL now and adds nothing (as lock_extend.lua)
-- ARGV[6] done_ms       with ARGV[5]: how long the done key remembers the call, milliseconds
-- returns {"ok", pttl_ms, 0}    all extended; pttl_ms is the least new TTL (a repeated "add":
--                               the least TTL now, nothing added)
--         {"gone" or "taken", 0, i}  name i is not ours; nothing was changed
--         error "NOPERM redislock: <COMMAND> ..."  the ACL refused a command (a TTL may be
--                               longer than before, never shorter than the caller believes)

-- include: _acl.lua
-- include: _multi.lua

local mine = ARGV[1] .. '|'
local n = tonumber(ARGV[2])
local mode = ARGV[4]

local locks, values = chunk_values(KEYS, 1, n)  -- name i's lock key is KEYS[i]
if not locks then return values end
local lost = first_not_ours(values, n, mine)
if lost then return lost end

local done = KEYS[n + 1]
local memo = mode == 'add' and done and ARGV[5] and ARGV[5] ~= '' and mine .. ARGV[5]
local again = false
local r
if memo then
  r = redis.pcall('GET', done)
  if bad(r) then return failed('GET', r) end
  again = r == memo
end
local least = -1
for i = 1, n do
  local ms
  if mode == 'set' then
    ms = tonumber(ARGV[3])
  else
    ms = redis.pcall('PTTL', locks[i])
    if bad(ms) then return failed('PTTL', ms) end
    if not again then
      local pttl = ms
      ms = tonumber(ARGV[3])
      if mode == 'add' and pttl > 0 then
        ms = ms + pttl
      elseif mode == 'max' and pttl > ms then
        ms = pttl
      end
    end
  end
  if not again then
    r = redis.pcall('PEXPIRE', locks[i], ms)
    if bad(r) then return failed('PEXPIRE', r) end
  end
  if least < 0 or ms < least then
    least = ms
  end
end
if memo and not again then
  r = redis.pcall('SET', done, memo, 'PX', ARGV[6])
  if bad(r) then return failed('SET', r) end
end
return {'ok', least, 0}
