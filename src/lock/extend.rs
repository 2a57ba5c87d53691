//! One extension round, shared by [`LockGuard::extend`](crate::LockGuard::extend)
//! and the watchdog: compare-and-pexpire on every node, then (when asked
//! for) re-seeding the nodes that lost the key.

use tokio::time::Instant;
use tracing::Instrument;

use super::{Held, Shared};
use crate::error::{Attempts, Error, Result};
use crate::node::commands::Found;
use crate::node::kind::Kind;
use crate::node::request::Request;
use crate::quorum::{Decision, Gates, Leftover};
use crate::spans::{self, End};
use crate::ttl::Ttl;

/// One node's extension reply, read.
fn found_in(reply: i64) -> crate::node::NodeResult<Found> {
    Ok(Found::from_reply(reply))
}

impl Held {
    /// One extension round to `ttl` from now. Rounds of one lock run one at
    /// a time, and each node's call waits for that node's call of the
    /// previous round (acquisition or extension), within the node timeout.
    ///
    /// On success the deadline moves to `t0 + ttl - drift`. On failure it
    /// never moves later than either the old or the new TTL allows; when a
    /// quorum of nodes no longer holds our value the lock is marked lost.
    /// With `reseed_restarted_nodes` on, nodes that lost the key get it
    /// back, but only once the round reached a quorum with validity left.
    ///
    /// # Errors
    ///
    /// [`Error::Expired`] when the deadline has passed (no node is
    /// contacted) or a quorum no longer holds our value;
    /// [`Error::NotAcquired`] when too many nodes failed or answered late.
    pub(crate) async fn extend_round(&self, shared: &Shared, ttl: &Ttl) -> Result<()> {
        let span = spans::extend(self.resource(), shared.quorum);
        let start = Instant::now();
        let deadline = self.status().deadline;
        let result = self.round(shared, ttl).instrument(span.clone()).await;
        let margin = deadline.saturating_duration_since(Instant::now());
        let meter = crate::metrics::lock(&shared.config, self.resource());
        meter.extension(result.is_ok().then_some(margin));
        let outcome = match &result {
            Ok(()) => "extended",
            Err(Error::Expired) if self.status().ended => "gone",
            Err(Error::Expired) => "expired",
            Err(Error::NotAcquired(a)) if a.reason() == crate::Reason::ValidityExhausted => {
                "validity_exhausted"
            }
            Err(_) => "not_confirmed",
        };
        let end = End {
            outcome,
            failed: result.is_err(),
            votes: None,
            elapsed: start.elapsed(),
        };
        spans::finish(&span, end);
        result
    }

    /// The wait for this lock's other extension rounds
    /// ([`next_round`](Held::next_round)). Under the simulation's
    /// `RacingExtensions` control (a negative control), none: rounds race.
    async fn serialise(&self) -> Option<tokio::sync::MutexGuard<'_, Gates>> {
        #[cfg(feature = "sim")]
        if crate::controls::on(crate::testkit::sim::Control::RacingExtensions) {
            return None;
        }
        Some(self.next_round().await)
    }

    /// [`extend_round`](Self::extend_round) inside its span.
    async fn round(&self, shared: &Shared, ttl: &Ttl) -> Result<()> {
        if self.remaining().is_zero() {
            return Err(Error::Expired);
        }
        // One round at a time, each node's call after its call of the last
        // round: a late SET or PEXPIRE must not land after this round's.
        let mut serial = self.serialise().await;
        let mut unchained = Gates::default();
        let last = serial.as_deref_mut().unwrap_or(&mut unchained);
        if self.remaining().is_zero() {
            return Err(Error::Expired);
        }
        let reseed =
            shared.config.reseed_restarted_nodes() && Kind::of_value(&self.value).scripts().reseeds;
        let start = Instant::now();
        let new_deadline = ttl.deadline(start);
        // While the round is in flight some nodes may already have the new
        // TTL: never claim more than it allows, even if it is shorter.
        self.status.send_if_modified(|s| {
            let lower = new_deadline < s.deadline;
            s.deadline = s.deadline.min(new_deadline);
            lower
        });
        let guard = shared.restart_guard();
        let request = if reseed {
            Request::extend_or_missing(&self.keys, &self.value, &ttl.millis, guard)
        } else {
            Request::extend(&self.keys, &self.value, &ttl.millis, guard)
        };
        // Both replies are integers: 1 extended, -1 missing (asked for
        // only when re-seeding), else foreign.
        let read = (
            found_in as fn(i64) -> _,
            Found::is_extended as fn(&_) -> bool,
        );
        let chained = (Leftover::Finish, shared.chain(last));
        let (mut round, found) = shared.value_round("extend", chained, request, read).await;
        spans::votes(round.granted(), round.refused());
        *last = std::mem::take(&mut round.gates);
        let validity = ttl.validity(start.elapsed());
        if round.decision == Decision::Granted && validity.is_some() {
            self.status.send_modify(|s| s.deadline = new_deadline);
            tracing::debug!(remaining = ?self.remaining(), "lock extended");
            if reseed {
                let missing: Vec<usize> = (found.iter().enumerate())
                    .filter(|(_, found)| **found == Some(Found::Missing))
                    .map(|(index, _)| index)
                    .collect();
                self.reseed(shared, ttl, &missing).await;
            }
            return Ok(());
        }
        // The deadline stays at the earlier of the old and the new one.
        if round.refused() > shared.nodes.len() - shared.quorum {
            self.lose(&shared.config);
            tracing::debug!("extend found the lock gone");
            return Err(Error::Expired);
        }
        let attempts = Attempts::new(
            self.resource(),
            1,
            shared.quorum,
            round.reports(&shared.nodes),
        )
        .with_validity_exhausted(round.decision == Decision::Granted)
        .of_extension();
        Err(Error::NotAcquired(Box::new(attempts)))
    }

    /// Second phase of an extension that reached a quorum: puts the lock
    /// back on the nodes (by index) where the key was missing.
    async fn reseed(&self, shared: &Shared, ttl: &Ttl, missing: &[usize]) {
        let request = Request::reseed(&self.keys, &self.value, &ttl.millis);
        let request = &request;
        let calls = missing.iter().filter_map(|&index| {
            let node = shared.nodes.get(index)?;
            Some(async move {
                let done = node
                    .send_bounded::<i64>(request)
                    .await
                    .map(|done| done == 1);
                (node.name(), done)
            })
        });
        for (node, done) in futures_util::future::join_all(calls).await {
            match done {
                Ok(true) => tracing::info!(
                    resource = self.resource(),
                    node,
                    remaining = ?self.remaining(),
                    "lock re-seeded on a node that had lost it"
                ),
                Ok(false) => tracing::warn!(
                    resource = self.resource(),
                    node,
                    "not re-seeded: another owner holds the key on this node"
                ),
                Err(e) => tracing::debug!(
                    resource = self.resource(),
                    node,
                    outcome = %e.outcome(),
                    "re-seed failed; the next extension tries again"
                ),
            }
        }
    }
}
