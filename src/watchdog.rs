//! The auto-extension task (watchdog) and its policy.
//!
//! The task holds only what it needs (the shared nodes and config, and the
//! guard's [`Held`] state), extends the lock when a share of the TTL is
//! left (in turn with the other watchdogs of its `Redlock`, at most
//! [`WATCHDOG_ROUNDS`](crate::lock::WATCHDOG_ROUNDS) rounds in flight), retries a failed extension with short jittered pauses while
//! validity remains, and marks the lock lost (waking every `lost()` waiter)
//! when validity runs out, when a quorum no longer holds it, or when the
//! extension policy says to stop. It ends with the lock, or when the guard
//! is released or dropped (the guard aborts it).

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::Error;
use crate::lock::{Held, Shared};

/// Shortest and longest pause between two attempts of one extension.
const RETRY_MIN: Duration = Duration::from_millis(10);
const RETRY_MAX: Duration = Duration::from_millis(250);

/// A running watchdog; the guard owns it and stops it.
#[derive(Debug)]
pub(crate) struct Watchdog {
    task: JoinHandle<()>,
}

impl Watchdog {
    /// Starts the watchdog on the current tokio runtime; `None` outside one.
    pub(crate) fn start(shared: Arc<Shared>, held: Arc<Held>) -> Option<Watchdog> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        Some(Watchdog {
            task: runtime.spawn(run(shared, held)),
        })
    }

    /// Stops the watchdog and waits until it has stopped: nothing it sent
    /// can reach a node after what the caller sends next. Cancel safe: if
    /// this is dropped mid-wait, the owner still holds the (aborted) task
    /// and can wait for it elsewhere.
    pub(crate) async fn stop(&mut self) {
        self.task.abort();
        // Err: cancelled, which is what was asked for.
        let _ = (&mut self.task).await;
    }

    /// Stops the watchdog without waiting (for `Drop`); the future returned
    /// completes once the task is gone.
    pub(crate) fn abort(self) -> impl Future<Output = ()> + Send + 'static {
        self.task.abort();
        let task = self.task;
        async move {
            // Err: cancelled, which is what was asked for.
            let _ = task.await;
        }
    }
}

/// The pause before retrying a failed extension of a `ttl` lock: about a
/// twentieth of the TTL (10 to 250 ms), plus or minus half of it.
pub(crate) fn retry_pause(ttl: Duration, unit: f64) -> Duration {
    let base = (ttl / 20).clamp(RETRY_MIN, RETRY_MAX);
    crate::ttl::retry_pause(base, base / 2, unit)
}

/// When a watchdog extends: the watchdogs of one `Redlock` extend on a
/// grid of instants, so that locks due within one step of it extend
/// together and their calls to each node go out in one batch
/// (`node::batch`) instead of one call per lock. Extending up to a step
/// early costs the lock nothing.
///
/// `due` brought forward to the last point at or before it of the grid
/// that starts at `epoch` with a step of a hundredth of `ttl` (1 to
/// 10 ms: a longer step would gather more locks into one instant, a
/// burst of rounds that delays the client's other calls); `due` itself
/// when it is before `epoch`.
pub(crate) fn on_grid(epoch: Instant, due: Instant, ttl: Duration) -> Instant {
    let step = (ttl / 100).clamp(Duration::from_millis(1), Duration::from_millis(10));
    let since = due.saturating_duration_since(epoch).as_nanos();
    let aligned = u64::try_from(since - since % step.as_nanos()).unwrap_or(u64::MAX);
    (epoch + Duration::from_nanos(aligned)).min(due)
}

/// Marks the lock lost and says why.
fn declare_lost((shared, held): (&Shared, &Held), why: &'static str) {
    held.lose(shared.config());
    tracing::warn!(resource = held.resource(), why, "lock lost");
}

