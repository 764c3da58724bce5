-- _queue: shared by fair.lua and multi.lua, written into each one where it says
-- "-- include: _queue.lua" (redislock._core.scripts); not a script of its own.
-- A queued waiter of a name (Lock, FairLock: fair.lua) waits on the name's grant CHANNEL,
-- "<lock key>:grant" (FairKeys.grant, the suffix GRANT_SUFFIX), through its process's
-- shared subscription (redislock._core.wake), for a message tagged with the first 20 hex
-- digits of sha1(token) (FairKeys.tag; never the token: it is a secret, and any subscriber
-- sees the channel). A grant publishes "<tag>|<fencing token>"; a wake-up without a grant
-- publishes "<tag>|0" ("try again now": never a fencing token, they start at 1).
local function grant_tag(tok)
  return string.sub(redis.sha1hex(tok), 1, 20)
end
