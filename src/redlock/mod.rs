//! [`Redlock`]: the public face of the lock: construction, settings,
//! start-up checks and shutdown here, the locking calls in [`locking`].

#[cfg(feature = "cluster")]
mod cluster;
mod from_env;
mod jobs;
mod locking;
mod quarantine;
mod trust;
mod vouch;
pub use vouch::FenceCounters;

use std::sync::Arc;

use redis::IntoConnectionInfo;

use crate::background::Background;
use crate::config::Config;
use crate::error::node_check::NodeCheck;
use crate::error::{Error, Result};
use crate::lock::Shared;
use crate::node::Node;
use crate::notifications::Notifications;

/// A distributed lock over N independent Redis masters (Redlock).
///
/// Cheap to clone (an `Arc` inside) and `Send + Sync`: build one at start-up
/// and share it. Construction validates everything and does no I/O; each
/// node's connection opens on first use and reopens by itself after a
/// failure, so nodes that are down at start are simply failing votes until
/// they come back. Connections live on the tokio runtime that first uses them.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redquorum::Redlock;
///
/// # async fn run() -> redquorum::Result<()> {
/// let redlock = Redlock::new([
///     "redis://127.0.0.1:7001/",
///     "redis://127.0.0.1:7002/",
///     "redis://127.0.0.1:7003/",
///     "redis://127.0.0.1:7004/",
///     "redis://127.0.0.1:7005/",
/// ])?;
/// assert_eq!(redlock.quorum(), 3);
/// let guard = redlock.lock("nightly-report", Duration::from_secs(30)).await?;
/// // ... exclusive work, finished before guard.valid_until() ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Redlock {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Redlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nodes: Vec<&str> = self.shared.nodes().iter().map(|n| n.name()).collect();
        f.debug_struct("Redlock")
            .field("nodes", &nodes)
            .field("quorum", &self.shared.quorum())
            .field("config", self.shared.config())
            .finish()
    }
}

impl Redlock {
    /// A lock over `nodes` with the default [`Config`].
    ///
    /// Nodes are URLs (`redis://`, `redis+unix://`; `rediss://` with a redis
    /// TLS feature) or anything else `redis` turns into connection info.
    /// Use independent masters: not replicas of each other, not a cluster.
    ///
    /// ```
    /// let redlock = redquorum::Redlock::new(["redis://127.0.0.1:7001/", "redis://127.0.0.1:7002/", "redis://127.0.0.1:7003/"])?;
    /// assert_eq!(redlock.node_count(), 3);
    /// # Ok::<(), redquorum::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for no nodes, an unusable URL or the same node twice.
    pub fn new<I>(nodes: I) -> Result<Redlock>
    where
        I: IntoIterator,
        I::Item: IntoConnectionInfo,
    {
        Redlock::with_config(nodes, Config::default())
    }

    /// A lock over `nodes` tuned by `config`.
    ///
    /// ```
    /// use redquorum::{Config, Error, Redlock};
    ///
    /// let nodes = ["redis://127.0.0.1:7001/", "redis://127.0.0.1:7002/", "redis://127.0.0.1:7003/"];
    /// let redlock = Redlock::with_config(nodes, Config::default().with_quorum(3))?;
    /// assert_eq!(redlock.quorum(), 3);
    ///
    /// let err = Redlock::with_config(nodes, Config::default().with_quorum(1)).unwrap_err();
    /// assert!(matches!(err, Error::Config(_)));
    /// # Ok::<(), redquorum::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Config`], naming the bad value, for no nodes, an unusable
    /// URL, the same node twice, or a config value out of range.
    pub fn with_config<I>(nodes: I, config: Config) -> Result<Redlock>
    where
        I: IntoIterator,
        I::Item: IntoConnectionInfo,
    {
        let guard = Self::restart_guard(&config);
        let mut parsed = Vec::new();
        for (index, info) in nodes.into_iter().enumerate() {
            parsed.push(
                Node::new(index, info, config.node_timeout(), config.connect())?
                    .with_restart_guard(guard.clone()),
            );
        }
        Redlock::assemble(parsed, config)
    }

    /// The restart guard each node runs under `config`, if it is on.
    fn restart_guard(config: &Config) -> Option<crate::node::restart_guard::RestartGuard> {
        config.quarantine().map(|q| {
            crate::node::restart_guard::RestartGuard::new(
                crate::keys::guard_key(config.key_prefix()),
                q,
            )
        })
    }

