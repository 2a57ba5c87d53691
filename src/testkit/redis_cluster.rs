//! [`LocalRedisCluster`]: one Redis Cluster of local `redis-server`
//! processes (`--cluster-enabled yes`, formed by
//! `redis-cli --cluster create`), with the operator's faults: a master
//! killed (its replica promoted) and a slot moved to another master.

use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use super::builder::{TempDir, resolve_bin};
use super::error::TestkitError;
use super::server::RedisServer;

/// How long the cluster may take to form, or to promote a replica.
const SETTLE: Duration = Duration::from_secs(30);
/// Each node's `cluster-node-timeout`: a killed master is failed over
/// about this long after it dies.
const NODE_TIMEOUT_MS: u64 = 1000;
/// Read and write timeout of the testkit's own connections.
const TIMEOUT: Duration = Duration::from_secs(5);

/// A local Redis Cluster: `masters` masters with `replicas` replicas each,
/// every node a `redis-server` child killed on drop.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> Result<(), redquorum::testkit::TestkitError> {
/// use redquorum::testkit::LocalRedisCluster;
///
/// let cluster = LocalRedisCluster::start(3, 1)?;
/// assert_eq!(cluster.masters().len(), 3);
/// let owner = cluster.master_of(0)?;
/// cluster.kill(owner)?; // its replica takes over
/// let promoted = cluster.wait_for_owner_other_than(0, owner)?;
/// assert_ne!(promoted, owner);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LocalRedisCluster {
    servers: Vec<Mutex<RedisServer>>,
    _root: TempDir,
}

