//! Naming the command an ACL forbids: [`Lua`], a script that knows the
//! commands it calls, and the check run when a node refuses a script.
//!
//! Redis 7 refuses a script that calls a forbidden command, or touches a
//! forbidden key, with `ERR The user executing the script can't run this
//! command or subcommand` and no name. On that error (and only then: it
//! costs nothing on the way to a granted lock) the node is asked, with
//! `redis.acl_check_cmd`, which of the script's commands the user may not
//! run on the script's keys, so that the report says what to allow.

use std::ops::Deref;
use std::sync::LazyLock;

use redis::Script;

/// A script and the commands it calls (with `redis.call` or
/// `redis.pcall`: a `pcall` the ACL refuses does not abort the script, but
/// makes it misread the key, so the user needs those commands too).
pub(crate) struct Lua {
    script: Script,
    calls: Vec<String>,
}

impl Deref for Lua {
    type Target = Script;

    fn deref(&self) -> &Script {
        &self.script
    }
}

impl Lua {
    /// The commands the script calls, in the order of first use.
    pub(crate) fn calls(&self) -> &[String] {
        &self.calls
    }
}

/// A script from its Lua source.
pub(crate) fn lua(source: &str) -> Lua {
    Lua {
        script: Script::new(source),
        calls: called_commands(source),
    }
}

/// The distinct names in `redis.call('name'` and `redis.pcall('name'`,
/// in order of first use.
fn called_commands(source: &str) -> Vec<String> {
    let mut calls: Vec<String> = Vec::new();
    for rest in source.split("call('").skip(1) {
        if let Some(name) = rest.split('\'').next()
            && !calls.iter().any(|c| c == name)
        {
            calls.push(name.to_owned());
        }
    }
    calls
}

/// Returns `"command key"` for the first of ARGV's commands that the user
/// may not run on one of KEYS (`time` and `info` take no key), or false. Each
/// command is checked with arguments of the shape our scripts use.
pub(crate) static DIAGNOSE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local shapes = { set = {'v'}, pexpire = {'1'}, hget = {'f'}, hexists = {'f'}, hdel = {'f'},
  hset = {'f', 'v'}, hsetnx = {'f', 'v'}, hincrby = {'f', '1'}, hmget = {'f'} }
for i = 1, #ARGV do
  local cmd = ARGV[i]
  if cmd == 'time' or cmd == 'info' then
    local args = cmd == 'info' and {'server'} or {}
    if not redis.acl_check_cmd(cmd, unpack(args)) then return cmd end
  else
    for k = 1, #KEYS do
      local ok, allowed = pcall(redis.acl_check_cmd, cmd, KEYS[k], unpack(shapes[cmd] or {}))
      if ok and not allowed then return cmd .. ' ' .. KEYS[k] end
    end
  end
end
return false
",
    )
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn called_commands_are_listed_once_in_order_of_first_use() {
        let source = "redis.call('get', k) redis.pcall('publish', c) redis.call('pexpire', k) \
                      redis.pcall('get', k)";
        assert_eq!(called_commands(source), ["get", "publish", "pexpire"]);
    }
}
