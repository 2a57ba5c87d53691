//! [`LocalCluster`]: N local `redis-server` processes, each behind a fault
//! proxy.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::builder::{LocalClusterBuilder, TempDir};
use super::certs::TestCertificates;
use super::error::TestkitError;
use super::proxy::{Proxy, ProxyMode};
use super::server::{NodeState, RedisServer};

/// Read/write timeout of [`LocalCluster::connection`].
const ASSERTION_TIMEOUT: Duration = Duration::from_secs(2);

/// N local `redis-server` processes, each fronted by a TCP fault proxy, for
/// tests, examples and benches.
///
/// Lock clients should use [`urls`](Self::urls) (through the proxies) so
/// that faults can be injected with [`set_proxy`](Self::set_proxy);
/// assertions use [`connection`](Self::connection) or
/// [`direct_urls`](Self::direct_urls), which bypass the proxies.
///
/// All methods take `&self`; share the cluster as `Arc<LocalCluster>`.
/// Everything is synchronous (std threads only), so it works from any async
/// runtime and while the caller blocks — but methods such as
/// [`restart`](Self::restart) block for up to a few seconds, so from async
/// code prefer `spawn_blocking` if that matters.
///
/// Dropping the cluster (also during a panic unwind) stops the proxies,
/// `SIGKILL`s and reaps every `redis-server` and removes the temporary
/// directory. If the whole test process is killed, the servers survive;
/// they have no persistence and listen on `127.0.0.1` only.
///
/// ```no_run
/// use std::time::Duration;
/// use redquorum::testkit::{LocalCluster, NodeState, ProxyMode};
///
/// let cluster = LocalCluster::start(3)?;
/// let urls = cluster.urls(); // give these to the lock client
///
/// cluster.kill(0)?;
/// assert_eq!(cluster.state(0), NodeState::Down);
/// cluster.restart(0)?; // same port, empty data
///
/// cluster.pause(1)?;
/// cluster.resume(1)?;
///
/// cluster.set_proxy(2, ProxyMode::Delay(Duration::from_millis(50)));
///
/// let mut con = cluster.connection(0)?;
/// let value: Option<String> = redis::cmd("GET").arg("my-lock").query(&mut con)?;
/// # let _ = (urls, value);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct LocalCluster {
    pub(super) nodes: Vec<Node>,
    /// For a TLS cluster, the certificates its nodes were started with.
    pub(super) certificates: Option<TestCertificates>,
    // Declared last: dropped after the nodes (servers are killed first).
    pub(super) _root: TempDir,
}

#[derive(Debug)]
pub(super) struct Node {
    /// The plain port of `redis-server` (TLS clusters keep it too).
    pub(super) direct_port: u16,
    pub(super) server: Mutex<RedisServer>,
    /// Fronts the TLS port on a TLS cluster, the plain one otherwise.
    pub(super) proxy: Proxy,
}

