//! One simulated Redis server: [`SimNode`].
//!
//! A synchronous, deterministic model of one redis-server 7.0 process: a
//! keyspace (strings and hashes) with expiry on the node's own
//! [`NodeClock`], the commands the library sends answered in RESP2 with
//! redis-server 7.0.15's words, and the library's Lua scripts run from
//! their exact text in Lua 5.1, in Redis's script environment. Restarts
//! (with or without persistence), failovers, `FLUSHALL`, ACL refusals and
//! read-only replicas are the faults it models. No I/O, no wall clock:
//! every answer depends only on the seed, the virtual times and the
//! commands.
//!
//! Not modelled (answered with an error that says so, or left out):
//! connection state (`AUTH` is checked but not required, `CLIENT
//! SETNAME` is not kept, `SUBSCRIBE` belongs to the link, a single
//! database 0), RESP3, key-pattern ACLs, `cjson`/`bit`/`struct`/`cmsgpack`
//! in scripts, script shebangs and timeouts, memory limits and eviction,
//! large-hash (hashtable) field order.

mod clock;
mod core;
mod hashes;
mod info;
mod keyspace;
mod library;
mod number;
mod reply;
mod script;
mod server;
mod strings;
mod table;
#[cfg(test)]
mod tests;
mod value;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use self::clock::NodeClock;
use self::core::{Caller, Core, Process, RAND48_START, Rng, Shared, at, lock, wrong_arity};
use self::keyspace::{Data, Entry};
#[doc(hidden)]
pub use self::library::scripts;
use self::number::parse_i64;
use self::reply::{NOSCRIPT, Reply, not_integer};
use self::script::{Engine, sha1_hex};
use self::table::Run;

/// What survives a [`SimNode::restart`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persistence {
    /// Nothing: the node comes back empty.
    None,
    /// An RDB snapshot: the keyspace as it was at virtual time `taken_at`
    /// (changes made at that very time included), less the keys that have
    /// expired by the node's clock at the restart.
    Snapshot {
        /// When the snapshot was taken (virtual time).
        taken_at: Duration,
    },
    /// AOF with `appendfsync always`: every write, less the keys that have
    /// expired by the node's clock at the restart.
    Aof,
}

/// One simulated redis-server 7.0 process.
///
/// [`execute`](Self::execute) runs one command (its arguments, as a
/// connection sends them) at a virtual time and returns the RESP2 reply
/// bytes, which `redis::parse_redis_value` reads as it reads a real
/// server's.
///
/// ```
/// use std::time::Duration;
/// use redquorum::testkit::sim::node::SimNode;
///
/// let mut node = SimNode::new(0, 42);
/// let args = |words: &[&str]| words.iter().map(|w| w.as_bytes().to_vec()).collect::<Vec<_>>();
/// let t = Duration::from_millis(5);
/// let reply = node.execute(t, &args(&["SET", "lock:a", "v1", "NX", "PX", "1000"]));
/// assert_eq!(reply, b"+OK\r\n");
/// assert_eq!(node.execute(t, &args(&["SET", "lock:a", "v2", "NX", "PX", "1000"])), b"$-1\r\n");
/// assert_eq!(node.value(t, "lock:a").as_deref(), Some(&b"v1"[..]));
/// assert_eq!(node.pttl(t + Duration::from_millis(400), "lock:a"), 600);
/// assert_eq!(node.value(t + Duration::from_secs(1), "lock:a"), None);
/// ```
#[derive(Debug)]
pub struct SimNode {
    /// Shared with the Lua state, whose `redis.call` runs commands on it.
    core: Shared,
    /// The live process's, as in `core`: for [`run_id`](Self::run_id).
    run_id: String,
    clock: NodeClock,
    /// The Lua state, made on the first script.
    engine: Option<Engine>,
    /// The latest virtual time seen: time never goes back.
    last_now: Duration,
}

/// Where every node's clock starts (ms since the epoch, 2023-11-14).
const EPOCH_MS: f64 = 1_700_000_000_000.0;

