-- hold_status: the remaining lease, fencing token, count and mode of one hold in the hold hash.
-- (The hash and its fields: _hold.lua.) One key: during a Cluster slot migration the call
-- follows ASK to wherever the hash is (_core/hold.py); an ended hold is left for the next
-- call that declares the expiry index to remove.
-- KEYS[1] hash          the holds, one field per owner token (_hold.lua: hash); read only
-- ARGV[1] token         owner token (>= 32 hex chars)
-- returns {"ok", lease_ms, fence, count, mode}  the live hold of ARGV[1]
--         {"gone", 0, 0, 0, ""}                 none (expired or deleted)
--         error "redislock - <key> holds a field not written by redislock"

-- include: _acl.lua
-- include: _hold.lua

local hash = KEYS[1]
local refusal = check(hash, {'HGET'})
if refusal then return refusal end
local now = server_ms()

local mine = get(hash, nil, ARGV[1], now)
if not mine then return {'gone', 0, 0, 0, ''} end
return {'ok', mine.exp - now, tonumber(mine.fence), mine.count, mine.mode}
