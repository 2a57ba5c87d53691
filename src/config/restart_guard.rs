//! The restart guard's setting: the longest TTL any lock may have, from
//! which the quarantine of a node that may have forgotten keys follows.

use std::time::Duration;

use super::{Config, MAX_TTL};
use crate::error::{Error, Result};

impl Config {
    /// Turns on the restart guard: a node that may have forgotten keys (a
    /// restart under any persistence mode, a failover to another process
    /// behind its address, `FLUSHALL`, or a node never seen before) refuses
    /// to vote until every lock it may have granted has expired, and says
    /// so with [`NodeOutcome::Quarantined`](crate::NodeOutcome::Quarantined).
    ///
    /// Each node keeps a record without TTL, `{prefix}restart-guard:node`,
    /// with the identity (`run_id`) and replication id (`master_replid`) of
    /// the process that began its trust period and when that began (the
    /// node's clock). Every script that can grant a vote first reads the
    /// live `run_id` (`INFO server`) and `master_replid` (`INFO
    /// replication`); when either differs from the record (a restart, a
    /// failover to another process, or a failover and failback to the same
    /// one, which was a replica meanwhile), or there is no record, the node
    /// starts a new trust period and refuses to vote for the quarantine,
    /// `max_ttl * (1 + drift_factor) + drift_padding`.
    ///
    /// **What the quarantine rests on.** It is timed on the node's wall
    /// clock (`TIME`), from when the trust period began: a clock stepped
    /// forward meanwhile (an NTP step just after a reboot, say) shortens it
    /// by the step. Start Redis only once the host's time is synchronised
    /// (with systemd, order it after `time-sync.target` with a wait-sync
    /// service enabled), and keep time sync slewing, not stepping. Where
    /// `INFO replication` shows no `master_replid` (some managed services),
    /// the record is compared by `run_id` alone, and a failover and
    /// failback that keeps the `run_id` goes unseen.
    ///
    /// **The quarantine is a deployment constant**: give every client of
    /// the nodes the same `max_ttl` and drift settings. The record keeps
    /// the quarantine of the client that began the trust period, and a
    /// node refuses the votes and extensions of a client that announces
    /// another one ([`NodeOutcome::QuarantineMismatch`](crate::NodeOutcome::QuarantineMismatch),
    /// a misconfiguration that [`Redlock::lock`](crate::Redlock::lock)
    /// does not retry and [`Redlock::check`](crate::Redlock::check) fails
    /// on). That client then gives the longer of the two quarantines to
    /// every node still in quarantine, so that a node restarted empty whose
    /// first voter announced the shorter one waits the longer one out.
    ///
    /// Why no node can simply keep the largest quarantine ever announced:
    /// the record is lost with the very restart it guards against, so a
    /// restarted node learns its quarantine from its first voter. A client
    /// with a shorter `max_ttl` that met only restarted nodes would set it
    /// and could take a lock that a client with a longer one still holds.
    /// Refusing every mismatch and spreading the longer value closes that
    /// whenever one node that remembers the longer value answers the
    /// shorter client before its quarantine ends (in particular whenever a
    /// minority of nodes restarted). The one case no node can tell: a
    /// majority restarted empty and every node that remembers the longer
    /// value is out of that client's reach until then. So mixed values are
    /// refused, never relied on. [`Redlock::set_node_quarantine`](crate::Redlock::set_node_quarantine)
    /// makes every node keep this client's quarantine once the fleet agrees
    /// on it again.
    ///
    /// With the guard on, every TTL above `max_ttl` (for
    /// [`Redlock::lock`](crate::Redlock::lock),
    /// [`LockGuard::extend`](crate::LockGuard::extend) and so the
    /// watchdog) is an [`Error::InvalidArgument`]. A new cluster waits one
    /// quarantine before its first lock, unless
    /// [`Redlock::init_nodes`](crate::Redlock::init_nodes) marks its nodes
    /// trusted at once.
    ///
    /// Cost: one `INFO server` inside each vote script (a few µs of server
    /// CPU), no extra round trip, no write per acquisition. Off, the plain
    /// acquisition stays a plain `SET NX PX`.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let config = redquorum::Config::default().with_restart_guard(Duration::from_secs(60));
    /// // 60 s * 1.01 + 2 ms
    /// assert_eq!(config.quarantine(), Some(Duration::from_millis(60_602)));
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_restart_guard(mut self, max_ttl: Duration) -> Self {
        self.restart_guard = Some(max_ttl);
        self
    }

    /// The longest TTL a lock may have, when the restart guard is on.
    pub(crate) fn restart_guard(&self) -> Option<Duration> {
        self.restart_guard
    }

    /// How long a node that may have forgotten keys refuses to vote:
    /// `max_ttl * (1 + drift_factor) + drift_padding`, in whole
    /// milliseconds rounded up; `None` when the restart guard is off.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let config = redquorum::Config::default()
    ///     .with_restart_guard(Duration::from_millis(300))
    ///     .with_drift(0.1, Duration::from_millis(5));
    /// assert_eq!(config.quarantine(), Some(Duration::from_millis(335)));
    /// ```
    pub fn quarantine(&self) -> Option<Duration> {
        let max_ttl = self.restart_guard?;
        let drift = self.drift_for(max_ttl);
        let q = max_ttl.saturating_add(drift);
        let millis = q.as_nanos().div_ceil(1_000_000);
        Some(Duration::from_millis(
            u64::try_from(millis).unwrap_or(u64::MAX),
        ))
    }

    /// Checks `max_ttl`: not zero, at most [`MAX_TTL`].
    pub(crate) fn validate_restart_guard(&self) -> Result<()> {
        match self.restart_guard {
            Some(max_ttl) if max_ttl < Duration::from_millis(1) => Err(Error::Config(format!(
                "restart guard max_ttl {max_ttl:?} is below 1 ms: no lock could be taken; \
                 give the longest TTL your locks use, e.g. 60s"
            ))),
            Some(max_ttl) if max_ttl > MAX_TTL => Err(Error::Config(format!(
                "restart guard max_ttl {max_ttl:?} is longer than MAX_TTL ({} days); \
                 give the longest TTL your locks use, e.g. 60s",
                MAX_TTL.as_secs() / 86_400
            ))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_or_huge_max_ttl_is_a_config_error_and_a_sane_one_passes() {
        let zero = Config::default().with_restart_guard(Duration::ZERO);
        let err = zero.validate_restart_guard().unwrap_err().to_string();
        assert!(err.contains("max_ttl"), "{err}");
        let huge = Config::default().with_restart_guard(MAX_TTL + Duration::from_secs(1));
        assert!(huge.validate_restart_guard().is_err());
        let sane = Config::default().with_restart_guard(Duration::from_secs(30));
        assert!(sane.validate_restart_guard().is_ok());
        assert!(Config::default().validate_restart_guard().is_ok());
    }

    #[test]
    fn the_quarantine_is_max_ttl_plus_its_drift_rounded_up_to_a_millisecond() {
        let config = Config::default()
            .with_restart_guard(Duration::from_millis(1000))
            .with_drift(0.0105, Duration::from_micros(1500));
        // 1000 + 10.5 + 1.5 = 1012 ms
        assert_eq!(config.quarantine(), Some(Duration::from_millis(1012)));
        assert_eq!(Config::default().quarantine(), None);
    }
}
