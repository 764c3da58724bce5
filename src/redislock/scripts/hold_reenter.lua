-- hold_reenter: one more count of a hold its owner already has (any mode), its lease refreshed.
-- (The hash, its expiry index and what a call costs: _hold.lua.) Two keys, which exist
-- together: during a Cluster slot migration the call follows ASK (_core/hold.py).
-- KEYS[1] hash          the holds, one field per owner token (_hold.lua: hash)
-- KEYS[2] expiry index  sorted set, owner token -> BAND[mode] + lease end (_hold.lua: index)
-- ARGV[1] token         owner token (>= 32 hex chars)
-- ARGV[2] lease_ms      the hold's lease from now, milliseconds (>= 1); a longer one is kept
-- ARGV[3] op_id         "" or a random id per call: a call whose op id equals the hold's last
--                       one is a client's retry after a lost reply, and counts nothing again
-- returns {"ok", fence, count, lease_ms}  count: the hold count after this call
--         {"gone", 0}                    the hold no longer exists
--         error "redislock - <key> holds a field not written by redislock"

-- include: _acl.lua
-- include: _hold.lua

local hash, index = KEYS[1], KEYS[2]
local now, err = begin(hash, index)
if not now then return err end

local token, op_id = ARGV[1], ARGV[3] or ''
local mine = get(hash, index, token, now)
if not mine then return {'gone', 0} end
if not repeated(mine, op_id) then
  mine.count = mine.count + 1
  if op_id ~= '' then mine.op = op_id end
  if now + tonumber(ARGV[2]) > mine.exp then mine.exp = now + tonumber(ARGV[2]) end
  store(hash, index, token, mine)
  settle(hash, index, now)
end
return {'ok', tonumber(mine.fence), mine.count, mine.exp - now}