impl Drop for Node {
    fn drop(&mut self) {
        // Explicit order: nothing may keep forwarding to a dying server.
        // (The proxy's own Drop stops its threads; the server's kills it.)
        let _ = lock(&self.server).kill();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn url_for(port: u16) -> String {
    format!("redis://127.0.0.1:{port}/")
}

impl LocalCluster {
    /// Starts `n` nodes with the default options; see
    /// [`LocalClusterBuilder::start`].
    ///
    /// # Errors
    ///
    /// As [`LocalClusterBuilder::start`]; in particular
    /// [`TestkitError::RedisServerMissing`] when `redis-server` is neither on
    /// `PATH` nor pointed at by `REDIS_SERVER_BIN`.
    pub fn start(n: usize) -> Result<LocalCluster, TestkitError> {
        Self::builder().nodes(n).start()
    }

    /// A builder to choose the node count and the `redis-server` binary.
    pub fn builder() -> LocalClusterBuilder {
        LocalClusterBuilder::default()
    }

    /// Number of nodes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// `true` if the cluster has no nodes.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// `redis://127.0.0.1:<proxy port>/` for every node, in index order: the
    /// URLs lock clients should use; `rediss://` on a TLS cluster
    /// ([`LocalClusterBuilder::tls`]).
    #[must_use]
    pub fn urls(&self) -> Vec<String> {
        (0..self.len()).map(|i| self.url(i)).collect()
    }

    /// The proxied URL of node `i` (`rediss://` on a TLS cluster).
    ///
    /// # Panics
    ///
    /// If `i >= self.len()`.
    #[must_use]
    pub fn url(&self, i: usize) -> String {
        let port = self.node_or_panic(i).proxy.port();
        match self.certificates {
            Some(_) => format!("rediss://127.0.0.1:{port}/"),
            None => url_for(port),
        }
    }

    /// The certificates of a TLS cluster ([`LocalClusterBuilder::tls`]):
    /// trust its CA to reach the nodes. `None` for a plain cluster.
    ///
    /// ```no_run
    /// # #[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use redquorum::testkit::LocalCluster;
    /// use redquorum::{Config, Redlock};
    ///
    /// let cluster = LocalCluster::builder().nodes(3).tls().start()?;
    /// let certs = cluster.certificates().expect("a TLS cluster").tls_certificates();
    /// let redlock = Redlock::with_config(cluster.urls(), Config::default().with_tls_certificates(certs))?;
    /// # let _ = redlock;
    /// # Ok(()) }
    /// # #[cfg(not(any(feature = "tls-rustls", feature = "tls-native-tls")))]
    /// # fn main() {}
    /// ```
    #[must_use]
    pub fn certificates(&self) -> Option<&TestCertificates> {
        self.certificates.as_ref()
    }

    /// `redis://127.0.0.1:<redis-server port>/` for every node, bypassing the
    /// proxies (benches, assertions). Stable across restarts. Plain also on
    /// a TLS cluster.
    #[must_use]
    pub fn direct_urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| url_for(n.direct_port)).collect()
    }

    /// The direct (unproxied) URL of node `i`.
    ///
    /// # Panics
    ///
    /// If `i >= self.len()`.
    #[must_use]
    pub fn direct_url(&self, i: usize) -> String {
        url_for(self.node_or_panic(i).direct_port)
    }

    /// `SIGKILL`s node `i` and reaps it; the node is then
    /// [`NodeState::Down`] and its port refuses connections (its proxy
    /// accepts and then closes them). A no-op if already down.
    ///
    /// # Errors
    ///
    /// [`TestkitError::NoSuchNode`] for a bad index, [`TestkitError::Signal`]
    /// if the OS refuses the kill or wait.
    pub fn kill(&self, i: usize) -> Result<(), TestkitError> {
        lock(&self.node(i)?.server).kill()
    }

    /// Starts node `i` again, empty (no persistence), on the same port, and
    /// waits until it answers `PING`. If it is running (or paused) it is
    /// killed first. Blocks up to about 10 s.
    ///
    /// # Errors
    ///
    /// [`TestkitError::NoSuchNode`] for a bad index,
    /// [`TestkitError::StartFailed`] if it does not come back (e.g. the port
    /// was taken by another process meanwhile).
    pub fn restart(&self, i: usize) -> Result<(), TestkitError> {
        lock(&self.node(i)?.server).restart_empty()
    }

    /// Same as [`restart`](Self::restart): kills node `i` (if running) and
    /// starts it again with no data, AOF off. Keys it held are forgotten at
    /// once, which breaks Redlock's safety if done inside a TTL (the
    /// negative controls rely on this).
    ///
    /// # Errors
    ///
    /// As [`restart`](Self::restart).
    pub fn restart_empty(&self, i: usize) -> Result<(), TestkitError> {
        lock(&self.node(i)?.server).restart_empty()
    }

    /// Kills node `i` and starts it again with `appendonly yes` and
    /// `appendfsync always`, so that every key it held before the kill
    /// (with its expiry time) is loaded again. If the node was running
    /// without AOF, AOF is turned on first (see
    /// [`enable_aof`](Self::enable_aof)); a node that is already down and
    /// never had AOF comes back empty.
    ///
    /// # Errors
    ///
    /// As [`restart`](Self::restart), and [`TestkitError::Redis`] if AOF
    /// cannot be turned on.
    pub fn restart_with_aof(&self, i: usize) -> Result<(), TestkitError> {
        lock(&self.node(i)?.server).restart_with_aof()
    }

