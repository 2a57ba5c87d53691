//! Release: the release round of a held lock, the best-effort release
//! from synchronous code (`Drop`, which never blocks), and the clean-up of
//! an attempt that failed or was cancelled.

use std::sync::Arc;
use std::task::Poll;

use tokio::time::Instant;
use tracing::Instrument;

use super::{Ending, Held, Shared};
use crate::error::NodeReport;
use crate::quorum::{Decision, Gates, Leftover, Round};
use crate::spans::{self, End};

/// How the release of a held lock ended.
#[derive(Debug)]
pub(crate) enum Released {
    /// A quorum still held the lock, within its validity.
    Held,
    /// The validity had run out before the release, or more than N −
    /// quorum nodes answered that the lock is not ours.
    Expired,
    /// Neither: too few nodes answered to confirm the release. Each
    /// node's answer, in node order.
    Unconfirmed(Vec<NodeReport>),
}

impl Released {
    /// The outcome of spans and metrics: `released`, `expired` or
    /// `unconfirmed`.
    fn label(&self) -> &'static str {
        match self {
            Released::Held => "released",
            Released::Expired => "expired",
            Released::Unconfirmed(_) => "unconfirmed",
        }
    }

    /// How `round`, a release round, ended; `expired`: the validity had
    /// run out before it.
    fn of(round: &Round, shared: &Shared, expired: bool) -> Self {
        if expired {
            Released::Expired
        } else if round.decision == Decision::Granted {
            Released::Held
        } else if round.refused() > shared.nodes.len() - shared.quorum {
            Released::Expired
        } else {
            Released::Unconfirmed(round.reports(&shared.nodes))
        }
    }
}

impl Held {
    /// Marks the lock lost (its watchers stop) and deletes it on every node
    /// that still holds our value, each node's call chained after its call
    /// of the latest round, announcing the release to waiters.
    ///
    /// # Cancel safety
    ///
    /// The deletes already sent complete; compare-and-delete can never
    /// remove another owner's key.
    pub(crate) async fn release(&self, shared: &Shared) -> Released {
        let span = spans::release(self.resource(), shared.quorum, false);
        let start = Instant::now();
        let expired = self.remaining().is_zero();
        self.mark_ended();
        let round = async {
            let last = self.next_round().await;
            let sent = shared.pending_deletes(&self.keys, last.any_closed());
            shared
                .release_round(
                    &self.keys,
                    &self.value,
                    (Leftover::Finish, &last, sent.as_ref()),
                    Ending::Release,
                )
                .await
        }
        .instrument(span.clone())
        .await;
        let released = Released::of(&round, shared, expired);
        finish(&span, &round, &released, start);
        let meter = crate::metrics::lock(&shared.config, self.resource());
        meter.hold_ended(released.label(), self.acquired_at.elapsed());
        released
    }
}

/// Records how a release round ended on its span: `released` when a
/// quorum still held the lock, `expired`, or `unconfirmed`.
fn finish(span: &tracing::Span, round: &Round, released: &Released, start: Instant) {
    let end = End {
        outcome: released.label(),
        failed: !matches!(released, Released::Held),
        votes: Some((round.granted(), round.refused())),
        elapsed: start.elapsed(),
    };
    spans::finish(span, end);
}

/// Spawns a compare-and-delete of `keys` holding `value` on every node,
/// each chained after the node's call that `before` gives (the calls in
/// flight that could otherwise land after it), if a tokio runtime is
/// running on this thread. Without one the keys simply expire at their
/// TTL (logged at warn level). [`Redlock::shutdown`](crate::Redlock::shutdown)
/// waits for it.
pub(crate) fn spawn_release(
    shared: &Arc<Shared>,
    (resource, keys): (&str, &Arc<[String]>),
    value: &Arc<str>,
    before: impl Future<Output = Gates> + Send + 'static,
) {
    let span = spans::release(resource, shared.quorum, true);
    // Not sent until the task runs: an acquisition of the same lock follows.
    let sent = shared.pending_deletes(keys, true);
    let task = {
        let shared = Arc::clone(shared);
        let keys = Arc::clone(keys);
        let value = Arc::clone(value);
        let span = span.clone();
        async move {
            let start = Instant::now();
            let after = before.await;
            let round = shared
                .release_round(
                    &keys,
                    &value,
                    (Leftover::Finish, &after, sent.as_ref()),
                    Ending::Release,
                )
                .await;
            let released = Released::of(&round, &shared, false);
            finish(&span, &round, &released, start);
        }
    };
    if !shared.background.spawn(task.instrument(span)) {
        tracing::warn!(
            keys = ?keys,
            "no tokio runtime to release the lock from Drop; its keys expire at their TTL"
        );
    }
}

