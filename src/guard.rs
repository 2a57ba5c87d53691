//! [`LockGuard`]: a held lock; extend it, release it, or learn it was lost.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Attempts, Error, Result};
use crate::lock::release::{self, Released};
use crate::lock::{Held, Shared};
use crate::ttl::Ttl;
use crate::watchdog::Watchdog;

/// A held lock.
///
/// Obtained from [`Redlock::lock`](crate::Redlock::lock) or
/// [`Redlock::try_lock`](crate::Redlock::try_lock). The lock is exclusive
/// until [`valid_until`](Self::valid_until); past that, someone else may
/// hold it. End it with [`release`](Self::release), which tells whether the
/// lock was still held. Dropping the guard also releases it, in a task
/// spawned on the current runtime: `Drop` never blocks.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redquorum::Redlock;
///
/// # async fn run() -> redquorum::Result<()> {
/// let redlock = Redlock::new(["redis://127.0.0.1:7001/", "redis://127.0.0.1:7002/", "redis://127.0.0.1:7003/"])?;
/// let mut guard = redlock.lock("invoice:42", Duration::from_secs(10)).await?;
/// assert!(guard.remaining() > Duration::ZERO);
/// // ... work, and if it runs long:
/// guard.extend(Duration::from_secs(10)).await?;
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    shared: Arc<Shared>,
    held: Arc<Held>,
    released: bool,
    /// The auto-extension task, once started.
    watchdog: Option<Watchdog>,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("resources", &self.held.resources)
            .field("fencing_token", &self.held.token)
            .field("remaining", &self.remaining())
            .finish_non_exhaustive()
    }
}

impl LockGuard {
    pub(crate) fn new(shared: Arc<Shared>, held: Held) -> Self {
        LockGuard {
            shared,
            held: Arc::new(held),
            released: false,
            watchdog: None,
        }
    }

    /// The locked resource (the first one, for a multi-resource lock).
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.try_lock("report", std::time::Duration::from_secs(5)).await?;
    /// assert_eq!(guard.resource(), "report");
    /// # Ok(()) }
    /// ```
    pub fn resource(&self) -> &str {
        self.held.resource()
    }

    /// This holder's random value: 40 hex digits, the first `A`-`F`, then `.label` if any.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.try_lock("report", std::time::Duration::from_secs(5)).await?;
    /// assert_eq!(guard.value().len(), 40);
    /// # Ok(()) }
    /// ```
    pub fn value(&self) -> &str {
        &self.held.value
    }

