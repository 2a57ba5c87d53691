//! [`Redlock::cluster`]: a lock over the masters of one Redis Cluster
//! (feature `cluster`).

use std::sync::Arc;

use redis::IntoConnectionInfo;

use super::Redlock;
use crate::cluster::placement::Placement;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::node::Node;

impl Redlock {
    /// A lock whose `nodes` votes are `nodes` keys on as many distinct
    /// masters of the Redis Cluster that `seed` belongs to (feature
    /// `cluster`).
    ///
    /// Node `k` of the lock owns a hash tag that hashes to the middle of
    /// the `k`-th of `nodes` equal slot ranges, and every key it writes
    /// (lock keys, the restart guard's record, fence counters) carries that
    /// tag: all land in one slot, served by one master. The tags depend on
    /// `nodes` alone, so every client of a lock must pass the same `nodes`
    /// (and the same [`Config::with_key_prefix`]). A cluster with at least
    /// `nodes` masters and its slots split evenly (as `redis-cli --cluster
    /// create` and `rebalance` leave them) gives each node its own master.
    ///
    /// The layout is read from the cluster (`CLUSTER SLOTS`) now, again as
    /// soon as a node meets a redirection, a cluster that is down or a
    /// lost connection, and every five seconds in any case. A node whose
    /// slot moves to a master no other node uses follows it (with the
    /// restart guard on, a replica promoted after a failover is a new
    /// `run_id` behind the slot: it starts a quarantine). While two nodes'
    /// slots are served by one master, every acquisition is refused with
    /// [`Error::Placement`]: one master's loss must never take two votes.
    ///
    /// Turn the restart guard on ([`Config::with_restart_guard`]): a
    /// replica promoted by the cluster may have missed the newest lock
    /// keys, and only the guard's quarantine keeps it from granting them
    /// again. Without it a warning is logged.
    ///
    /// Must be called inside a tokio runtime: it reads the layout, and
    /// spawns the task that keeps it up to date (it ends with the lock).
    ///
    /// ```no_run
    /// use redquorum::{Config, Redlock};
    ///
    /// # async fn run() -> redquorum::Result<()> {
    /// let redlock = Redlock::cluster("redis://10.0.0.1:7000/", 3, Config::default()).await?;
    /// assert_eq!(redlock.quorum(), 2);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::Config`] for an unusable seed URL, fewer than 3 nodes,
    ///   or a config value out of range.
    /// - [`Error::Placement`] if no server of the cluster gave its layout,
    ///   a node's slot has no master, or two nodes' slots share a master.
    pub async fn cluster(
        seed: impl IntoConnectionInfo,
        nodes: usize,
        config: Config,
    ) -> Result<Redlock> {
        let seed = seed
            .into_connection_info()
            .map_err(|e| Error::Config(format!("the cluster's seed URL is unusable: {e}")))?;
        if nodes < 3 {
            return Err(Error::Config(format!(
                "a lock over a cluster needs at least 3 nodes, on 3 masters, not {nodes}: with \
                 fewer, one master's loss takes the quorum"
            )));
        }
        config.validate(nodes)?;
        if config.quarantine().is_none() {
            tracing::warn!(
                "redquorum cluster: the restart guard is off; a failover to a replica that \
                 missed the newest lock keys can grant a held lock again \
                 (Config::with_restart_guard)"
            );
        }
        let placement =
            Placement::new(nodes, seed, config.connect().clone(), config.node_timeout())
                .ok_or_else(|| Error::Placement(format!("no hash tags found for {nodes} nodes")))?;
        let shards = placement.read().await.map_err(Error::Placement)?;
        let masters = placement.take(shards);
        if let Some(refusal) = placement.refusal() {
            return Err(Error::Placement(refusal));
        }
        let guard = Self::restart_guard(&config);
        let mut parsed = Vec::new();
        for (k, (tag, slot)) in placement.tags.iter().enumerate() {
            let Some((_, master)) = masters.iter().find(|(j, _)| *j == k) else {
                return Err(Error::Placement(format!(
                    "node {k}'s slot {slot} (hash tag {tag}) has no master: every slot of the \
                     cluster must be served"
                )));
            };
            let node = Node::new(
                k,
                placement.info(master),
                config.node_timeout(),
                config.connect(),
            )?
            .with_restart_guard(guard.clone())
            .in_cluster(Arc::clone(tag), *slot);
            parsed.push(node);
        }
        let redlock = Redlock::assemble(parsed, config)?;
        let placement = Arc::new(placement);
        placement.watch(Arc::downgrade(redlock.shared.nodes()));
        let _ = redlock.shared.placement.set(placement);
        Ok(redlock)
    }
}