/// Releases an attempt's keys if the attempt is dropped (cancelled) before
/// it either hands them to a guard or releases them itself.
pub(crate) struct ReleaseOnDrop {
    shared: Arc<Shared>,
    resources: Arc<[String]>,
    keys: Arc<[String]>,
    value: Arc<str>,
    /// When the attempt's calls to each node are over.
    pub(crate) gates: Gates,
    armed: bool,
}

impl ReleaseOnDrop {
    pub(crate) fn arm(
        shared: &Arc<Shared>,
        (resources, keys): (&Arc<[String]>, &Arc<[String]>),
        value: &Arc<str>,
    ) -> Self {
        ReleaseOnDrop {
            shared: Arc::clone(shared),
            resources: Arc::clone(resources),
            keys: Arc::clone(keys),
            value: Arc::clone(value),
            gates: Gates::default(),
            armed: true,
        }
    }

    /// Releases a failed attempt's keys on every node, each after that
    /// node's call of the attempt (a `SET` may have landed where no answer
    /// came), and disarms. The attempt answers at its decision, not after
    /// the slowest node's delete: the round is polled once here, which
    /// hands the deletes of the nodes that need not wait to their
    /// connections (a later call of this `Redlock` to those nodes is
    /// written after them), and then goes on in a background task that
    /// [`Redlock::shutdown`](crate::Redlock::shutdown) waits for. Returns,
    /// per node, when the delete has been sent (for the deletes that must
    /// first wait for their node's call of the attempt): the next attempt
    /// of the same `lock()` sends its call to such a node only then, not
    /// once the delete is answered, so that this attempt's own key never
    /// refuses it.
    /// Announces nothing: contenders that split the vote back off for
    /// their retry delay instead of waking each other in a loop. With
    /// `mark` (the attempt's `lock()` will wait with release
    /// notifications), the locks it lost are marked as awaited, so that
    /// their releases announce themselves.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it never waits (the one poll returns at once).
    pub(crate) async fn release_failed(mut self, mark: bool) -> Gates {
        let shared = Arc::clone(&self.shared);
        let sent = shared.deletes_sent(self.gates.any_closed());
        let cleaned = sent.clone().unwrap_or_default();
        let task = {
            let shared = Arc::clone(&shared);
            let (keys, value) = (Arc::clone(&self.keys), Arc::clone(&self.value));
            let after = std::mem::take(&mut self.gates);
            async move {
                let ending = Ending::Cleanup { mark };
                let after = (Leftover::Wait, &after, sent.as_ref());
                shared.release_round(&keys, &value, after, ending).await;
            }
        };
        let resources = Arc::clone(&self.resources);
        let resource = resources.first().map_or("", String::as_str);
        let mut task = Box::pin(task.instrument(spans::cleanup(resource, shared.quorum)));
        self.disarm();
        let done = std::future::poll_fn(|cx| Poll::Ready(task.as_mut().poll(cx).is_ready())).await;
        if !done && !shared.background.spawn(task) {
            tracing::warn!(
                resource,
                "no tokio runtime to clean up a failed attempt; its keys expire at their TTL"
            );
        }
        cleaned
    }

    /// The keys are accounted for: nothing to do on drop. Returns when the
    /// attempt's calls are over, for whoever releases the keys later.
    pub(crate) fn disarm(mut self) -> Gates {
        self.armed = false;
        std::mem::take(&mut self.gates)
    }
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        if self.armed {
            tracing::debug!(keys = ?self.keys, "acquire cancelled; releasing its keys");
            let resource = self.resources.first().map_or("", String::as_str);
            spawn_release(
                &self.shared,
                (resource, &self.keys),
                &self.value,
                std::future::ready(std::mem::take(&mut self.gates)),
            );
        }
    }
}
