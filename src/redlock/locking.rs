//! The locking calls of [`Redlock`]: one attempt, with retries, or as
//! [`LockOptions`] say; one or several resources; reentrant holds. Jobs run
//! under a lock are in [`jobs`](super::jobs).

use std::sync::Arc;
use std::time::Duration;

use super::Redlock;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::guard::LockGuard;
use crate::lock;
use crate::options::{LockOptions, Plan};

impl Redlock {
    /// Makes one attempt to lock `resource` for `ttl`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redquorum::{Error, Redlock};
    ///
    /// # async fn run(redlock: Redlock) -> redquorum::Result<()> {
    /// match redlock.try_lock("cron:cleanup", Duration::from_secs(60)).await {
    ///     Ok(guard) => guard.release().await?,
    ///     Err(Error::NotAcquired(why)) if why.is_contended() => println!("someone else runs it"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidArgument`] for an empty resource or an unusable TTL.
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
    pub async fn try_lock(&self, resource: &str, ttl: Duration) -> Result<LockGuard> {
        self.acquire(&[resource], ttl, &LockOptions::new().no_wait(), None)
            .await
    }

    /// Locks `resource` for `ttl`, trying again (after `retry_delay` plus or
    /// minus `retry_jitter`) up to `retry_count` times and never past
    /// `acquire_timeout`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.lock("account:7", Duration::from_secs(5)).await?;
    /// println!("exclusive for {:?}", guard.remaining());
    /// guard.release().await?;
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
    pub async fn lock(&self, resource: &str, ttl: Duration) -> Result<LockGuard> {
        self.acquire(&[resource], ttl, &LockOptions::new(), None)
            .await
    }

    /// Locks `resource` for `ttl` as `options` say: how long to wait, with
    /// or without fencing, the pause between attempts. What `options` does
    /// not set comes from the [`Config`](crate::Config), so
    /// `lock_with(r, ttl, &LockOptions::new())` is `lock(r, ttl)`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redquorum::LockOptions;
    ///
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let options = LockOptions::new().wait(Duration::from_secs(30)).fencing(true);
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
    /// of zero or longer than [`MAX_TTL`](crate::MAX_TTL), or a retry pause
    /// longer than [`MAX_WAIT`](crate::MAX_WAIT).
    ///
    /// # Cancel safety
    ///
    /// As [`try_lock`](Self::try_lock).
    pub async fn lock_with(
        &self,
        resource: &str,
        ttl: Duration,
        options: &LockOptions,
    ) -> Result<LockGuard> {
        self.acquire(&[resource], ttl, options, None).await
    }

    /// Locks every resource in `resources` at once, with the retries of
    /// [`lock`](Self::lock). On each node the keys are taken by one script
    /// (all free, then all set), so two callers locking overlapping sets can
    /// never each hold a part. Release and extend act on the whole set;
    /// duplicate names count once. With fencing on, each resource gets its
    /// own token ([`LockGuard::fencing_tokens`]).
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.lock_many(&["account:1", "account:2"], Duration::from_secs(5)).await?;
    /// // ... move money between the two accounts ...
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); an empty list is [`Error::InvalidArgument`].
    ///
    /// # Cancel safety
    ///
    /// As [`try_lock`](Self::try_lock).
    pub async fn lock_many(&self, resources: &[&str], ttl: Duration) -> Result<LockGuard> {
        self.acquire(resources, ttl, &LockOptions::new(), None)
            .await
    }

    /// [`lock_many`](Self::lock_many) as `options` say (see
    /// [`lock_with`](Self::lock_with)).
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let once = redquorum::LockOptions::new().no_wait();
    /// let guard = redlock.lock_many_with(&["a", "b"], std::time::Duration::from_secs(5), &once).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`lock_with`](Self::lock_with); an empty list is
    /// [`Error::InvalidArgument`].
    ///
    /// # Cancel safety
    ///
    /// As [`try_lock`](Self::try_lock).
    pub async fn lock_many_with(
        &self,
        resources: &[&str],
        ttl: Duration,
        options: &LockOptions,
    ) -> Result<LockGuard> {
        self.acquire(resources, ttl, options, None).await
    }

    /// One attempt of [`lock_many`](Self::lock_many).
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.try_lock_many(&["a", "b"], std::time::Duration::from_secs(5)).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_lock`](Self::try_lock).
    ///
    /// # Cancel safety
    ///
    /// As [`try_lock`](Self::try_lock).
    pub async fn try_lock_many(&self, resources: &[&str], ttl: Duration) -> Result<LockGuard> {
        self.acquire(resources, ttl, &LockOptions::new().no_wait(), None)
            .await
    }

    /// Locks `resource` for `owner`, a caller-chosen identity, with the
    /// retries of [`lock`](Self::lock); the same owner may take it again
    /// while holding it. Each guard is one hold: the lock is free for
    /// others once every hold of `owner` is released (or has expired).
    ///
    /// On each node one script takes a free lock for `owner`, or adds a
    /// hold when `owner` already has it (raising the TTL to at least `ttl`),
    /// or refuses. Quorum, validity, retries and clean-up after a failed
    /// attempt are those of [`lock`](Self::lock). A reentrant lock and a
    /// plain lock of the same resource exclude each other. Reentrant holds
    /// carry no fencing token, even with fencing on.
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let outer = redlock.lock_reentrant("ledger", "job-17", Duration::from_secs(10)).await?;
    /// let inner = redlock.lock_reentrant("ledger", "job-17", Duration::from_secs(10)).await?;
    /// inner.release().await?; // still held by job-17
    /// outer.release().await?; // now free
    /// # Ok(()) }
    /// ```
    ///
    /// Holds are counted per node. Should a release not reach a node (it
    /// is down or cut off), that node keeps the hold until the key's TTL
    /// runs out, and its count stays above the others': it votes against
    /// other owners until then. The count of a node never drifts from
    /// failed or cancelled acquisitions, since each hold has its own id.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); an empty `owner` is [`Error::InvalidArgument`].
    ///
    /// # Cancel safety
    ///
    /// As [`try_lock`](Self::try_lock): a dropped future removes the hold
    /// it may have added, and only that one.
    pub async fn lock_reentrant(
        &self,
        resource: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<LockGuard> {
        self.acquire(&[resource], ttl, &LockOptions::new(), Some(owner))
            .await
    }

    /// One attempt of [`lock_reentrant`](Self::lock_reentrant).
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let ttl = std::time::Duration::from_secs(5);
    /// let guard = redlock.try_lock_reentrant("ledger", "job-17", ttl).await?;
    /// assert!(redlock.try_lock_reentrant("ledger", "job-18", ttl).await.is_err());
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`lock_reentrant`](Self::lock_reentrant).
    ///
    /// # Cancel safety
    ///
    /// As [`lock_reentrant`](Self::lock_reentrant).
    pub async fn try_lock_reentrant(
        &self,
        resource: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<LockGuard> {
        self.acquire(&[resource], ttl, &LockOptions::new().no_wait(), Some(owner))
            .await
    }

    /// Acquires through the lock's steps and wraps the result in a guard,
    /// with no `.await` in between: a dropped future either released what
    /// it set or handed it to a guard.
    pub(super) async fn acquire(
        &self,
        resources: &[&str],
        ttl: Duration,
        options: &LockOptions,
        owner: Option<&str>,
    ) -> Result<LockGuard> {
        let plan = Plan::new(&self.shared.config, options)?;
        let held = lock::acquire::acquire(&self.shared, resources, ttl, &plan, owner).await?;
        Ok(LockGuard::new(Arc::clone(&self.shared), held))
    }
}
