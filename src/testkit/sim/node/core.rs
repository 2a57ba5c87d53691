//! [`Core`]: the state of one simulated server that commands read and
//! write (everything but the Lua state), and the checks every command
//! passes first, in Redis 7.0's order and words.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::keyspace::Keyspace;
use super::reply::{READONLY, Reply};
use super::table::{Lookup, NOSCRIPT, Run, Spec, WRITE, arity_fits, lookup};

/// Where a command comes from: a client, or a script's `redis.call`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Caller {
    /// A client's connection.
    Client,
    /// `redis.call` / `redis.pcall` in a script.
    Script,
}

/// A small seeded generator (SplitMix64): run ids, process ids.
#[derive(Clone, Debug)]
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// 40 lower-case hex digits, as a `run_id`.
    pub(super) fn hex40(&mut self) -> String {
        let mut id = String::with_capacity(40);
        while id.len() < 40 {
            id.push_str(&format!("{:016x}", self.next_u64()));
        }
        id.truncate(40);
        id
    }
}

/// One server process: what a restart or a failover replaces.
#[derive(Clone, Debug)]
pub(super) struct Process {
    pub(super) run_id: String,
    pub(super) replid: String,
    pub(super) pid: u32,
    /// When it started, node clock in µs.
    pub(super) started_us: i64,
    /// The last `SAVE` (or the start), node clock in µs.
    pub(super) last_save_us: i64,
    pub(super) saves: u64,
}

impl Process {
    pub(super) fn new(rng: &mut Rng, started_us: i64) -> Process {
        Process {
            run_id: rng.hex40(),
            replid: rng.hex40(),
            pid: 1000 + u32::try_from(rng.next_u64() % 60_000).unwrap_or(0),
            started_us,
            last_save_us: started_us,
            saves: 0,
        }
    }
}

/// The node's state, shared by the node and its Lua state's `redis.call`.
pub(super) type Shared = Arc<Mutex<Core>>;

/// The node's state, locked (a poisoned lock is taken over: every change
/// to the state is complete when it can panic).
pub(super) fn lock(core: &Shared) -> MutexGuard<'_, Core> {
    core.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The node's state that commands see.
#[derive(Debug)]
pub(super) struct Core {
    pub(super) index: usize,
    pub(super) keys: Keyspace,
    pub(super) config: BTreeMap<String, String>,
    /// Commands (`pexpire`, `config|get`, `config`) the ACL user may not run.
    pub(super) denied: BTreeSet<String>,
    /// The master this node replicates, when it is a replica.
    pub(super) master: Option<(String, u16)>,
    pub(super) published: Vec<(Vec<u8>, Vec<u8>)>,
    /// The script cache: the hashes `EVALSHA` finds.
    pub(super) scripts: BTreeSet<String>,
    pub(super) process: Process,
    pub(super) rng: Rng,
    /// The state of the scripts' `math.random` (Redis's `rand48`).
    pub(super) lua_rand: u64,
    /// The virtual time of the last `SAVE`.
    pub(super) last_save: Option<Duration>,
    /// The virtual time of the command being run.
    pub(super) now: Duration,
    /// The node clock then, in µs: frozen for the whole command (a script
    /// included).
    pub(super) us: i64,
}

/// The settings `CONFIG GET` answers before any `set_config`.
const DEFAULT_CONFIG: [(&str, &str); 8] = [
    ("appendfsync", "everysec"),
    ("appendonly", "no"),
    ("databases", "16"),
    ("maxmemory", "0"),
    ("maxmemory-policy", "noeviction"),
    ("port", "6379"),
    ("requirepass", ""),
    ("save", "3600 1 300 100 60 10000"),
];

impl Core {
    pub(super) fn new(index: usize, mut rng: Rng, started_us: i64) -> Core {
        let process = Process::new(&mut rng, started_us);
        Core {
            index,
            keys: Keyspace::default(),
            config: DEFAULT_CONFIG
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            denied: BTreeSet::new(),
            master: None,
            published: Vec::new(),
            scripts: BTreeSet::new(),
            process,
            rng,
            lua_rand: RAND48_START,
            last_save: None,
            now: Duration::ZERO,
            us: started_us,
        }
    }

    /// The node clock of the current command, in ms.
    pub(super) fn ms(&self) -> i64 {
        self.us.div_euclid(1000)
    }

    /// True when the ACL user may not run the command named `name`
    /// (`config|get` is denied by `config|get` and by `config`).
    pub(super) fn is_denied(&self, name: &str) -> bool {
        self.denied.contains(name)
            || name
                .split_once('|')
                .is_some_and(|(container, _)| self.denied.contains(container))
    }

