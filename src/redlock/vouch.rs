//! [`Redlock::vouch_fence_counters`]: the operator's remedy for fence
//! counters the restart guard no longer knows intact.

use super::Redlock;
use crate::error::{Error, NodeOutcome, NodeReport, Result};

/// Which fence counters [`Redlock::vouch_fence_counters`] vouches for.
///
/// ```
/// use redquorum::FenceCounters;
///
/// let two = FenceCounters::Of(&["ledger", "payouts"]);
/// assert_ne!(two, FenceCounters::All);
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceCounters<'a> {
    /// The counters of these resources: at least one, no empty name.
    Of(&'a [&'a str]),
    /// Every counter on each node, including those of resources never
    /// fenced (whose counters a restart may have lost as well).
    All,
}

impl Redlock {
    /// Vouches for the fence counters of `counters` on every node: each
    /// node records them as known intact in its current trust period, as
    /// the write-back of a token does. Nothing else changes: no quarantine
    /// ends sooner, no lock or counter is written. Returns one report per
    /// node, in node order: [`NodeOutcome::Granted`] where it was recorded,
    /// else why not.
    ///
    /// With the restart guard and fencing on, a node counts in the fenced
    /// read only if it was marked trusted at once or the resource's counter
    /// was written back to it during its current trust period. Every
    /// restart begins a new trust period, whatever the persistence, so when
    /// more nodes than a quorum can spare (more than N − quorum) have
    /// restarted since a resource's last fenced acquisition, even cleanly
    /// with every counter intact, that resource's fenced acquisitions fail
    /// with [`NodeOutcome::CountersUnknown`] until its counters are vouched
    /// for. A rolling restart of a majority with no fenced lock of the
    /// resource in between is enough.
    ///
    /// **Only for an operator who knows that these nodes' counters
    /// survived**: `appendonly yes` with `appendfsync always`, no
    /// `FLUSHALL`, no eviction (`maxmemory-policy noeviction`), no failover
    /// to a replica that lagged. A node that lost a counter and is vouched
    /// for can let a token go backwards.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redquorum::{Config, FenceCounters, Redlock};
    ///
    /// # async fn run() -> redquorum::Result<()> {
    /// let config = Config::default().with_restart_guard(Duration::from_secs(60)).with_fencing(true);
    /// let redlock = Redlock::with_config(["redis://a/", "redis://b/", "redis://c/"], config)?;
    /// // The nodes run appendfsync always and were restarted cleanly.
    /// for report in redlock.vouch_fence_counters(FenceCounters::Of(&["ledger"])).await? {
    ///     if *report.outcome() != redquorum::NodeOutcome::Granted {
    ///         eprintln!("not vouched: {report}");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] with the restart guard off (every counter
    /// counts then), no resource or an empty name.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave some nodes vouched for and others
    /// not; calling it again is harmless.
    pub async fn vouch_fence_counters(
        &self,
        counters: FenceCounters<'_>,
    ) -> Result<Vec<NodeReport>> {
        self.require_guard("vouch_fence_counters")?;
        let FenceCounters::Of(resources) = counters else {
            return Ok(self.vouch(&[], &["(all)"]).await);
        };
        crate::keys::check_resources(resources)?;
        let prefix = self.shared.config().key_prefix();
        let keys: Vec<String> = crate::keys::unique_names(resources)
            .iter()
            .map(|r| crate::keys::counter_key(prefix, r))
            .collect();
        Ok(self.vouch(&keys, resources).await)
    }

    fn require_guard(&self, call: &str) -> Result<()> {
        if self.shared.restart_guard().is_none() {
            return Err(Error::InvalidArgument(format!(
                "{call} needs the restart guard on (without it every fence counter counts): \
                 Config::with_restart_guard(max_ttl) with the fleet's max_ttl"
            )));
        }
        Ok(())
    }

    /// Vouches for `counters` (keys; none: all) on every node.
    async fn vouch(&self, counters: &[String], resources: &[&str]) -> Vec<NodeReport> {
        let vouches = self.shared.nodes().iter().map(|node| async move {
            let outcome = match &node.restart_guard {
                Some(guard) => match node.vouch_counters(guard, counters).await {
                    Ok(()) => NodeOutcome::Granted,
                    Err(e) => e.outcome(),
                },
                None => NodeOutcome::Pending,
            };
            NodeReport::new(node.name(), outcome)
        });
        let reports = futures_util::future::join_all(vouches).await;
        let vouched = reports
            .iter()
            .filter(|r| *r.outcome() == crate::NodeOutcome::Granted)
            .count();
        tracing::warn!(
            vouched,
            nodes = reports.len(),
            ?resources,
            "restart guard: fence counters vouched for by an operator"
        );
        reports
    }
}
