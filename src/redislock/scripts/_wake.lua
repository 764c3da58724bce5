-- _wake: shared by the releases and force-releases of Lock, FairLock and Redlock, written
-- into each one where it says "-- include: _wake.lua", after "-- include: _acl.lua" (uses
-- its bad() and failed()); not a script of its own.
-- A waiter that waits on a name's plain wake-up channel (MultiLock's, Redlock's) leaves a
-- marker on the name first (lock_acquire.lua, multi_acquire.lua); a release publishes one
-- "*" to the channel when the marker is there, so an uncontended release publishes nothing.
-- Keys and the commands run on them (for preflight in _acl.lua): the marker EXISTS, the
-- channel PUBLISH.

-- One wake-up on channel wake if marker waiters exists. Through pcall, so a release can
-- call it before it writes anything: returns an error reply, or nil.
local function wake_marked(waiters, wake)
  local r = redis.pcall('EXISTS', waiters)
  if bad(r) then return failed('EXISTS', r) end
  if r == 1 then
    r = redis.pcall('PUBLISH', wake, '*')
    if bad(r) then return failed('PUBLISH', r) end
  end
  return nil
end
