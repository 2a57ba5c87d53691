//! Best-effort release from synchronous code (`Drop`): never blocks, never
//! needs the caller to await anything.

use std::sync::Arc;

use crate::quorum::{Leftover, Stragglers};
use crate::redlock::Shared;

/// Waits for the acquire calls still in flight, so that a late `SET` can
/// never land after the release that follows it.
pub(crate) async fn settle(stragglers: Option<Stragglers>) {
    if let Some(stragglers) = stragglers {
        stragglers.await;
    }
}

/// Spawns a compare-and-delete of `keys` holding `value` on every node
/// (after `stragglers`), if a tokio runtime is running on this thread.
/// Without one the keys simply expire at their TTL (logged at warn level).
pub(crate) fn spawn_release(
    shared: &Arc<Shared>,
    keys: &Arc<[String]>,
    value: &Arc<str>,
    stragglers: Option<Stragglers>,
) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            let shared = Arc::clone(shared);
            let keys = Arc::clone(keys);
            let value = Arc::clone(value);
            runtime.spawn(async move {
                settle(stragglers).await;
                shared
                    .release_round(&keys, &value, Leftover::Finish, true)
                    .await;
            });
        }
        Err(_) => tracing::warn!(
            keys = ?keys,
            "no tokio runtime to release the lock from Drop; its keys expire at their TTL"
        ),
    }
}

/// Releases an attempt's keys if the attempt is dropped (cancelled) before
/// it either hands them to a guard or releases them itself.
pub(crate) struct ReleaseOnDrop {
    shared: Arc<Shared>,
    keys: Arc<[String]>,
    value: Arc<str>,
    /// The attempt's acquire calls still in flight.
    pub(crate) stragglers: Option<Stragglers>,
    armed: bool,
}

impl ReleaseOnDrop {
    pub(crate) fn arm(shared: &Arc<Shared>, keys: &Arc<[String]>, value: &Arc<str>) -> Self {
        ReleaseOnDrop {
            shared: Arc::clone(shared),
            keys: Arc::clone(keys),
            value: Arc::clone(value),
            stragglers: None,
            armed: true,
        }
    }

    /// Releases a failed attempt's keys on every node, waiting for each
    /// (a `SET` may have landed where no answer came) after the calls still
    /// in flight, then disarms. Announces nothing: contenders that split the
    /// vote back off for their retry delay instead of waking each other in
    /// a loop. Cancelled midway, the drop releases instead.
    pub(crate) async fn release_failed(self) {
        settle(self.stragglers.clone()).await;
        self.shared
            .release_round(&self.keys, &self.value, Leftover::Wait, false)
            .await;
        self.disarm();
    }

    /// The keys are accounted for: nothing to do on drop. Returns the calls
    /// still in flight, for whoever releases the keys later.
    pub(crate) fn disarm(mut self) -> Option<Stragglers> {
        self.armed = false;
        self.stragglers.take()
    }
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        if self.armed {
            tracing::debug!(keys = ?self.keys, "acquire cancelled; releasing its keys");
            spawn_release(
                &self.shared,
                &self.keys,
                &self.value,
                self.stragglers.take(),
            );
        }
    }
}