    /// A lock over the simulated nodes `endpoints` (feature `sim`); with
    /// `tags`, one per node (tag and slot), keyed as the masters of a
    /// Redis Cluster are by [`Redlock::cluster`].
    #[cfg(feature = "sim")]
    pub(crate) fn simulated(
        endpoints: Vec<Arc<dyn crate::node::link::SimEndpoint>>,
        tags: Option<&[(Arc<str>, u16)]>,
        config: Config,
    ) -> Result<Redlock> {
        let guard = Self::restart_guard(&config);
        let mut nodes = Vec::new();
        for (index, endpoint) in endpoints.into_iter().enumerate() {
            let mut node =
                Node::simulated(index, endpoint, config.node_timeout(), config.connect())?
                    .with_restart_guard(guard.clone());
            if let Some((tag, slot)) = tags.and_then(|t| t.get(index)) {
                node = node.in_cluster(Arc::clone(tag), *slot);
            }
            nodes.push(node);
        }
        Redlock::assemble(nodes, config)
    }

    /// The hash tags (and their slots) of `n` nodes on a Redis Cluster,
    /// as [`Redlock::cluster`] gives them (feature `sim`).
    #[cfg(feature = "sim")]
    pub(crate) fn cluster_tags(n: usize) -> Option<Vec<(Arc<str>, u16)>> {
        (0..n)
            .map(|k| crate::cluster::tags::tag(n, k).map(|(tag, slot)| (Arc::from(tag), slot)))
            .collect()
    }

    /// A lock over `nodes`, once each is parsed: no server twice, at
    /// least one node, `config` valid for their number.
    fn assemble(nodes: Vec<Node>, config: Config) -> Result<Redlock> {
        let mut servers = std::collections::HashMap::new();
        for (index, node) in nodes.iter().enumerate() {
            if let Some(first) = servers.insert(node.server().to_owned(), index) {
                return Err(Error::Config(format!(
                    "nodes {first} and {index} are the same server ({}), whatever their \
                     databases: each vote must come from an independent Redis master",
                    node.server()
                )));
            }
        }
        let parsed: Vec<Arc<Node>> = nodes.into_iter().map(Arc::new).collect();
        if parsed.is_empty() {
            return Err(Error::Config(
                "no nodes given: pass the URLs of independent Redis masters (5 is typical)"
                    .to_owned(),
            ));
        }
        let quorum = config.validate(parsed.len())?;
        if let Some(warning) = crate::check::node_count_warning(parsed.len()) {
            tracing::warn!(%warning, "redquorum node count");
        }
        let notifications = Notifications::new(
            parsed.iter().map(|n| n.feed_source()).collect::<Vec<_>>(),
            config.node_timeout(),
            config.connect_timeout(),
            quorum,
        );
        let nodes: Arc<[Arc<Node>]> = parsed.into();
        let background = Background::default();
        // Every node carries a clone of the one restart guard.
        if let Some(guard) = nodes.first().and_then(|n| n.restart_guard.as_ref()) {
            guard.peers.attach(&nodes, &background);
        }
        Ok(Redlock {
            shared: Arc::new(Shared::new(
                nodes,
                quorum,
                config,
                notifications,
                background,
            )),
        })
    }

    /// How many nodes must agree.
    ///
    /// ```
    /// let redlock = redquorum::Redlock::new(["redis://a:6379", "redis://b:6379", "redis://c:6379"])?;
    /// assert_eq!(redlock.quorum(), 2);
    /// # Ok::<(), redquorum::Error>(())
    /// ```
    pub fn quorum(&self) -> usize {
        self.shared.quorum()
    }

    /// How many nodes vote.
    ///
    /// ```
    /// let redlock = redquorum::Redlock::new(["redis://a:6379", "redis://b:6379", "redis://c:6379"])?;
    /// assert_eq!(redlock.node_count(), 3);
    /// # Ok::<(), redquorum::Error>(())
    /// ```
    pub fn node_count(&self) -> usize {
        self.shared.nodes().len()
    }

    /// Release-notification feeds running (feature `sim`).
    #[cfg(feature = "sim")]
    pub(crate) fn running_feeds(&self) -> usize {
        self.shared.running_feeds()
    }

    /// The config in force (its `Debug` shows every setting).
    ///
    /// ```
    /// let redlock = redquorum::Redlock::new(["redis://a:6379"])?;
    /// assert_eq!(redlock.config(), &redquorum::Config::default());
    /// # Ok::<(), redquorum::Error>(())
    /// ```
    pub fn config(&self) -> &Config {
        self.shared.config()
    }

