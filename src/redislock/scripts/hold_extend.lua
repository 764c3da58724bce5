-- hold_extend: set, add to or raise the remaining lease of one hold (any mode) in the hold hash.
-- (The hash, its expiry index and what a call costs: _hold.lua.) Two keys, which exist
-- together: during a Cluster slot migration the call follows ASK (_core/hold.py).
-- KEYS[1] hash          the holds, one field per owner token (_hold.lua: hash)
-- KEYS[2] expiry index  sorted set, owner token -> BAND[mode] + lease end (_hold.lua: index)
-- ARGV[1] token         owner token (>= 32 hex chars)
-- ARGV[2] ms            milliseconds (>= 1)
-- ARGV[3] extend_mode   "add" (remaining + ms), "set" (ms), "max" (at least ms)
-- ARGV[4] op_id         "" or a random id per call ("add": the one mode a retry would apply
--                       twice): a call whose op id equals the hold's last one is a client's
--                       retry after a lost reply, and changes nothing
-- returns {"ok", lease_ms}  this hold's new remaining lease
--         {"gone", 0}       no such hold (expired or deleted)
--         error "redislock - <key> holds a field not written by redislock"

-- include: _acl.lua
-- include: _hold.lua

local hash, index = KEYS[1], KEYS[2]
local now, err = begin(hash, index)
if not now then return err end

local token, ms, mode, op_id = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4] or ''
local mine = get(hash, index, token, now)
if not mine then return {'gone', 0} end
if repeated(mine, op_id) then
  return {'ok', mine.exp - now}  -- this extend was applied already
end
if op_id ~= '' then mine.op = op_id end
if mode == 'add' then
  mine.exp = mine.exp + ms
elseif mode == 'set' then
  mine.exp = now + ms
elseif now + ms > mine.exp then
  mine.exp = now + ms
end
store(hash, index, token, mine)
settle(hash, index, now)
return {'ok', mine.exp - now}
