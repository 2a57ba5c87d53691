//! [`Lua`]: one of the library's scripts, with its source and the commands
//! it calls (what the ACL must allow, and what names a refusal), and
//! [`Registered`]: a script with its name and TTL argument, as the script
//! registry (`node::registry`) lists every one.

use std::ops::Deref;
use std::sync::LazyLock;

use redis::Script;

/// A script and the commands it calls (with `redis.call` or
/// `redis.pcall`: a `pcall` the ACL refuses does not abort the script, but
/// makes it misread the key, so the user needs those commands too).
pub(crate) struct Lua {
    script: Script,
    calls: Vec<String>,
    source: String,
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

    /// The script's Lua source, as sent to the node.
    #[cfg(any(test, feature = "sim"))]
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// The commands called on line `line` (from 1, as the server counts).
    pub(super) fn calls_on_line(&self, line: usize) -> Vec<String> {
        let text = line
            .checked_sub(1)
            .and_then(|i| self.source.lines().nth(i))
            .unwrap_or_default();
        called_commands(text)
    }
}

/// A script as the registry lists it.
#[derive(Clone, Copy)]
pub(crate) struct Registered {
    /// Its name: the static's, in lower case (read by the registry, the
    /// simulation and the portability check, not by the fault proxy).
    #[cfg_attr(not(any(test, feature = "testkit")), allow(dead_code))]
    pub(crate) name: &'static str,
    /// The script.
    pub(crate) script: &'static LazyLock<Lua>,
    /// Which `ARGV` (from 0) is a TTL in milliseconds, if it sets one.
    #[cfg_attr(not(any(test, feature = "testkit")), allow(dead_code))]
    pub(crate) ttl_argv: Option<usize>,
}

/// The [`Registered`] `script` named `name`, whose `ARGV[ttl_argv]` (from
/// 0) is a TTL in milliseconds if it sets one.
pub(crate) const fn entry(
    name: &'static str,
    script: &'static LazyLock<Lua>,
    ttl_argv: Option<usize>,
) -> Registered {
    Registered {
        name,
        script,
        ttl_argv,
    }
}

/// A script from its Lua source.
pub(crate) fn lua(source: &str) -> Lua {
    Lua {
        script: Script::new(source),
        calls: called_commands(source),
        source: source.to_owned(),
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
