-- _queue: shared by the scripts of Lock's and FairLock's queue (fair_*.lua, _fair.lua) and
-- multi_release.lua, written into each one where it says
-- "-- include: _queue.lua" (redislock._core.scripts); not a script of its own.
-- A queued waiter of a name (Lock, FairLock: fair_acquire.lua) waits for a message tagged
-- with the first 20 hex digits of sha1(token) (FairKeys.tag; never the token: it is a secret, and
-- any subscriber sees the channel), through its process's shared subscription
-- (redislock._core.wake), on its process's grant CHANNEL of the name: a waiter's token is
-- "<process tag>.<secret>" (redislock._core.lock.queue_token), and the channel is
-- "<lock key>:grant:<process tag>" (FairKeys.grant_for; "<lock key>:grant" is FairKeys.grant,
-- the suffix GRANT_SUFFIX), so a grant wakes only the process it is for. A grant publishes
-- "<tag>|<fencing token>"; a wake-up without a grant publishes "<tag>|0" ("try again now":
-- never a fencing token, they start at 1).
local function grant_tag(tok)
  return string.sub(redis.sha1hex(tok), 1, 20)
end

-- The channel a grant to waiter token tok goes to, given the base of the name's grant
-- channels; nil for a token without a process tag (not one of queue_token's: nobody listens
-- for it, so nothing is published and such a waiter finds its grant by its next try).
local function grant_channel(base, tok)
  local p = string.match(tok, '^(%x+)%.')
  if p then return base .. ':' .. p end
  return nil
end
