-- _queue: shared by fair.lua and multi.lua, written into each one where it says
-- "-- include: _queue.lua" (redislock._core.scripts); not a script of its own.
-- A queued waiter of a name (Lock, FairLock: fair.lua) blocks on its own grant list, whose
-- key is the name's grant prefix (FairKeys.grant_prefix: "<lock key>:grant:") followed by
-- the first 20 hex digits of sha1(token) (FairKeys.grant). A grant pushes the fencing token
-- there; a wake-up without a grant pushes "0" (never a fencing token: they start at 1).
local function grant_list(prefix, tok)
  return prefix .. string.sub(redis.sha1hex(tok), 1, 20)
end