    /// The fencing token, when fencing is on; `None` otherwise.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.try_lock("report", std::time::Duration::from_secs(5)).await?;
    /// assert_eq!(guard.fencing_token(), None); // fencing is off by default
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self) -> Option<u64> {
        self.held.token
    }

    /// The fencing tokens of a multi-resource lock, one per resource in the
    /// order given to [`Redlock::lock`](crate::Redlock::lock)
    /// (duplicates removed); `None` when fencing is off. Each resource has
    /// its own counter, so tokens of different resources are unrelated.
    /// [`fencing_token`](Self::fencing_token) is the first of them.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.lock(&["from", "to"], std::time::Duration::from_secs(5)).await?;
    /// if let Some(tokens) = guard.fencing_tokens() {
    ///     assert_eq!(tokens.len(), 2);
    ///     assert_eq!(guard.fencing_token(), Some(tokens[0]));
    /// }
    /// # Ok(()) }
    /// ```
    pub fn fencing_tokens(&self) -> Option<&[u64]> {
        self.held.tokens.as_deref()
    }

    /// The locked resources, in the order given (duplicates removed).
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.lock(&["b", "a", "b"], std::time::Duration::from_secs(5)).await?;
    /// assert_eq!(guard.resources(), ["b", "a"]);
    /// # Ok(()) }
    /// ```
    pub fn resources(&self) -> &[String] {
        &self.held.resources
    }

    /// The instant (monotonic clock) after which the lock may belong to
    /// someone else: the start of the acquisition (or of the last
    /// successful extension) plus the TTL minus the drift allowance.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.try_lock("report", std::time::Duration::from_secs(5)).await?;
    /// assert!(guard.valid_until() > tokio::time::Instant::now());
    /// # Ok(()) }
    /// ```
    pub fn valid_until(&self) -> Instant {
        self.held.status().deadline
    }

    /// The lock's status as it changes, for the simulation's oracle.
    #[cfg(feature = "sim")]
    pub(crate) fn status_watch(&self) -> tokio::sync::watch::Receiver<crate::lock::held::Status> {
        self.held.status.subscribe()
    }

    /// Validity left; `Duration::ZERO` once expired or lost.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.try_lock("report", std::time::Duration::from_secs(5)).await?;
    /// assert!(guard.remaining() <= std::time::Duration::from_secs(5));
    /// # Ok(()) }
    /// ```
    pub fn remaining(&self) -> Duration {
        self.held.remaining()
    }

    /// Resolves once the lock is known lost or its validity has run out.
    /// Use it to stop work that must not go on without the lock.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// # async fn work() {}
    /// let guard = redlock.lock("report", std::time::Duration::from_secs(5)).await?;
    /// tokio::select! {
    ///     () = work() => guard.release().await?,
    ///     () = guard.lost() => eprintln!("lock lost, work abandoned"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only watches; dropping it changes nothing.
    pub async fn lost(&self) {
        let mut status = self.held.status.subscribe();
        loop {
            let now = *status.borrow_and_update();
            if now.ended || Instant::now() >= now.deadline {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(now.deadline) => {}
                changed = status.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// Gives the lock at least `ttl` from now on every node that still holds
    /// our value (a node with more left keeps it: an extension never
    /// shortens a key), and moves the deadline to what `ttl` allows, lower
    /// too. So two extensions of one lock can reach a node in either order
    /// (calls on several connections may overtake each other) and it still
    /// holds what the later round counted. A key that is gone
    /// from a node is never created again, unless
    /// [`Config::with_reseed_restarted_nodes`](crate::Config::with_reseed_restarted_nodes)
    /// is on; then it is set again there once this extension reached a quorum.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let mut guard = redlock.lock("report", std::time::Duration::from_secs(5)).await?;
    /// guard.extend(std::time::Duration::from_secs(30)).await?;
    /// assert!(guard.remaining() > std::time::Duration::from_secs(5));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidArgument`] for a TTL that is zero, not above the
    ///   drift allowance, or too long.
    /// - [`Error::Expired`] when the deadline has already passed (no node is
    ///   contacted) or a quorum of nodes no longer holds our value.
    /// - [`Error::NotAcquired`] when too many nodes failed or answered too
    ///   late to confirm the extension; the lock stays valid until the
    ///   earlier of its old deadline and the one this extension would have set.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. Before anything is sent, the deadline is lowered to what
    /// the new TTL allows if that is earlier, so a cancelled extension (some
    /// nodes may have the new TTL) never leaves the guard claiming more than
    /// the nodes hold; a later round of this lock is sent to each node once
    /// this one's call there is over, and whichever of the two lands last,
    /// the node keeps the longer TTL. Extensions of one guard (yours and the
    /// watchdog's) run one at a time.
    pub async fn extend(&mut self, ttl: Duration) -> Result<()> {
        let ttl = Ttl::new(ttl, self.shared.config())?;
        self.held.extend_round(&self.shared, &ttl).await
    }

    /// Deletes the lock on every node that still holds our value.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.lock("report", std::time::Duration::from_secs(5)).await?;
    /// guard.release().await?; // Ok: we held it to the end
    /// # Ok(()) }
    /// ```
    ///
    /// A guard is released once; a second release does not compile:
    ///
    /// ```compile_fail
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.lock("report", std::time::Duration::from_secs(5)).await?;
    /// guard.release().await?;
    /// guard.release().await?; // error: use of moved value
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::Expired`] when the validity had already run out, or when
    ///   more than N − quorum nodes answered that our value is gone
    ///   (expired there, or lost in a restart): exclusivity up to now cannot
    ///   be vouched for. The keys still ours are deleted all the same.
    /// - [`Error::ReleaseUnconfirmed`] when the lock had not expired but
    ///   too few nodes answered to confirm the release (hung, down or
    ///   failing nodes, each named in the report): the lock was held until
    ///   now; its keys on the nodes that did not answer lapse at their TTL.
    ///
    /// # Cancel safety
    ///
    /// Cancelling is safe: the guard is consumed, and the deletes already
    /// sent complete (compare-and-delete can never remove another owner's key).
    pub async fn release(mut self) -> Result<()> {
        if let Some(watchdog) = self.watchdog.as_mut() {
            watchdog.stop().await;
        }
        self.watchdog = None;
        let released = self.held.release(&self.shared).await;
        // Only now: if this future is dropped before, `Drop` releases.
        self.released = true;
        tracing::debug!(resource = self.resource(), ?released, "lock released");
        match released {
            Released::Held => Ok(()),
            Released::Expired => Err(Error::Expired),
            Released::Unconfirmed(nodes) => {
                let quorum = self.shared.quorum();
                let report = Attempts::new(self.resource(), 1, quorum, nodes).of_release();
                Err(Error::ReleaseUnconfirmed(Box::new(report)))
            }
        }
    }

    /// Starts the watchdog: a background task that extends the lock to its
    /// original TTL whenever [`Config::extend_at`](crate::Config::with_extend_at)
    /// of the TTL is left (1/3 by default), retries a failed extension with
    /// short jittered pauses while validity remains, and otherwise marks the
    /// lock lost, which resolves [`lost`](Self::lost). It obeys
    /// [`Config::max_extensions`](crate::Config::with_max_extensions) and
    /// [`Config::max_hold`](crate::Config::with_max_hold), and stops when the
    /// guard is released or dropped. A second call does nothing.
    ///
    /// Call it inside a tokio runtime; outside one no task can start (a
    /// warning is logged) and the lock simply expires at its deadline.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// # async fn long_work() {}
    /// let mut guard = redlock.lock("import", std::time::Duration::from_secs(10)).await?;
    /// guard.auto_extend();
    /// tokio::select! {
    ///     () = long_work() => guard.release().await?,
    ///     () = guard.lost() => eprintln!("lock lost; work abandoned"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn auto_extend(&mut self) {
        if self.watchdog.is_some() {
            return;
        }
        self.watchdog = Watchdog::start(Arc::clone(&self.shared), Arc::clone(&self.held));
        if self.watchdog.is_none() {
            tracing::warn!(
                resource = self.resource(),
                "no tokio runtime: auto-extension not started; the lock expires at its deadline"
            );
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            self.held.dropped(self.shared.config());
            let watchdog = self.watchdog.take().map(Watchdog::abort);
            let held = Arc::clone(&self.held);
            let before = async move {
                if let Some(stopped) = watchdog {
                    stopped.await;
                }
                held.next_round().await.clone()
            };
            let locks = (&self.held.resources, &self.held.keys);
            let hand_on = (before, Some(self.held.in_a_row));
            release::spawn_release(&self.shared, locks, &self.held.value, hand_on);
        }
    }
}