/// The watchdog's loop.
async fn run(shared: Arc<Shared>, held: Arc<Held>) {
    let policy = shared.config().watchdog();
    let ttl = held.ttl.clone();
    let lead = ttl.ttl.mul_f64(policy.extend_at);
    let mut status = held.status.subscribe();
    let mut extensions = 0u32;
    loop {
        let now_status = *status.borrow_and_update();
        if now_status.ended {
            return;
        }
        let deadline = now_status.deadline;
        let now = Instant::now();
        if now >= deadline {
            declare_lost(
                (&shared, &held),
                "validity ran out before an extension succeeded",
            );
            return;
        }
        let due = on_grid(
            shared.epoch(),
            deadline.checked_sub(lead).unwrap_or(now),
            ttl.ttl,
        );
        if now < due {
            tokio::select! {
                () = tokio::time::sleep_until(due) => {}
                changed = status.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
            continue;
        }
        if let Some(why) = policy.stop_reason(extensions, held.acquired_at, now + ttl.ttl) {
            tracing::info!(
                resource = held.resource(),
                why,
                remaining = ?held.remaining(),
                "watchdog stops extending; the lock will expire"
            );
            // Biased: a guard released at its deadline's instant ends the
            // watch rather than being declared lost, whatever the runtime's
            // draw.
            tokio::select! {
                biased;
                // Released, or lost some other way: either ends the watch.
                _ = status.wait_for(|s| s.ended) => return,
                () = tokio::time::sleep_until(deadline) => {}
            }
            declare_lost((&shared, &held), why);
            return;
        }
        let mut failures = 0u32;
        loop {
            // In line with the other watchdogs' rounds; the wait is counted
            // against the validity, as any delay of the round would be.
            let Some(turn) = shared.watchdog_turn(held.status().deadline).await else {
                declare_lost(
                    (&shared, &held),
                    "validity ran out while the extension waited for its turn",
                );
                return;
            };
            // Boxed: the round's state is allocated while it runs, not
            // carried by every idle watchdog (a held lock costs 1.9 KB of
            // memory instead of 3.0 KB: examples/holders.rs).
            let extended = Box::pin(held.extend_round(&shared, &ttl)).await;
            drop(turn);
            match extended {
                Ok(()) => {
                    extensions += 1;
                    tracing::debug!(
                        resource = held.resource(),
                        extensions,
                        remaining = ?held.remaining(),
                        "lock extended by the watchdog"
                    );
                    break;
                }
                Err(Error::Expired) => {
                    let why = if held.status().ended {
                        "a quorum of nodes no longer holds the lock"
                    } else {
                        "validity ran out before an extension reached a quorum"
                    };
                    declare_lost((&shared, &held), why);
                    return;
                }
                Err(error) => {
                    failures += 1;
                    let remaining = held.remaining();
                    tracing::debug!(resource = held.resource(), failures, %error, ?remaining, "extension failed");
                    if failures == 1 {
                        tracing::warn!(resource = held.resource(), ?remaining, %error, "lock at risk: extension failed, retrying while validity remains");
                    }
                    if remaining.is_zero() {
                        declare_lost(
                            (&shared, &held),
                            "validity ran out before an extension reached a quorum",
                        );
                        return;
                    }
                    let pause = retry_pause(ttl.ttl, crate::rng::unit()).min(remaining);
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn extensions_fall_on_a_grid_of_a_hundredth_of_the_ttl_never_later() {
        let epoch = Instant::now();
        let ttl = 3000 * MS;
        assert_eq!(on_grid(epoch, epoch + 65 * MS, ttl), epoch + 60 * MS);
        assert_eq!(on_grid(epoch, epoch + 60 * MS, ttl), epoch + 60 * MS);
        // A TTL of a minute: steps of 10 ms at most; of 50 ms, of 1 ms.
        assert_eq!(
            on_grid(epoch, epoch + 1234 * MS, 60_000 * MS),
            epoch + 1230 * MS
        );
        assert_eq!(
            on_grid(epoch, epoch + 1234 * MS, 50 * MS),
            epoch + 1234 * MS
        );
        // Before the grid begins: as due.
        let early = epoch.checked_sub(5 * MS).unwrap_or(epoch);
        assert_eq!(on_grid(epoch, early, ttl), early);
        // Far from the origin (more steps than a u32 counts), still a step.
        let far = epoch + Duration::from_secs(60 * 86_400) + 7 * MS;
        assert_eq!(on_grid(epoch, far, 50 * MS), far);
        let far_due = epoch + Duration::from_secs(60 * 86_400) + 37 * MS;
        assert_eq!(on_grid(epoch, far_due, ttl), far_due - 7 * MS);
    }

    #[test]
    fn retry_pause_is_a_jittered_twentieth_of_the_ttl_within_bounds() {
        assert_eq!(retry_pause(1000 * MS, 0.5), 50 * MS);
        assert_eq!(retry_pause(1000 * MS, 0.0), 25 * MS);
        assert_eq!(retry_pause(1000 * MS, 1.0), 75 * MS);
        assert_eq!(retry_pause(60_000 * MS, 0.5), 250 * MS);
        assert_eq!(retry_pause(50 * MS, 0.5), 10 * MS);
    }
}
