//! [`Redlock::set_node_quarantine`]: the operator's remedy for a node
//! that keeps another restart-guard quarantine than the fleet's.

use super::Redlock;
use crate::error::{Error, NodeOutcome, NodeReport, Result};

impl Redlock {
    /// Makes every node keep this client's restart-guard quarantine
    /// ([`Config::quarantine`](crate::Config::quarantine)), whatever it
    /// kept. Returns one report per node, in node order:
    /// [`NodeOutcome::Granted`] where the node now keeps it, else why not.
    ///
    /// A node keeps the quarantine of the client that began its trust
    /// period, and refuses clients that announce another
    /// ([`NodeOutcome::QuarantineMismatch`]); a node still in quarantine
    /// gets the longer of two quarantines met. So one client with a huge
    /// `max_ttl` (or a fleet that changed its value) leaves nodes that
    /// refuse everyone else, and quarantines that long. This sets them
    /// back: a node in quarantine then waits this client's quarantine from
    /// the start of its trust period, shorter or longer than before; a
    /// node with no record for its process begins one now, as a vote would.
    ///
    /// **Only for an operator who knows that no lock with a TTL above this
    /// client's `max_ttl` can be live**: every client now uses this value,
    /// and those that used a longer one have been stopped for longer than
    /// it. A node that restarted while such a lock was live, and is told to
    /// wait less, can grant it again. It touches neither the fence counters
    /// nor the locks.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redquorum::{Config, Redlock};
    ///
    /// # async fn run() -> redquorum::Result<()> {
    /// let config = Config::default().with_restart_guard(Duration::from_secs(60));
    /// let redlock = Redlock::with_config(["redis://a/", "redis://b/", "redis://c/"], config)?;
    /// for report in redlock.set_node_quarantine().await? {
    ///     if *report.outcome() != redquorum::NodeOutcome::Granted {
    ///         eprintln!("not set: {report}");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] with the restart guard off (there is no
    /// quarantine to give).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave some nodes set and others not;
    /// calling it again is harmless.
    pub async fn set_node_quarantine(&self) -> Result<Vec<NodeReport>> {
        if self.shared.restart_guard().is_none() {
            return Err(Error::InvalidArgument(
                "set_node_quarantine needs the restart guard on: \
                 Config::with_restart_guard(max_ttl) with the fleet's max_ttl"
                    .to_owned(),
            ));
        }
        let sets = self.shared.nodes().iter().map(|node| async move {
            let outcome = match &node.restart_guard {
                Some(guard) => match node.set_quarantine(guard).await {
                    Ok(()) => NodeOutcome::Granted,
                    Err(e) => e.outcome(),
                },
                None => NodeOutcome::Pending,
            };
            NodeReport::new(node.name(), outcome)
        });
        let reports = futures_util::future::join_all(sets).await;
        let set = reports
            .iter()
            .filter(|r| *r.outcome() == crate::NodeOutcome::Granted)
            .count();
        tracing::warn!(
            set,
            nodes = reports.len(),
            quarantine = ?self.shared.config().quarantine(),
            "restart guard: the nodes' quarantine set by an operator"
        );
        Ok(reports)
    }
}
