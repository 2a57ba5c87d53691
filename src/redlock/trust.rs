//! [`Redlock::init_nodes`]: the restart guard's bootstrap.

use super::Redlock;
use crate::error::{NodeOutcome, NodeReport};

impl Redlock {
    /// Marks every node trusted at once by the restart guard
    /// ([`Config::with_restart_guard`](crate::Config::with_restart_guard)):
    /// each node's record names its live process (`run_id`) with a trust
    /// period that began at 0, so it votes without waiting out the
    /// quarantine. Returns one report per node, in node order:
    /// [`NodeOutcome::Granted`] where the record was written, else why not
    /// (that node keeps its quarantine). Each node then keeps this
    /// client's quarantine (every client must announce the same one); with
    /// the guard off it keeps the one it had, or the first guarded vote
    /// records its own.
    ///
    /// **Only for an operator who knows that no lock taken through these
    /// nodes can be live**: a brand-new cluster, or one whose every client
    /// has been stopped for longer than the longest TTL. Never infer it
    /// from "no lock key on any node": a redeploy of every node produces
    /// exactly that while a holder elsewhere still believes it holds its
    /// lock, and the next client would be granted it too. It also declares
    /// the nodes' fence counters complete (see the README's fencing
    /// section). When in doubt, wait the quarantine out instead.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redquorum::{Config, Redlock};
    ///
    /// # async fn run() -> redquorum::Result<()> {
    /// let config = Config::default().with_restart_guard(Duration::from_secs(60));
    /// let redlock = Redlock::with_config(["redis://a/", "redis://b/", "redis://c/"], config)?;
    /// // A brand-new cluster: nothing can be locked yet, so skip the wait.
    /// for report in redlock.init_nodes().await {
    ///     if *report.outcome() != redquorum::NodeOutcome::Granted {
    ///         eprintln!("not marked, waits out its quarantine: {report}");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave some nodes marked and others not;
    /// calling it again is harmless.
    pub async fn init_nodes(&self) -> Vec<NodeReport> {
        let key = crate::keys::guard_key(self.shared.config().key_prefix());
        let marks = self.shared.nodes().iter().map(|node| {
            let key = key.as_str();
            async move {
                let outcome = match node.mark_trusted(node.restart_guard.as_ref(), key).await {
                    Ok(()) => NodeOutcome::Granted,
                    Err(e) => e.outcome(),
                };
                NodeReport::new(node.name(), outcome)
            }
        });
        let reports = futures_util::future::join_all(marks).await;
        let marked = reports
            .iter()
            .filter(|r| *r.outcome() == crate::NodeOutcome::Granted)
            .count();
        tracing::info!(
            marked,
            nodes = reports.len(),
            "restart guard: nodes marked trusted"
        );
        reports
    }
}
