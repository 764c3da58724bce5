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
  -- Redis: "... The user executing the script can't run this command ..."; Valkey: "ERR ACL
  -- failure in script: User u has no permissions to run the 'set' command"
  if string.find(e, 'user executing the script', 1, true) or string.sub(e, 1, 6) == 'NOPERM'
    or string.find(e, 'ACL failure in script', 1, true) then
    return refused(cmd)
  end
  return r
end
-- Before a script that cannot undo its writes runs a command: with Redis >= 7
-- (redis.acl_check_cmd), TIME when with_time is true, and each pair key, COMMAND of the flat
-- list uses {key1, COMMAND1, key2, COMMAND2, ...} (one table: this runs on every call that
-- queues or hands off); returns the first refused command, or nil (also on Redis 6.2, which
-- cannot check: there a refusal comes when the command runs).
local function preflight(uses, with_time)
  local check = redis.acl_check_cmd
  if not check then return nil end
  if with_time and not check('TIME') then return 'TIME' end
  for i = 1, #uses, 2 do
    local key, cmd = uses[i], uses[i + 1]
    -- PUBLISH's "key" is a channel (checked against the user's &channel patterns)
    local ok
    if cmd == 'PUBLISH' then ok = check(cmd, key, '*') else ok = check(cmd, key) end
    if not ok then return cmd end
  end
  return nil
end
