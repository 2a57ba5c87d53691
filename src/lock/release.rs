//! Release: the release round of a held lock, the best-effort release
//! from synchronous code (`Drop`, which never blocks), and the clean-up of
//! an attempt that failed or was cancelled.

use std::sync::Arc;
use std::task::Poll;

use tokio::time::Instant;
use tracing::Instrument;

use super::{Ending, Held, Shared};
use crate::error::NodeReport;
use crate::node::kind::Kind;
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
            let locks = (&*self.resources, &self.keys);
            let after = (&*last, sent.as_ref());
            shared
                .release_handing_on(locks, &self.value, after, Some(self.in_a_row))
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

impl Shared {
    /// The release round of a lock of `resources` (its `keys`) held as
    /// `value`, each node's delete chained after that node's gate in
    /// `last`, telling `sent` (the deletes recorded in [`Shared::pending`]
    /// when some must wait). Polled once first, which hands the deletes
    /// that need not wait to their connections; with `in_a_row`, the lock
    /// is then handed on ([`hand_over`](Self::hand_over)): a waiter of
    /// this `Redlock` sends its `SET`s at once, each written after the
    /// delete on its connection (after the delete is sent, where it had to
    /// wait: acquisitions follow [`Shared::pending`]), so the lock changes
    /// hands in about one round from the release, not two.
    async fn release_handing_on(
        &self,
        (resources, keys): (&[String], &Arc<[String]>),
        value: &Arc<str>,
        (last, sent): (&Gates, Option<&Gates>),
        in_a_row: Option<u8>,
    ) -> Round {
        let after = (Leftover::Finish, last, sent);
        let mut round = std::pin::pin!(self.release_round(keys, value, after, Ending::Release));
        let first = std::future::poll_fn(|cx| Poll::Ready(round.as_mut().poll(cx))).await;
        if let Some(in_a_row) = in_a_row {
            self.hand_over(resources, value, in_a_row);
        }
        match first {
            Poll::Ready(round) => round,
            Poll::Pending => round.await,
        }
    }

    /// Wakes one waiter of this `Redlock` for each of `resources`, whose
    /// lock held as `value` has just had its deletes handed to the nodes'
    /// connections (or recorded in [`Shared::pending`], where a delete
    /// waits for the lock's previous call: the waiter's `SET` there
    /// follows it), the `in_a_row`-th hand-off in a row here, as if every
    /// node had announced the release: its gates are all open. Only
    /// for the locks whose release announces itself (not a reentrant
    /// hold), with release notifications on, and at most
    /// `IN_A_ROW` times in a row: then the nodes' announcements wake the
    /// waiters of every process alike.
    ///
    /// Best effort, and never a risk: the waiter's attempt is an ordinary
    /// one. Each `SET` lands after the delete on its connection; one that
    /// lands first (a connection being replaced) is refused, and an
    /// attempt short of a quorum releases what it got and waits again.
    pub(crate) fn hand_over(&self, resources: &[String], value: &str, in_a_row: u8) {
        #[cfg(feature = "sim")]
        if crate::controls::on(crate::testkit::sim::Control::NoHandOver) {
            return;
        }
        if !self.config.release_notifications() || !Kind::of_value(value).scripts().announces {
            return;
        }
        let prefix = self.config.key_prefix();
        let channels = resources.iter().map(|r| crate::keys::channel(prefix, r));
        self.notifications.released_here(channels, value, in_a_row);
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
/// flight that could otherwise land after it), handing the lock on as
/// [`Shared::release_handing_on`] does with `in_a_row` (`None`: the
/// clean-up of a cancelled attempt, handed to nobody), if a tokio runtime is
/// running on this thread. Without one the keys simply expire at their
/// TTL (logged at warn level). [`Redlock::shutdown`](crate::Redlock::shutdown)
/// waits for it.
pub(crate) fn spawn_release(
    shared: &Arc<Shared>,
    (resources, keys): (&Arc<[String]>, &Arc<[String]>),
    value: &Arc<str>,
    (before, in_a_row): (impl Future<Output = Gates> + Send + 'static, Option<u8>),
) {
    let resource = resources.first().map_or("", String::as_str);
    let span = spans::release(resource, shared.quorum, true);
    // Not sent until the task runs: an acquisition of the same lock follows.
    let sent = shared.pending_deletes(keys, true);
    let task = {
        let shared = Arc::clone(shared);
        let (resources, keys) = (Arc::clone(resources), Arc::clone(keys));
        let value = Arc::clone(value);
        let span = span.clone();
        async move {
            let start = Instant::now();
            let after = before.await;
            let locks = (&*resources, &keys);
            let round = shared
                .release_handing_on(locks, &value, (&after, sent.as_ref()), in_a_row)
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
            let before = std::future::ready(std::mem::take(&mut self.gates));
            let locks = (&self.resources, &self.keys);
            spawn_release(&self.shared, locks, &self.value, (before, None));
        }
    }
}