    /// The Redis key that holds `resource`'s lock on every node,
    /// `{key_prefix}lock:{resource}`: for inspecting a lock (`GET`, `PTTL`)
    /// with other tools. Never write to it. On a Redis Cluster
    /// (`Redlock::cluster`, feature `cluster`) each node's key has its hash tag in front:
    /// `{tag}` then this name.
    ///
    /// ```
    /// let redlock = redquorum::Redlock::new(["redis://a:6379"])?;
    /// assert_eq!(redlock.lock_key("jobs"), "redquorum:lock:jobs");
    /// # Ok::<(), redquorum::Error>(())
    /// ```
    pub fn lock_key(&self, resource: &str) -> String {
        self.shared.lock_key(resource)
    }

    /// Start-up checks, to call at boot: every node answers as a master
    /// (`ROLE`), accepts our credentials, has `maxmemory-policy noeviction`,
    /// is not a Redis Cluster node (unless the lock runs over the cluster,
    /// `Redlock::cluster`), and no two URLs lead to the same server
    /// (`run_id`). Unreachable nodes fail the check only when fewer than a
    /// quorum of nodes are usable (answered, with warnings at most). The first acquisition runs the same checks in the
    /// background and logs problems with `tracing::warn!`.
    ///
    /// ```no_run
    /// use redquorum::{Error, Redlock};
    ///
    /// # async fn run(redlock: Redlock) {
    /// match redlock.check().await {
    ///     Ok(()) => {}
    ///     Err(Error::Misconfigured(problems)) => {
    ///         for p in problems { eprintln!("{p}"); }
    ///     }
    ///     Err(e) => eprintln!("{e}"),
    /// }
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Misconfigured`] with one [`NodeProblem`](crate::NodeProblem)
    /// per problem found, each naming its node.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn check(&self) -> Result<()> {
        crate::lock::run_checks(&self.shared).await
    }

    /// Per-node facts from the start-up checks (reachable, role, eviction
    /// policy, `run_id`, latency, problems), in node order, for tools that
    /// print a table. Never fails: an unreachable node is a row saying so.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) {
    /// let rows = redlock.check_report().await;
    /// assert_eq!(rows.len(), redlock.node_count());
    /// # }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn check_report(&self) -> Vec<NodeCheck> {
        crate::check::report(self.shared.nodes(), self.shared.config().fencing()).await
    }

    /// What every node holds for `resource` right now: per node, the
    /// holder's label ([`Config::with_holder_label`](crate::Config::with_holder_label))
    /// and a short id of its value, or a reentrant lock's owner and holds,
    /// the TTL, and the fence counter; and the holder a quorum agrees on.
    /// One read-only script per node; a node that cannot be read is shown
    /// as [`NodeHold::Unknown`](crate::NodeHold::Unknown). The lock value
    /// itself is never shown.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let seen = redlock.inspect("nightly-export").await?;
    /// println!("holder: {:?}, last token: {:?}", seen.holder(), seen.counter());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty resource name.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn inspect(&self, resource: &str) -> Result<crate::Inspection> {
        crate::keys::check_resources(&[resource])?;
        let prefix = self.shared.config().key_prefix();
        Ok(crate::inspect::inspect(
            self.shared.nodes(),
            self.shared.quorum(),
            resource,
            crate::keys::lock_key(prefix, resource),
            crate::keys::counter_key(prefix, resource),
        )
        .await)
    }

    /// Waits until every release and clean-up this `Redlock` (and its
    /// clones) runs in the background has finished: the releases of guards
    /// dropped without [`LockGuard::release`](crate::LockGuard::release), of cancelled `lock()` calls,
    /// and the calls to slow nodes still in flight after a round was
    /// decided. Each of them is bounded by the node timeout, twice it for
    /// a delete chained behind its node's previous call (it is sent once
    /// that call is over, at the latest at that call's deadline, and then
    /// has a node timeout of its own). The `Redlock` stays
    /// usable; work started meanwhile is waited for too. Live guards, their
    /// watchdogs and waiting `lock()` calls are not waited for, nor is work
    /// left on another runtime (one that only that runtime can run, and
    /// that ends with it): a `Redlock` used from several runtimes drains
    /// each one with a `shutdown()` on it.
    ///
    /// Call it before the runtime ends (the end of `#[tokio::main]`, a
    /// sync wrapper's `block_on`): a runtime that shuts down drops the
    /// spawned releases, and the keys they would have deleted then block
    /// the resource until their TTL.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.lock("job", std::time::Duration::from_secs(30)).await?;
    /// drop(guard); // released in a background task...
    /// redlock.shutdown().await; // ...which has finished now
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    #[doc(alias = "drain")]
    pub async fn shutdown(&self) {
        self.shared.background().idle().await;
    }
}