    /// The checks before a command runs, in Redis's order: known command
    /// and subcommand, arity, allowed in a script, ACL, read-only replica.
    pub(super) fn check(&self, args: &[Vec<u8>], caller: Caller) -> Result<&'static Spec, Reply> {
        let script = caller == Caller::Script;
        let spec = match lookup(args) {
            Lookup::Found(spec) => spec,
            Lookup::Unknown if script => {
                return Err(Reply::error("ERR Unknown Redis command called from script"));
            }
            Lookup::Unknown => return Err(unknown_command(args)),
            Lookup::UnknownSub if script => {
                return Err(Reply::error("ERR Unknown Redis command called from script"));
            }
            Lookup::UnknownSub => return Err(unknown_subcommand(args)),
        };
        if !arity_fits(spec, args.len()) {
            return Err(if script {
                Reply::error("ERR Wrong number of args calling Redis command from script")
            } else {
                wrong_arity(spec.name)
            });
        }
        if script && spec.flags & NOSCRIPT != 0 {
            return Err(Reply::error(
                "ERR This Redis command is not allowed from script",
            ));
        }
        if self.is_denied(spec.name) {
            return Err(Reply::error(if script {
                "ERR The user executing the script can't run this command or subcommand".to_owned()
            } else {
                format!(
                    "NOPERM this user has no permissions to run the '{}' command",
                    spec.name
                )
            }));
        }
        if spec.flags & WRITE != 0 && self.master.is_some() {
            return Err(Reply::error(READONLY));
        }
        Ok(spec)
    }

    /// Runs one command from a script's `redis.call` / `redis.pcall`.
    pub(super) fn run_from_script(&mut self, args: &[Vec<u8>]) -> Reply {
        match self.check(args, Caller::Script) {
            Ok(spec) => match spec.run {
                Run::Core(run) => run(self, args),
                // Scripts may call none of the others (NOSCRIPT).
                _ => Reply::error("ERR This Redis command is not allowed from script"),
            },
            Err(reply) => reply,
        }
    }

    /// `redis.acl_check_cmd(args...)`: may the user run this command?
    pub(super) fn acl_check(&self, args: &[Vec<u8>]) -> Result<bool, String> {
        match lookup(args) {
            Lookup::Found(spec) => Ok(!self.is_denied(spec.name)),
            _ => Err("ERR Invalid command passed to redis.acl_check_cmd()".to_owned()),
        }
    }

    /// The next `math.random` draw in a script: Redis's `redisLrand48() %
    /// INT32_MAX / INT32_MAX`.
    pub(super) fn lua_random(&mut self) -> f64 {
        self.lua_rand = (RAND48_A.wrapping_mul(self.lua_rand).wrapping_add(RAND48_C)) & RAND48_MASK;
        let drawn = self.lua_rand >> 17;
        let max = u64::from(i32::MAX.unsigned_abs());
        (drawn % max) as f64 / max as f64
    }

    /// `math.randomseed(seed)` in a script (Redis's `redisSrand48`).
    pub(super) fn lua_seed(&mut self, seed: i32) {
        let seed = u64::from(seed.cast_unsigned());
        self.lua_rand = (seed << 16) | 0x330E;
    }
}

const RAND48_A: u64 = 0x5_DEEC_E66D;
const RAND48_C: u64 = 0xB;
const RAND48_MASK: u64 = (1 << 48) - 1;
/// `rand48`'s state before any seed.
pub(super) const RAND48_START: u64 = 0x1234_ABCD_330E;

/// The argument at `i`, empty when there is none (arity is checked first).
pub(super) fn at(args: &[Vec<u8>], i: usize) -> &[u8] {
    args.get(i).map_or(&[][..], Vec::as_slice)
}

/// The arguments from `i` on (none when there are fewer).
pub(super) fn rest(args: &[Vec<u8>], i: usize) -> &[Vec<u8>] {
    args.get(i..).unwrap_or_default()
}

/// True when `arg` is `word` in any case.
pub(super) fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// `ERR wrong number of arguments for 'name' command`.
pub(super) fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// At most `limit` bytes of `bytes`, as text.
fn cut(bytes: &[u8], limit: usize) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(limit)]).into_owned()
}

/// Redis's answer to an unknown command: its name and the start of its
/// arguments (at most 128 bytes of them, each quoted).
fn unknown_command(args: &[Vec<u8>]) -> Reply {
    let name = cut(at(args, 0), 128);
    let mut listed = String::new();
    for arg in args.iter().skip(1) {
        if listed.len() >= 128 {
            break;
        }
        let room = 128 - listed.len();
        listed.push_str(&format!("'{}' ", cut(arg, room)));
    }
    Reply::error(format!(
        "ERR unknown command '{name}', with args beginning with: {listed}"
    ))
}

/// Redis's answer to a container command with an unknown subcommand.
fn unknown_subcommand(args: &[Vec<u8>]) -> Reply {
    let sub = cut(at(args, 1), 128);
    let container = String::from_utf8_lossy(at(args, 0)).to_ascii_uppercase();
    Reply::error(format!(
        "ERR unknown subcommand '{sub}'. Try {container} HELP."
    ))
}
