//! The locking calls of [`Redlock`]: one attempt, with retries, or as
//! [`LockOptions`] say (reentrant holds included), of one or several
//! resources ([`Resources`]). Jobs run under a lock are in
//! [`jobs`](super::jobs).

use std::sync::Arc;
use std::time::Duration;

use super::Redlock;
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::lock;
use crate::options::{LockOptions, Plan};
use crate::resources::Resources;

impl Redlock {
    /// Makes one attempt to lock `resources` (one, or several at once: see
    /// [`Resources`]) for `ttl`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redquorum::{Error, Redlock};
    ///
    /// # async fn run(redlock: Redlock) -> redquorum::Result<()> {
    /// match redlock.try_lock("cron:cleanup", Duration::from_secs(60)).await {
    ///     Ok(guard) => guard.release().await?,
    ///     Err(Error::NotAcquired(why)) if why.reason() == redquorum::Reason::Contended => println!("someone else runs it"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidArgument`] for an empty resource or list, or an
    ///   unusable TTL.
    /// - [`Error::NotAcquired`] when no quorum granted the lock with validity
    ///   to spare; it tells each node's answer. It comes at the attempt's
    ///   decision; whatever the attempt set is released in the background
    ///   (a node that must first answer the attempt's call gets its delete
    ///   after that), which [`shutdown`](Self::shutdown) waits for. The
    ///   deletes to the other nodes are handed to their connections before
    ///   this returns, so a next call of this `Redlock` lands after them.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future mid-attempt releases, in a spawned task, every
    /// key the attempt may have set: nothing is left to block others until
    /// the TTL.
    pub async fn try_lock(&self, resources: impl Resources, ttl: Duration) -> Result<LockGuard> {
        let options = LockOptions::new().wait(crate::Wait::No);
        self.acquire(&resources.names(), ttl, &options).await
    }

    /// Locks `resources` (one, or several at once: see [`Resources`]) for
    /// `ttl`, trying again (after `retry_delay` plus or minus
    /// `retry_jitter`) up to `retries` times and never past
    /// `wait`. Several resources are taken by one script per
    /// node (all free, then all set), so two callers locking overlapping
    /// sets can never each hold a part; release and extend act on the whole
    /// set, and with fencing on each resource gets its own token
    /// ([`LockGuard::fencing_tokens`]).
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.lock("account:7", Duration::from_secs(5)).await?;
    /// println!("exclusive for {:?}", guard.remaining());
    /// guard.release().await?;
    ///
    /// let both = redlock.lock(&["account:1", "account:2"], Duration::from_secs(5)).await?;
    /// // ... move money between the two accounts ...
    /// both.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_lock`](Self::try_lock); [`Error::NotAcquired`] reports the
    /// number of attempts and the node answers of the last one.
    ///
    /// # Cancel safety
    ///
    /// As [`try_lock`](Self::try_lock): a dropped future leaves no key behind.
    pub async fn lock(&self, resources: impl Resources, ttl: Duration) -> Result<LockGuard> {
        self.acquire(&resources.names(), ttl, &LockOptions::new())
            .await
    }

    /// Locks `resources` for `ttl` as `options` say: how long to wait, with
    /// or without fencing, the pause between attempts, a reentrant owner
    /// ([`LockOptions::owner`]). What `options` does not set comes from the
    /// [`Config`](crate::Config), so `lock_with(r, ttl, &LockOptions::new())`
    /// is `lock(r, ttl)`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redquorum::LockOptions;
    ///
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let options = LockOptions::new().wait(redquorum::Wait::For(Duration::from_secs(30))).fencing(true);
    /// let guard = redlock.lock_with("invoices", Duration::from_secs(10), &options).await?;
    /// let token = guard.fencing_token();
    /// # let _ = token;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); also [`Error::InvalidArgument`] for a wait
    /// of zero or longer than [`MAX_TTL`](crate::MAX_TTL), a retry pause
    /// longer than [`MAX_WAIT`](crate::MAX_WAIT), an empty owner, or an
    /// owner with several resources.
    ///
    /// # Cancel safety
    ///
    /// As [`try_lock`](Self::try_lock).
    pub async fn lock_with(
        &self,
        resources: impl Resources,
        ttl: Duration,
        options: &LockOptions,
    ) -> Result<LockGuard> {
        self.acquire(&resources.names(), ttl, options).await
    }

    /// Acquires through the lock's steps and wraps the result in a guard,
    /// with no `.await` in between: a dropped future either released what
    /// it set or handed it to a guard.
    pub(super) async fn acquire(
        &self,
        resources: &[&str],
        ttl: Duration,
        options: &LockOptions,
    ) -> Result<LockGuard> {
        let plan = Plan::new(self.shared.config(), options)?;
        let owner = options.owner_name();
        if owner.is_some() && resources.len() > 1 {
            return Err(Error::InvalidArgument(format!(
                "a reentrant lock covers one resource, not {}: lock them without an owner, \
                 or take one reentrant lock per resource",
                resources.len()
            )));
        }
        let held = lock::acquire::acquire(&self.shared, resources, ttl, &plan, owner).await?;
        Ok(LockGuard::new(Arc::clone(&self.shared), held))
    }
}