    /// Turns on `appendonly yes` / `appendfsync always` on running node `i`
    /// and waits for the AOF rewrite to finish: from then on a
    /// [`restart_with_aof`](Self::restart_with_aof) keeps every write.
    ///
    /// # Errors
    ///
    /// [`TestkitError::NoSuchNode`], [`TestkitError::Redis`] if the node
    /// cannot be reached, [`TestkitError::StartFailed`] if the rewrite does
    /// not finish within 10 s.
    pub fn enable_aof(&self, i: usize) -> Result<(), TestkitError> {
        lock(&self.node(i)?.server).enable_aof()
    }

    /// Deletes `key` on node `i` only, as if that node's clock had jumped
    /// past the key's expiry. Returns whether the key existed.
    ///
    /// # Errors
    ///
    /// [`TestkitError::NoSuchNode`], [`TestkitError::Redis`] if the node
    /// cannot be reached.
    pub fn expire_now(&self, i: usize, key: &str) -> Result<bool, TestkitError> {
        let deleted: u64 = self.run(i, redis::cmd("DEL").arg(key))?;
        Ok(deleted > 0)
    }

    /// `SAVE` on node `i`: an RDB snapshot of what it holds now, which
    /// [`restart_from_snapshot`](Self::restart_from_snapshot) loads.
    ///
    /// # Errors
    ///
    /// [`TestkitError::NoSuchNode`], [`TestkitError::Redis`] if the node
    /// cannot be reached.
    pub fn save(&self, i: usize) -> Result<(), TestkitError> {
        self.run(i, &redis::cmd("SAVE"))
    }

    /// Kills node `i` (`SIGKILL`) and starts it again from its last RDB
    /// snapshot ([`save`](Self::save)), AOF off: what Redis's default
    /// persistence does after a crash. Keys written since the snapshot are
    /// forgotten; older ones come back (with their expiry times).
    ///
    /// # Errors
    ///
    /// As [`restart`](Self::restart).
    pub fn restart_from_snapshot(&self, i: usize) -> Result<(), TestkitError> {
        lock(&self.node(i)?.server).restart_from_snapshot()
    }