fn lock(server: &Mutex<RedisServer>) -> MutexGuard<'_, RedisServer> {
    server.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LocalRedisCluster {
    /// Starts `masters × (1 + replicas)` nodes and forms the cluster: the
    /// first `masters` nodes are the masters (slots split evenly, in
    /// order), the others their replicas. Returns once every node agrees
    /// that all slots are served.
    ///
    /// # Errors
    ///
    /// [`TestkitError::RedisServerMissing`] without `redis-server`,
    /// [`TestkitError::Spawn`] without `redis-cli`,
    /// [`TestkitError::Cluster`] if the cluster does not form in time, and
    /// the errors of [`LocalCluster::start`](super::LocalCluster::start).
    pub fn start(masters: usize, replicas: usize) -> Result<Self, TestkitError> {
        let bin = resolve_bin(None)?;
        let root = TempDir::create()?;
        let mut servers = Vec::new();
        for index in 0..masters * (1 + replicas) {
            let dir = root.path().join(format!("node-{index}"));
            let server = RedisServer::start_with(
                index,
                &bin,
                &dir,
                None,
                &[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    "{bus}",
                    "--cluster-node-timeout",
                    &NODE_TIMEOUT_MS.to_string(),
                    "--cluster-config-file",
                    "nodes.conf",
                ],
            )?;
            servers.push(Mutex::new(server));
        }
        let cluster = LocalRedisCluster {
            servers,
            _root: root,
        };
        cluster.create(&bin, replicas)?;
        cluster.wait_until("the cluster to form", |c| c.settled())?;
        Ok(cluster)
    }

    fn create(&self, bin: &std::path::Path, replicas: usize) -> Result<(), TestkitError> {
        let cli = bin.with_file_name("redis-cli");
        let cli = if cli.is_file() {
            cli
        } else {
            "redis-cli".into()
        };
        let addresses = (0..self.servers.len()).map(|i| format!("127.0.0.1:{}", self.port(i)));
        let output = Command::new(&cli)
            .arg("--cluster")
            .arg("create")
            .args(addresses)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .map_err(|source| TestkitError::Spawn {
                index: 0,
                bin: cli.clone(),
                source,
            })?;
        if output.status.success() {
            Ok(())
        } else {
            Err(TestkitError::Cluster(format!(
                "redis-cli --cluster create failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stdout)
            )))
        }
    }

    /// The number of nodes, masters and replicas.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Whether the cluster has no nodes (never, once started).
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    fn port(&self, i: usize) -> u16 {
        self.servers.get(i).map_or(0, |s| lock(s).port())
    }

    /// Node `i`'s URL, `redis://127.0.0.1:{port}/`.
    pub fn url(&self, i: usize) -> String {
        format!("redis://127.0.0.1:{}/", self.port(i))
    }

    /// Node `i`'s address, `127.0.0.1:{port}`, as the cluster names it.
    pub fn addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.port(i))
    }

    /// A connection to node `i` (5 s read and write timeouts).
    ///
    /// # Errors
    ///
    /// [`TestkitError::NoSuchNode`], or [`TestkitError::Redis`] if the node
    /// does not answer.
    pub fn connection(&self, i: usize) -> Result<redis::Connection, TestkitError> {
        if i >= self.servers.len() {
            return Err(TestkitError::NoSuchNode {
                index: i,
                len: self.servers.len(),
            });
        }
        super::server::connect(i, &self.url(i), TIMEOUT)
    }

    fn run<T: redis::FromRedisValue>(&self, i: usize, cmd: &redis::Cmd) -> Result<T, TestkitError> {
        let mut con = self.connection(i)?;
        super::server::run(i, &self.url(i), &mut con, cmd)
    }

    /// Whether node `i`'s process runs.
    fn up(&self, i: usize) -> bool {
        self.servers
            .get(i)
            .is_some_and(|s| lock(s).state() == super::NodeState::Up)
    }

    /// The nodes that are masters now, by index.
    pub fn masters(&self) -> Vec<usize> {
        (0..self.len())
            .filter(|&i| self.up(i))
            .filter(|&i| {
                self.run::<redis::Value>(i, &redis::cmd("ROLE"))
                    .ok()
                    .and_then(|role| match role {
                        redis::Value::Array(items) => items.into_iter().next(),
                        _ => None,
                    })
                    .is_some_and(|first| {
                        redis::from_redis_value::<String>(first).is_ok_and(|r| r == "master")
                    })
            })
            .collect()
    }

    /// The node that serves `slot`, as a live node's `CLUSTER SLOTS` says.
    ///
    /// # Errors
    ///
    /// [`TestkitError::Cluster`] if no live node names a live owner.
    pub fn master_of(&self, slot: u16) -> Result<usize, TestkitError> {
        let slot = i64::from(slot);
        for i in (0..self.len()).filter(|&i| self.up(i)) {
            let Ok(slots) = self.run::<redis::Value>(i, redis::cmd("CLUSTER").arg("SLOTS")) else {
                continue;
            };
            let port = owners(slots)
                .into_iter()
                .find(|&(start, end, _)| (start..=end).contains(&slot))
                .map(|(_, _, port)| port);
            let owner = (0..self.len()).find(|&j| Some(i64::from(self.port(j))) == port);
            if let Some(owner) = owner.filter(|&j| self.up(j)) {
                return Ok(owner);
            }
        }
        Err(TestkitError::Cluster(format!(
            "no live node names a live owner of slot {slot}"
        )))
    }

    /// Node `i`'s cluster id (`CLUSTER MYID`).
    fn id(&self, i: usize) -> Result<String, TestkitError> {
        self.run(i, redis::cmd("CLUSTER").arg("MYID"))
    }

    /// Kills node `i` with `SIGKILL`.
    ///
    /// # Errors
    ///
    /// [`TestkitError::NoSuchNode`], or the kill's error.
    pub fn kill(&self, i: usize) -> Result<(), TestkitError> {
        let server = self.servers.get(i).ok_or(TestkitError::NoSuchNode {
            index: i,
            len: self.servers.len(),
        })?;
        lock(server).kill()
    }

    /// Waits until a live node other than `old` serves `slot` and every
    /// live node reports the cluster healthy (after [`kill`](Self::kill)ing
    /// `old`, its replica's promotion), and returns that node.
    ///
    /// # Errors
    ///
    /// [`TestkitError::Cluster`] if it does not happen within 30 s.
    pub fn wait_for_owner_other_than(&self, slot: u16, old: usize) -> Result<usize, TestkitError> {
        let mut found = None;
        self.wait_until("a new owner of the slot", |c| {
            found = c.master_of(slot).ok().filter(|&o| o != old);
            found.is_some() && c.settled()
        })?;
        found.ok_or_else(|| TestkitError::Cluster(format!("slot {slot} has no new owner")))
    }

    /// Moves `slot`, with its keys, to master `to`, as `redis-cli --cluster
    /// reshard` does (`SETSLOT IMPORTING/MIGRATING`, `MIGRATE`, `SETSLOT
    /// NODE` on every master). Keys with a TTL keep it.
    ///
    /// # Errors
    ///
    /// [`TestkitError::Redis`] if a step fails, [`TestkitError::Cluster`] if
    /// the cluster does not agree on the new owner within 30 s.
    pub fn move_slot(&self, slot: u16, to: usize) -> Result<(), TestkitError> {
        let from = self.master_of(slot)?;
        if from == to {
            return Ok(());
        }
        let (from_id, to_id) = (self.id(from)?, self.id(to)?);
        let setslot = |i: usize, state: &str, id: &str| {
            self.run::<()>(
                i,
                redis::cmd("CLUSTER")
                    .arg("SETSLOT")
                    .arg(slot)
                    .arg(state)
                    .arg(id),
            )
        };
        setslot(to, "IMPORTING", &from_id)?;
        setslot(from, "MIGRATING", &to_id)?;
        loop {
            let keys: Vec<String> = self.run(
                from,
                redis::cmd("CLUSTER")
                    .arg("GETKEYSINSLOT")
                    .arg(slot)
                    .arg(100),
            )?;
            if keys.is_empty() {
                break;
            }
            self.run::<redis::Value>(
                from,
                redis::cmd("MIGRATE")
                    .arg("127.0.0.1")
                    .arg(self.port(to))
                    .arg("")
                    .arg(0)
                    .arg(5000)
                    .arg("KEYS")
                    .arg(&keys),
            )?;
        }
        for i in self.masters() {
            setslot(i, "NODE", &to_id)?;
        }
        self.wait_until("the slot's move to settle", |c| {
            c.master_of(slot).ok() == Some(to) && c.settled()
        })
    }

    /// Whether every live node reports `cluster_state:ok` and the same owner
    /// for every slot range, and every live replica is in sync.
    fn settled(&self) -> bool {
        let mut views = Vec::new();
        for i in (0..self.len()).filter(|&i| self.up(i)) {
            let Ok(info) = self.run::<String>(i, redis::cmd("CLUSTER").arg("INFO")) else {
                return false;
            };
            if !info.contains("cluster_state:ok") || !self.synced(i) {
                return false;
            }
            let Ok(slots) = self.run::<redis::Value>(i, redis::cmd("CLUSTER").arg("SLOTS")) else {
                return false;
            };
            views.push(owners(slots));
        }
        views.windows(2).all(|w| w[0] == w[1])
    }

    /// Whether node `i` is a master, or a replica whose link to its master
    /// is up: a replica that never synced cannot be promoted.
    fn synced(&self, i: usize) -> bool {
        match self.run::<redis::Value>(i, &redis::cmd("ROLE")) {
            Ok(redis::Value::Array(role)) => match role.as_slice() {
                [redis::Value::BulkString(kind), ..] if kind.as_slice() == b"master" => true,
                [_, _, _, redis::Value::BulkString(state), ..] => state.as_slice() == b"connected",
                _ => false,
            },
            _ => false,
        }
    }

    fn wait_until(
        &self,
        what: &str,
        mut done: impl FnMut(&Self) -> bool,
    ) -> Result<(), TestkitError> {
        let started = Instant::now();
        while !done(self) {
            if started.elapsed() > SETTLE {
                return Err(TestkitError::Cluster(format!(
                    "gave up waiting for {what} after {SETTLE:?}"
                )));
            }
            thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

/// `(start, end, master port)` of every range in a `CLUSTER SLOTS` reply,
/// sorted.
fn owners(slots: redis::Value) -> Vec<(i64, i64, i64)> {
    let mut out = Vec::new();
    if let redis::Value::Array(ranges) = slots {
        for range in ranges {
            if let redis::Value::Array(parts) = range
                && let [
                    redis::Value::Int(start),
                    redis::Value::Int(end),
                    redis::Value::Array(master),
                    ..,
                ] = parts.as_slice()
                && let Some(redis::Value::Int(port)) = master.get(1)
            {
                out.push((*start, *end, *port));
            }
        }
    }
    out.sort_unstable();
    out
}
