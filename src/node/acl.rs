//! Naming the command an ACL forbids: what is done when a node refuses a
//! script ([`Lua`] knows the commands it calls).
//!
//! Servers word the refusal of a command inside a script differently:
//!
//! - Valkey (and Redis 7.2+) name it: `ACL failure in script: User locker
//!   has no permissions to run the 'pexpire' command ... on @user_script:8.`
//!   ([`FailureKind::NoPermission`] carries the name at once);
//! - Redis 7.0 and 6.2 name only the script's line: `The user executing the
//!   script can't run this command or subcommand script: ..., on
//!   @user_script:8.` (7.0), `@user_script:8: ... can't run this command or
//!   subcommand` (6.2). [`named`] reads the command called on that line of
//!   the script's source: no round trip;
//! - where the line calls several commands, Redis 7 is asked with
//!   `redis.acl_check_cmd` ([`DIAGNOSE`]) which of the script's commands the
//!   user may not run on its keys; Redis 6.2 has no such function, and
//!   [`unnamed`] then says honestly that it is one of the script's commands.
//!
//! All of it runs only on that error: nothing is added on the way to a
//! granted lock.

use std::sync::LazyLock;

use redis::Script;

use super::script::Lua;
use crate::error::failure::{FailureKind, NodeFailure};

/// The line of a script that an error names (`@user_script:8`), if any.
fn error_line(message: &str) -> Option<usize> {
    let rest = message.split("@user_script:").nth(1)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// `failure`, the refusal of `script` by the node's ACL, with the command
/// named when the error alone tells it: Valkey names it, Redis 6.2 and
/// 7.0 give the script's line, which names it when the line calls one
/// command. `None` when the node must be asked ([`DIAGNOSE`]).
pub(crate) fn named(script: &Lua, failure: &NodeFailure) -> Option<NodeFailure> {
    if let FailureKind::NoPermission { command: Some(_) } = failure.kind() {
        return Some(failure.clone());
    }
    let line = error_line(failure.message())?;
    let [command] = script.calls_on_line(line).try_into().ok()?;
    let message = format!(
        "this user may not run `{command}` (line {line} of a lock script): allow it \
         (ACL SETUSER <user> +{command})"
    );
    let kind = FailureKind::NoPermission {
        command: Some(command),
    };
    Some(NodeFailure::new(kind, message))
}

/// `failure`, the refusal of `script`, when nothing named the command
/// (Redis 6.2 has no `redis.acl_check_cmd` to ask): it says which commands
/// it may be, those of the line the error names or else all of the
/// script's, and keeps the node's words.
pub(crate) fn unnamed(script: &Lua, failure: NodeFailure) -> NodeFailure {
    if !matches!(failure.kind(), FailureKind::NoPermission { command: None }) {
        return failure;
    }
    let on_line = error_line(failure.message())
        .map(|line| script.calls_on_line(line))
        .filter(|calls| !calls.is_empty());
    let candidates = on_line.unwrap_or_else(|| script.calls().to_vec());
    let list = candidates
        .iter()
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let message = format!(
        "the ACL refused a command or key of a lock script, one of {list} (the node does \
         not say which): allow them and the key pattern (docs/deployment.md has the line \
         per feature); the node said: {}",
        failure.message()
    );
    NodeFailure::new(failure.kind().clone(), message)
}

/// The source of [`DIAGNOSE`]. Valid in Lua 5.1 and 5.4 (`unpack` is
/// `table.unpack` since 5.2).
pub(crate) const DIAGNOSE_LUA: &str = r"
local unpack = table.unpack or unpack
local shapes = { set = {'v'}, pexpire = {'1'}, pttl = {}, hget = {'f'}, hexists = {'f'}, hdel = {'f'},
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
";

/// Returns `"command key"` for the first of ARGV's commands that the user
/// may not run on one of KEYS (`time` and `info` take no key), or false. Each
/// command is checked with arguments of the shape our scripts use. Needs
/// `redis.acl_check_cmd` (Redis 7 and later, Valkey).
pub(crate) static DIAGNOSE: LazyLock<Script> = LazyLock::new(|| Script::new(DIAGNOSE_LUA));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::script::lua;

    fn refused(message: &str) -> NodeFailure {
        NodeFailure::new(FailureKind::NoPermission { command: None }, message)
    }

    #[test]
    fn redis_6_and_7_refusals_are_named_by_the_line_of_the_script() {
        use crate::node::scripts::EXTEND;
        // Line 9 of EXTEND calls pexpire (`ours` takes the first lines).
        let redis62 = "Error running script (call to f_7282): @user_script:9: @user_script: 9: \
                       The user executing the script can't run this command or subcommand";
        let redis70 = "The user executing the script can't run this command or subcommand \
                       script: 7282ccf73c46a4672b663d324d195f26c0a61fbc, on @user_script:9.";
        for message in [redis62, redis70] {
            let named = named(&EXTEND, &refused(message));
            let kind = named.as_ref().map(NodeFailure::kind);
            assert_eq!(
                kind,
                Some(&FailureKind::NoPermission {
                    command: Some("pexpire".into())
                }),
                "{message}"
            );
        }
    }

    #[test]
    fn a_line_of_several_commands_is_not_guessed_and_the_fallback_lists_them() {
        let script = lua("local t = redis.call('time')\n\
                          if redis.call('type', KEYS[1]).ok == 'hash' and redis.call('hget', KEYS[1], 'o') then end");
        let message = "@user_script:2: can't run this command or subcommand";
        assert_eq!(named(&script, &refused(message)), None);
        let said = unnamed(&script, refused(message)).to_string();
        assert!(said.contains("one of `type`, `hget`"), "{said}");
        // No line at all: every command of the script.
        let said = unnamed(&script, refused("can't run this command")).to_string();
        assert!(said.contains("one of `time`, `type`, `hget`"), "{said}");
    }
}
