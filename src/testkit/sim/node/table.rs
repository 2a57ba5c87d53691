//! The command table: every command the simulated node knows, with Redis
//! 7.0's arity and flags, and how it runs.

use std::sync::LazyLock;

use super::core::Core;
use super::reply::Reply;
use super::{hashes, server, strings};

/// The command writes: a replica refuses it.
pub(super) const WRITE: u8 = 1;
/// Scripts may not call it.
pub(super) const NOSCRIPT: u8 = 2;

/// How a command runs.
#[derive(Clone, Copy)]
pub(super) enum Run {
    /// On the node's state alone.
    Core(fn(&mut Core, &[Vec<u8>]) -> Reply),
    /// `EVAL`: needs the Lua state.
    Eval,
    /// `EVALSHA`: needs the Lua state.
    EvalSha,
    /// `SCRIPT LOAD`: compiles, so needs the Lua state.
    ScriptLoad,
    /// A container (`CONFIG`, `SCRIPT`...): only its subcommands run.
    Container,
}

/// One command or subcommand.
pub(super) struct Spec {
    /// Lower case; a subcommand's is `container|sub`, as Redis names it.
    pub(super) name: &'static str,
    /// Redis's arity: `n` exactly n arguments (the name included), `-n`
    /// at least n.
    pub(super) arity: i32,
    pub(super) flags: u8,
    pub(super) run: Run,
    pub(super) subs: &'static [Spec],
}

const fn cmd(
    name: &'static str,
    arity: i32,
    flags: u8,
    run: fn(&mut Core, &[Vec<u8>]) -> Reply,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        run: Run::Core(run),
        subs: &[],
    }
}

const fn container(name: &'static str, flags: u8, subs: &'static [Spec]) -> Spec {
    Spec {
        name,
        arity: -2,
        flags,
        run: Run::Container,
        subs,
    }
}

const fn special(name: &'static str, arity: i32, flags: u8, run: Run) -> Spec {
    Spec {
        name,
        arity,
        flags,
        run,
        subs: &[],
    }
}

static CONFIG: [Spec; 2] = [
    cmd("config|get", -3, NOSCRIPT, server::config_get),
    cmd("config|set", -4, NOSCRIPT, server::config_set),
];

static SCRIPT: [Spec; 4] = [
    special("script|load", 3, NOSCRIPT, Run::ScriptLoad),
    cmd("script|exists", -3, NOSCRIPT, server::script_exists),
    cmd("script|flush", -2, NOSCRIPT, server::script_flush),
    cmd("script|kill", 2, NOSCRIPT, server::script_kill),
];

static PUBSUB: [Spec; 3] = [
    cmd("pubsub|channels", -2, 0, server::pubsub_channels),
    cmd("pubsub|numsub", -2, 0, server::pubsub_numsub),
    cmd("pubsub|numpat", 2, 0, server::pubsub_numpat),
];

static CLIENT: [Spec; 2] = [
    cmd("client|getname", 2, NOSCRIPT, server::client_getname),
    cmd("client|setname", 3, NOSCRIPT, server::client_setname),
];