impl SimNode {
    /// Node `index` of a simulation seeded with `seed`: its `run_id` (40
    /// hex digits), process id and clock offset (within a second of the
    /// others') are drawn from the two. Cheap: no Lua state until the first
    /// script.
    ///
    /// ```
    /// use redquorum::testkit::sim::node::SimNode;
    ///
    /// let a = SimNode::new(0, 7);
    /// assert_eq!(a.run_id().len(), 40);
    /// assert_eq!(a.run_id(), SimNode::new(0, 7).run_id());
    /// assert_ne!(a.run_id(), SimNode::new(1, 7).run_id());
    /// ```
    pub fn new(index: usize, seed: u64) -> SimNode {
        let mut rng = Rng::new(seed ^ (index as u64).wrapping_mul(0xA24B_AED4_963E_E407));
        let offset_us = rng.next_u64() % 1_000_000;
        let clock = NodeClock::new(EPOCH_MS + offset_us as f64 / 1000.0);
        let started_us = clock.now_us(Duration::ZERO);
        let core = Core::new(index, rng, started_us);
        SimNode {
            run_id: core.process.run_id.clone(),
            core: Arc::new(Mutex::new(core)),
            clock,
            engine: None,
            last_now: Duration::ZERO,
        }
    }

    /// The node's index, as given to [`new`](Self::new).
    pub fn index(&self) -> usize {
        self.core().index
    }