    /// A [`Redlock`](crate::Redlock) on this cluster's nodes (through the
    /// proxies) with `config`. With the restart guard on
    /// ([`Config::with_restart_guard`](crate::Config::with_restart_guard)),
    /// it first marks the nodes trusted at once
    /// ([`Redlock::init_nodes`](crate::Redlock::init_nodes)): a test
    /// cluster just started holds no lock, so there is nothing to wait for.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use redquorum::{testkit::LocalCluster, Config};
    ///
    /// let cluster = LocalCluster::start(3)?;
    /// let config = Config::default().with_restart_guard(Duration::from_secs(5));
    /// let redlock = cluster.redlock(config).await?;
    /// let guard = redlock.try_lock("job", Duration::from_secs(5)).await?; // no wait
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Config`](crate::Error::Config) for a bad config, and
    /// [`Error::Misconfigured`](crate::Error::Misconfigured) listing the
    /// nodes that could not be marked trusted (as unreachable).
    pub async fn redlock(&self, config: crate::Config) -> crate::Result<crate::Redlock> {
        let guarded = config.restart_guard().is_some();
        let redlock = crate::Redlock::with_config(self.urls(), config)?;
        if guarded {
            let problems: Vec<crate::NodeProblem> = redlock
                .init_nodes()
                .await
                .into_iter()
                .enumerate()
                .filter(|(_, r)| *r.outcome() != crate::NodeOutcome::Granted)
                .map(|(index, r)| crate::NodeProblem::Unreachable {
                    index,
                    node: r.node().to_owned(),
                    reason: format!("not marked trusted: {}", r.outcome()),
                })
                .collect();
            if !problems.is_empty() {
                return Err(crate::Error::Misconfigured(problems));
            }
        }
        Ok(redlock)
    }

    /// `FLUSHALL` on node `i`: every key is forgotten (a data-loss fault).
    ///
    /// # Errors
    ///
    /// [`TestkitError::NoSuchNode`], [`TestkitError::Redis`] if the node
    /// cannot be reached.
    pub fn flushall(&self, i: usize) -> Result<(), TestkitError> {
        self.run(i, &redis::cmd("FLUSHALL"))
    }

    fn run<T: redis::FromRedisValue>(&self, i: usize, cmd: &redis::Cmd) -> Result<T, TestkitError> {
        let mut con = self.connection(i)?;
        super::server::run(i, &self.direct_url(i), &mut con, cmd)
    }

    /// Freezes node `i` with `SIGSTOP`: the kernel still accepts connections
    /// but nothing is answered until [`resume`](Self::resume).
    ///
    /// # Errors
    ///
    /// [`TestkitError::NoSuchNode`], [`TestkitError::NodeDown`] if the node
    /// was killed, [`TestkitError::Signal`] if the signal fails.
    pub fn pause(&self, i: usize) -> Result<(), TestkitError> {
        lock(&self.node(i)?.server).pause()
    }

    /// Continues node `i` with `SIGCONT` after [`pause`](Self::pause).
    /// Harmless on a running node.
    ///
    /// # Errors
    ///
    /// [`TestkitError::NoSuchNode`], [`TestkitError::NodeDown`] if the node
    /// was killed, [`TestkitError::Signal`] if the signal fails.
    pub fn resume(&self, i: usize) -> Result<(), TestkitError> {
        lock(&self.node(i)?.server).resume()
    }

    /// Current state of node `i`. A server that exited by itself is reported
    /// as [`NodeState::Down`].
    ///
    /// # Panics
    ///
    /// If `i >= self.len()`.
    #[must_use]
    pub fn state(&self, i: usize) -> NodeState {
        lock(&self.node_or_panic(i).server).state()
    }

    /// Switches the proxy of node `i` to `mode`. Takes effect at once, also
    /// on connections that are already open.
    ///
    /// # Panics
    ///
    /// If `i >= self.len()`.
    pub fn set_proxy(&self, i: usize, mode: ProxyMode) {
        self.node_or_panic(i).proxy.set_mode(mode);
    }

    /// Number of client-to-server bytes the proxy of node `i` has forwarded
    /// to its `redis-server` so far (to prove that nothing reached a node).
    /// Counted just before each write, so it never lags behind what the
    /// server has received.
    ///
    /// # Panics
    ///
    /// If `i >= self.len()`.
    #[must_use]
    pub fn proxy_forwarded_bytes(&self, i: usize) -> u64 {
        self.node_or_panic(i).proxy.forwarded_bytes()
    }

    /// A synchronous connection straight to node `i`'s `redis-server`
    /// (bypassing the proxy), with 2 s connect/read/write timeouts, for
    /// assertions such as `GET`, `SET`, `SCRIPT FLUSH`.
    ///
    /// # Errors
    ///
    /// [`TestkitError::NoSuchNode`], or [`TestkitError::Redis`] if the node
    /// does not accept the connection (e.g. it is down or paused).
    pub fn connection(&self, i: usize) -> Result<redis::Connection, TestkitError> {
        let node = self.node(i)?;
        super::server::connect(i, &url_for(node.direct_port), ASSERTION_TIMEOUT)
    }

    /// The pid of node `i`'s `redis-server`, or `None` if it is down or the
    /// index is out of range.
    #[must_use]
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.nodes.get(i).and_then(|n| lock(&n.server).pid())
    }

    fn node(&self, i: usize) -> Result<&Node, TestkitError> {
        self.nodes.get(i).ok_or(TestkitError::NoSuchNode {
            index: i,
            len: self.nodes.len(),
        })
    }

    #[allow(clippy::panic)]
    fn node_or_panic(&self, i: usize) -> &Node {
        match self.nodes.get(i) {
            Some(node) => node,
            None => panic!(
                "LocalCluster: no node with index {i}, the cluster has {} node(s)",
                self.nodes.len()
            ),
        }
    }
}
