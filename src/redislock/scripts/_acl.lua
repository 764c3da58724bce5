-- _acl: shared by the lock scripts, written into each one where it says
-- "-- include: _acl.lua" (redislock._core.scripts); not a script of its own.
-- ACL (docs/acl.md): every command runs through pcall; a refused one makes the script answer
-- "NOPERM redislock: <COMMAND> ..." (Redis's own refusal inside a script names no command)
-- after undoing what this call wrote before it; any other error reply is returned as is.
local function bad(r) return type(r) == 'table' and r.err ~= nil end
local function refused(cmd)
  return redis.error_reply('NOPERM redislock: ' .. cmd .. ' is refused to this user by an ACL')
end
local function failed(cmd, r)
  local e = r.err
  if string.find(e, 'user executing the script', 1, true) or string.sub(e, 1, 6) == 'NOPERM' then
    return refused(cmd)
  end
  return r
end
