//! [`Held`]: what a held lock is (resources, keys, value, tokens, TTL) and
//! its [`Status`], shared by the guard and the tasks working for it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::quorum::Gates;
use crate::ttl::Ttl;

/// The lock's state, shared with whoever watches it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Status {
    /// Past this instant the lock may belong to someone else.
    pub(crate) deadline: Instant,
    /// Over before the deadline: released, or known lost (an extension
    /// found it gone).
    pub(crate) ended: bool,
}

/// What a guard holds, shared with background tasks working for it.
pub(crate) struct Held {
    pub(crate) resources: Arc<[String]>,
    pub(crate) keys: Arc<[String]>,
    pub(crate) value: Arc<str>,
    pub(crate) token: Option<u64>,
    /// One fencing token per resource, in the order of `resources`.
    pub(crate) tokens: Option<Arc<[u64]>>,
    pub(crate) status: watch::Sender<Status>,
    /// Per node, when the latest round's call (the acquisition's or the
    /// last extension's) is over, behind the lock that serialises extension
    /// rounds and the release: see [`Held::next_round`].
    rounds: tokio::sync::Mutex<Gates>,
    /// The TTL the lock was acquired with: the watchdog extends to it.
    pub(crate) ttl: Ttl,
    /// When the acquisition started (limits the watchdog's `max_hold`).
    pub(crate) acquired_at: Instant,
    /// How many releases in a row within this `Redlock` handed the lock on
    /// before it came to this holder (0: not handed on; see
    /// [`Shared::hand_over`](super::Shared::hand_over)).
    pub(crate) in_a_row: u8,
}

impl Held {
    /// A lock acquired in a round that started at `start` with `ttl`: valid
    /// until `start + ttl - drift`.
    pub(crate) fn acquired(
        resources: &Arc<[String]>,
        keys: &Arc<[String]>,
        value: Arc<str>,
        tokens: Option<Arc<[u64]>>,
        ttl: &Ttl,
        start: Instant,
        gates: Gates,
    ) -> Self {
        let (status, _) = watch::channel(Status {
            deadline: ttl.deadline(start),
            ended: false,
        });
        Held {
            resources: Arc::clone(resources),
            keys: Arc::clone(keys),
            value,
            token: tokens.as_ref().and_then(|t| t.first().copied()),
            tokens,
            status,
            rounds: tokio::sync::Mutex::new(gates),
            ttl: ttl.clone(),
            acquired_at: start,
            in_a_row: 0,
        }
    }

    /// The locked resource (the first one, for a multi-resource lock).
    pub(crate) fn resource(&self) -> &str {
        self.resources.first().map_or("", String::as_str)
    }

    /// Validity left; zero once expired or known lost.
    pub(crate) fn remaining(&self) -> Duration {
        let status = self.status();
        if status.ended {
            return Duration::ZERO;
        }
        status.deadline.saturating_duration_since(Instant::now())
    }

    pub(crate) fn status(&self) -> Status {
        *self.status.borrow()
    }

    /// The hold is over (released, or dropped): whoever watches it stops.
    pub(crate) fn mark_ended(&self) {
        self.status.send_modify(|s| s.ended = true);
    }

    /// Marks the lock lost because it could not be kept; counted once, by
    /// whoever finds it first (an extension or the watchdog).
    pub(crate) fn lose(&self, config: &crate::config::Config) {
        if self
            .status
            .send_if_modified(|s| !std::mem::replace(&mut s.ended, true))
        {
            crate::metrics::lock(config, self.resource()).lost();
        }
    }

    /// The guard was dropped without a release: the hold ends here.
    pub(crate) fn dropped(&self, config: &crate::config::Config) {
        self.mark_ended();
        let meter = crate::metrics::lock(config, self.resource());
        meter.hold_ended("dropped", self.acquired_at.elapsed());
    }

    /// Waits for the end of any other extension round of this lock and
    /// returns the lock that keeps the next one from starting until this
    /// one is done, holding the latest round's gates: chain the new round
    /// after them ([`Chain::after`](crate::quorum::Chain)) and store its own.
    /// So rounds reach each node in the order they start: no late `SET` or
    /// `PEXPIRE` (nor its re-send after `NOSCRIPT`) lands after a newer one,
    /// and the deadline is always that of the round the nodes applied last.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the gates stay recorded until a round replaces them.
    pub(crate) async fn next_round(&self) -> tokio::sync::MutexGuard<'_, Gates> {
        self.rounds.lock().await
    }
}