    fn core(&self) -> MutexGuard<'_, Core> {
        lock(&self.core)
    }

    /// Runs one command (name and arguments) at virtual time `now` (time
    /// since the simulation began; a time before one already seen counts
    /// as that one) and returns the reply as RESP2 bytes, worded as
    /// redis-server 7.0.15 words it. The node's clock is read once: time
    /// stands still for the whole command, a script included.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redquorum::testkit::sim::node::SimNode;
    ///
    /// let mut node = SimNode::new(0, 1);
    /// let args = |words: &[&str]| words.iter().map(|w| w.as_bytes().to_vec()).collect::<Vec<_>>();
    /// let reply = node.execute(Duration::ZERO, &args(&["EVAL", "return redis.call('incr', KEYS[1])", "1", "k"]));
    /// let reply = redis::parse_redis_value(&reply).unwrap();
    /// assert!(matches!(reply, redis::Value::ServerError(_)));
    /// assert_eq!(node.execute(Duration::ZERO, &args(&["GET"])), b"-ERR wrong number of arguments for 'get' command\r\n");
    /// ```
    pub fn execute(&mut self, now: Duration, args: &[Vec<u8>]) -> Vec<u8> {
        self.run(now, args).encode()
    }

    /// [`execute`](Self::execute), answering the value a connection's
    /// decoder makes of the reply.
    pub(crate) fn execute_value(
        &mut self,
        now: Duration,
        args: &[Vec<u8>],
    ) -> redis::RedisResult<redis::Value> {
        value::of(self.run(now, args))
    }

    /// Runs one command: its reply.
    fn run(&mut self, now: Duration, args: &[Vec<u8>]) -> Reply {
        let (run, name) = {
            let mut core = self.at(now);
            match core.check(args, Caller::Client) {
                Err(reply) => return reply,
                Ok(spec) => match spec.run {
                    Run::Core(run) => return run(&mut core, args),
                    other => (other, spec.name),
                },
            }
        };
        match run {
            Run::Eval => self.eval(args, false),
            Run::EvalSha => self.eval(args, true),
            Run::ScriptLoad => self.load(at(args, 2)),
            Run::Core(_) | Run::Container => wrong_arity(name),
        }
    }

    /// Sets the current command's virtual time and node time; the state,
    /// locked.
    fn at(&mut self, now: Duration) -> MutexGuard<'_, Core> {
        let now = now.max(self.last_now);
        self.last_now = now;
        let mut core = lock(&self.core);
        core.now = now;
        core.us = self.clock.now_us(now);
        core
    }

    /// `EVAL body numkeys ...` or `EVALSHA sha numkeys ...`.
    fn eval(&mut self, args: &[Vec<u8>], by_sha: bool) -> Reply {
        let script = at(args, 1);
        if by_sha && script.len() != 40 {
            return Reply::error(NOSCRIPT);
        }
        let Some(numkeys) = parse_i64(at(args, 2)) else {
            return not_integer();
        };
        let given = args.len().saturating_sub(3);
        if numkeys > i64::try_from(given).unwrap_or(i64::MAX) {
            return Reply::error("ERR Number of keys can't be greater than number of args");
        }
        let Ok(numkeys) = usize::try_from(numkeys) else {
            return Reply::error("ERR Number of keys can't be negative");
        };
        let sha = if by_sha {
            String::from_utf8_lossy(script).to_ascii_lowercase()
        } else {
            sha1_hex(script)
        };
        if by_sha && !self.core().scripts.contains(&sha) {
            return Reply::error(NOSCRIPT);
        }
        let engine = match engine_of(&mut self.engine) {
            Ok(engine) => engine,
            Err(reply) => return reply,
        };
        // EVALSHA finds only scripts compiled before (the script cache
        // holds nothing else); EVAL compiles on first sight.
        let compiled = if by_sha {
            engine.compiled(&sha).ok_or_else(|| Reply::error(NOSCRIPT))
        } else {
            engine.compile(&sha, script)
        };
        let f = match compiled {
            Ok(f) => f,
            Err(reply) => return reply,
        };
        lock(&self.core).scripts.insert(sha.clone());
        let params = args.get(3..).unwrap_or_default();
        let (keys, argv) = params.split_at(numkeys.min(params.len()));
        engine.run(&self.core, (&sha, &f), keys, argv)
    }

    /// `SCRIPT LOAD body`: compiles it and caches it; answers its sha.
    fn load(&mut self, body: &[u8]) -> Reply {
        let sha = sha1_hex(body);
        let engine = match engine_of(&mut self.engine) {
            Ok(engine) => engine,
            Err(reply) => return reply,
        };
        if let Err(reply) = engine.compile(&sha, body) {
            return reply;
        }
        lock(&self.core).scripts.insert(sha.clone());
        Reply::bulk(sha)
    }

    /// The node's clock.
    pub fn clock(&self) -> &NodeClock {
        &self.clock
    }

    /// The node's clock, to jump it or change its rate.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redquorum::testkit::sim::node::SimNode;
    ///
    /// let mut node = SimNode::new(0, 3);
    /// let args = |words: &[&str]| words.iter().map(|w| w.as_bytes().to_vec()).collect::<Vec<_>>();
    /// node.execute(Duration::ZERO, &args(&["SET", "k", "v", "PX", "1000"]));
    /// node.clock_mut().set_rate(Duration::ZERO, 2.0);
    /// assert_eq!(node.pttl(Duration::from_millis(250), "k"), 500);
    /// node.clock_mut().jump(1_000.0);
    /// assert_eq!(node.pttl(Duration::from_millis(250), "k"), -2);
    /// ```
    pub fn clock_mut(&mut self) -> &mut NodeClock {
        &mut self.clock
    }

    /// The process is killed and started again at virtual time `now`: a new
    /// `run_id` and process id, an empty script cache, uptime 0, and the
    /// keyspace `persistence` keeps. Configuration, ACL and replication
    /// settings stay (they live in the configuration file).
    pub fn restart(&mut self, now: Duration, persistence: Persistence) {
        let mut core = self.at(now);
        let now = core.now;
        let kept = match persistence {
            Persistence::None => Default::default(),
            Persistence::Snapshot { taken_at } => core.keys.as_of(taken_at.min(now)),
            Persistence::Aof => core.keys.as_of(now),
        };
        let now_ms = core.ms();
        core.keys.replace(kept, now_ms, now);
        core.keys.dirty = 0;
        let started_us = core.us;
        core.process = Process::new(&mut core.rng, started_us);
        core.scripts.clear();
        core.lua_rand = RAND48_START;
        let run_id = core.process.run_id.clone();
        drop(core);
        self.run_id = run_id;
    }

    /// `FLUSHALL` from outside (an operator's, or a lost disk), at the
    /// latest virtual time the node has seen. Scripts stay cached.
    pub fn flushall(&mut self) {
        let now = self.last_now;
        let mut core = self.at(now);
        let now_ms = core.ms();
        core.keys.replace(Default::default(), now_ms, now);
    }

    /// A replica takes over at virtual time `now`: it has every write up to
    /// `now - lag`, and is another process (new `run_id`, empty script
    /// cache; its uptime goes on).
    pub fn failover(&mut self, now: Duration, lag: Duration) {
        let mut core = self.at(now);
        let now = core.now;
        let replicated = core.keys.as_of(now.saturating_sub(lag));
        let now_ms = core.ms();
        core.keys.replace(replicated, now_ms, now);
        let (started_us, us) = (core.process.started_us, core.us);
        core.process = Process::new(&mut core.rng, us);
        core.process.started_us = started_us;
        core.scripts.clear();
        core.lua_rand = RAND48_START;
        let run_id = core.process.run_id.clone();
        drop(core);
        self.run_id = run_id;
    }

    /// Every `PUBLISH` (a script's included) since the last call, as
    /// `(channel, message)`, in order: for the links to deliver.
    pub fn take_published(&mut self) -> Vec<(Vec<u8>, Vec<u8>)> {
        std::mem::take(&mut self.core().published)
    }

    /// The node's clock at virtual time `now`, in whole ms.
    pub(crate) fn ms_at(&self, now: Duration) -> i64 {
        self.clock.now_us(now).div_euclid(1000)
    }

    /// The string at `key` at virtual time `now`: `None` when missing,
    /// expired or not a string.
    pub fn value(&self, now: Duration, key: &str) -> Option<Vec<u8>> {
        match self.core().keys.get(key.as_bytes(), self.ms_at(now)) {
            Some(entry) => match &entry.data {
                Data::Str(value) => Some(value.clone()),
                Data::Hash(_) => None,
            },
            None => None,
        }
    }

    /// [`pttl`](Self::pttl) of `key` when its string value passes
    /// `matches`, else -2 (as if missing): one look, no copy of the value.
    pub fn pttl_if(&self, now: Duration, key: &str, matches: impl FnOnce(&[u8]) -> bool) -> i64 {
        let now_ms = self.ms_at(now);
        match self.core().keys.get(key.as_bytes(), now_ms) {
            Some(entry) => match &entry.data {
                Data::Str(value) if matches(value) => entry
                    .expire_at
                    .map_or(-1, |at| at.saturating_sub(now_ms).max(0)),
                _ => -2,
            },
            None => -2,
        }
    }

    /// How many times the keyspace changed so far (never fewer than
    /// before): what [`expiry_if`](Self::expiry_if) read holds while it
    /// stays the same.
    pub(crate) fn changes(&self) -> u64 {
        self.core().keys.changes
    }

    /// When the string at `key` expires (node ms; `Some(None)`: never),
    /// if `matches` its value, whether or not it has expired; `None`
    /// when there is none or it does not match.
    pub(crate) fn expiry_if(
        &self,
        key: &str,
        matches: impl FnOnce(&[u8]) -> bool,
    ) -> Option<Option<i64>> {
        match self.core().keys.stored(key.as_bytes()) {
            Some(Entry {
                data: Data::Str(value),
                expire_at,
            }) if matches(value) => Some(*expire_at),
            _ => None,
        }
    }

    /// `key`'s time to live at virtual time `now` in ms, as `PTTL`
    /// answers: -2 when missing or expired, -1 without expiry.
    pub fn pttl(&self, now: Duration, key: &str) -> i64 {
        let now_ms = self.ms_at(now);
        match self.core().keys.get(key.as_bytes(), now_ms) {
            None => -2,
            Some(entry) => entry
                .expire_at
                .map_or(-1, |at| at.saturating_sub(now_ms).max(0)),
        }
    }

    /// The live keys at virtual time `now`, sorted.
    pub fn keys(&self, now: Duration) -> Vec<String> {
        let mut keys: Vec<String> = self
            .core()
            .keys
            .live(self.ms_at(now))
            .map(|(key, _)| String::from_utf8_lossy(key).into_owned())
            .collect();
        keys.sort_unstable();
        keys
    }

    /// The connection's ACL user may not run `command` (lower case, as
    /// `pexpire`, or `config|get` for one subcommand), neither directly
    /// (`NOPERM`) nor from a script; `redis.acl_check_cmd` says false.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redquorum::testkit::sim::node::SimNode;
    ///
    /// let mut node = SimNode::new(0, 3);
    /// node.deny("pexpire");
    /// let args = |words: &[&str]| words.iter().map(|w| w.as_bytes().to_vec()).collect::<Vec<_>>();
    /// assert_eq!(
    ///     node.execute(Duration::ZERO, &args(&["PEXPIRE", "k", "10"])),
    ///     b"-NOPERM this user has no permissions to run the 'pexpire' command\r\n"
    /// );
    /// ```
    pub fn deny(&mut self, command: &str) {
        self.core().denied.insert(command.to_ascii_lowercase());
    }

    /// Undoes [`deny`](Self::deny).
    pub fn allow(&mut self, command: &str) {
        self.core().denied.remove(&command.to_ascii_lowercase());
    }

    /// Sets a configuration value that `CONFIG GET` (and `INFO`: `port`,
    /// `appendonly`; `AUTH`: `requirepass`) answers. The defaults:
    /// `maxmemory-policy noeviction`, `appendonly no`, `appendfsync
    /// everysec`, `save "3600 1 300 100 60 10000"`, `port 6379`.
    pub fn set_config(&mut self, name: &str, value: &str) {
        self.core()
            .config
            .insert(name.to_ascii_lowercase(), value.to_owned());
    }

    /// Makes the node a replica of `master` (`ROLE` answers `slave`, writes
    /// answer `READONLY`), or a master again with `None`.
    pub fn set_replica_of(&mut self, master: Option<(String, u16)>) {
        self.core().master = master;
    }

    /// Whether the script cache holds the script of SHA1 `sha` (hex).
    pub fn knows_script(&self, sha: &str) -> bool {
        lock(&self.core).scripts.contains(&sha.to_ascii_lowercase())
    }

    /// The SHA1s (hex) of the scripts the script cache holds.
    pub fn scripts_known(&self) -> Vec<String> {
        lock(&self.core).scripts.iter().cloned().collect()
    }

    /// Puts scripts back in the cache by SHA1 (as [`scripts_known`]
    /// gave them): a probe that flushed the cache undoes it.
    ///
    /// [`scripts_known`]: Self::scripts_known
    pub fn know_scripts(&mut self, shas: &[String]) {
        lock(&self.core).scripts.extend(shas.iter().cloned());
    }

    /// The live process's `run_id` (`INFO server`).
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The virtual time of the last `SAVE`, if any: a
    /// [`Persistence::Snapshot`] to restart from.
    pub fn last_save(&self) -> Option<Duration> {
        self.core().last_save
    }

    /// How many times this node compiled a script (its Lua state caches
    /// compiled scripts by sha).
    #[cfg(test)]
    pub(crate) fn compilations(&self) -> usize {
        self.engine.as_ref().map_or(0, |e| e.compilations)
    }
}

impl Drop for SimNode {
    /// Gives the node's Lua state to the next node of the thread.
    fn drop(&mut self) {
        if let Some(engine) = self.engine.take() {
            engine.give_back();
        }
    }
}

/// The node's Lua state, made (or taken from a node before) on first use.
fn engine_of(slot: &mut Option<Engine>) -> Result<&mut Engine, Reply> {
    if slot.is_none() {
        let engine = Engine::get().map_err(|e| {
            Reply::error(format!("ERR the simulated node could not start Lua: {e}"))
        })?;
        *slot = Some(engine);
    }
    slot.as_mut()
        .ok_or_else(|| Reply::error("ERR the simulated node could not start Lua"))
}