/// Every command, in order of name (lower case), which [`lookup`]'s
/// index by first letter needs.
pub(super) static COMMANDS: [Spec; 43] = [
    cmd("append", 3, WRITE, strings::append),
    cmd("auth", -2, NOSCRIPT, server::auth),
    container("client", NOSCRIPT, &CLIENT),
    container("config", NOSCRIPT, &CONFIG),
    cmd("dbsize", 1, 0, server::dbsize),
    cmd("del", -2, WRITE, strings::del),
    cmd("echo", 2, 0, server::echo),
    special("eval", -3, NOSCRIPT, Run::Eval),
    special("evalsha", -3, NOSCRIPT, Run::EvalSha),
    cmd("exists", -2, 0, strings::exists),
    cmd("flushall", -1, WRITE, server::flushall),
    cmd("flushdb", -1, WRITE, server::flushall),
    cmd("get", 2, 0, strings::get),
    cmd("hdel", -3, WRITE, hashes::hdel),
    cmd("hello", -1, NOSCRIPT, server::hello),
    cmd("hexists", 3, 0, hashes::hexists),
    cmd("hget", 3, 0, hashes::hget),
    cmd("hgetall", 2, 0, hashes::hgetall),
    cmd("hincrby", 4, WRITE, hashes::hincrby),
    cmd("hlen", 2, 0, hashes::hlen),
    cmd("hmget", -3, 0, hashes::hmget),
    cmd("hset", -4, WRITE, hashes::hset),
    cmd("hsetnx", 4, WRITE, hashes::hsetnx),
    cmd("info", -1, 0, server::info),
    cmd("mget", -2, 0, strings::mget),
    cmd("pexpire", -3, WRITE, strings::pexpire),
    cmd("ping", -1, 0, server::ping),
    cmd("psubscribe", -2, NOSCRIPT, server::subscribe),
    cmd("pttl", 2, 0, strings::pttl),
    cmd("publish", 3, 0, server::publish),
    container("pubsub", 0, &PUBSUB),
    cmd("punsubscribe", -1, NOSCRIPT, server::subscribe),
    cmd("quit", -1, NOSCRIPT, server::quit),
    cmd("role", 1, NOSCRIPT, server::role),
    cmd("save", 1, NOSCRIPT, server::save),
    container("script", NOSCRIPT, &SCRIPT),
    cmd("select", 2, 0, server::select),
    cmd("set", -3, WRITE, strings::set),
    cmd("subscribe", -2, NOSCRIPT, server::subscribe),
    cmd("time", 1, 0, server::time),
    cmd("ttl", 2, 0, strings::ttl),
    cmd("type", 2, 0, strings::type_of),
    cmd("unsubscribe", -1, NOSCRIPT, server::subscribe),
];

/// For each letter, where the commands whose names begin with it lie in
/// [`COMMANDS`] (every command runs through [`lookup`]).
static BY_LETTER: LazyLock<[(usize, usize); 26]> = LazyLock::new(|| {
    let mut ranges = [(0, 0); 26];
    for (i, spec) in COMMANDS.iter().enumerate() {
        let letter = spec.name.bytes().next().map_or(0, |b| b.wrapping_sub(b'a'));
        if let Some(range) = ranges.get_mut(usize::from(letter)) {
            if range.1 == 0 {
                range.0 = i;
            }
            range.1 = i + 1;
        }
    }
    ranges
});

/// What a command name (and, for a container, its first argument) names.
pub(super) enum Lookup {
    /// A command, or a container's subcommand.
    Found(&'static Spec),
    /// No such command.
    Unknown,
    /// A container without such a subcommand.
    UnknownSub,
}

/// Finds the command `args` names (case-insensitive). A container named
/// alone is found as itself.
pub(super) fn lookup(args: &[Vec<u8>]) -> Lookup {
    let Some(name) = args.first() else {
        return Lookup::Unknown;
    };
    let first = name.first().map_or(0, u8::to_ascii_lowercase);
    let (from, to) = BY_LETTER
        .get(usize::from(first.wrapping_sub(b'a')))
        .copied()
        .unwrap_or((0, 0));
    let Some(spec) = COMMANDS
        .get(from..to)
        .unwrap_or_default()
        .iter()
        .find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
    else {
        return Lookup::Unknown;
    };
    let Some(sub) = args.get(1).filter(|_| !spec.subs.is_empty()) else {
        return Lookup::Found(spec);
    };
    spec.subs
        .iter()
        .find(|s| {
            s.name
                .split_once('|')
                .is_some_and(|(_, n)| n.as_bytes().eq_ignore_ascii_case(sub))
        })
        .map_or(Lookup::UnknownSub, Lookup::Found)
}

/// True when `count` arguments (the name included) fit `spec`'s arity.
pub(super) fn arity_fits(spec: &Spec, count: usize) -> bool {
    let count = i64::try_from(count).unwrap_or(i64::MAX);
    let arity = i64::from(spec.arity);
    if arity >= 0 {
        count == arity
    } else {
        count >= -arity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_table_is_in_order_of_lower_case_names() {
        for pair in COMMANDS.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} before {}",
                pair[0].name,
                pair[1].name
            );
        }
        for spec in &COMMANDS {
            assert_eq!(spec.name, spec.name.to_ascii_lowercase());
            assert!(
                spec.name.len() <= 24,
                "{} is longer than lookup's buffer",
                spec.name
            );
        }
    }
}
