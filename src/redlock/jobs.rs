//! Jobs under a lock: [`with_lock`](Redlock::with_lock), which runs a job
//! while the watchdog keeps the lock,
//! [`try_with_lock`](Redlock::try_with_lock), which skips the job when
//! another owner holds the lock (cron-style), and [`LockGuard::run`], the
//! same for a lock taken with any options.

use std::time::Duration;

use super::Redlock;
use crate::error::{Error, Reason, Result};
use crate::guard::LockGuard;
use crate::options::LockOptions;
use crate::resources::Resources;

impl Redlock {
    /// Locks `resources` (with the retries of [`lock`](Self::lock)), runs
    /// `f(&guard)` while the watchdog ([`LockGuard::auto_extend`]) keeps the
    /// lock, and releases it when `f` is done.
    ///
    /// If the lock is lost while `f` runs (extensions could not reach a
    /// quorum before the validity ran out, a quorum no longer holds our
    /// value, or the extension limits of the [`Config`](crate::Config) were
    /// hit), `f`'s future is dropped at that moment, so it stops at its
    /// current `.await`, and [`Error::Lost`] is returned; the keys still
    /// ours are released in the background.
    ///
    /// `f` receives the guard, to read [`LockGuard::remaining`] or its
    /// fencing token before a side effect. For a job whose lock needs other
    /// options (fencing, a wait, an owner), take it with
    /// [`lock_with`](Self::lock_with) and [`run`](LockGuard::run) the job
    /// under it.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redquorum::{Error, Redlock};
    ///
    /// # async fn export() -> usize { 0 }
    /// # async fn run(redlock: Redlock) -> redquorum::Result<()> {
    /// match redlock
    ///     .with_lock("nightly-export", Duration::from_secs(10), async |guard| {
    ///         println!("exclusive, {:?} left before the next extension", guard.remaining());
    ///         export().await // may run far longer than the TTL
    ///     })
    ///     .await
    /// {
    ///     Ok(rows) => println!("exported {rows} rows"),
    ///     Err(Error::NotAcquired(why)) => println!("not started: {why}"),
    ///     Err(Error::Lost) => println!("lock lost; export cancelled midway"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// - As [`lock`](Self::lock) when the lock is not acquired
    ///   ([`Error::NotAcquired`], [`Error::InvalidArgument`]): `f` never runs.
    /// - [`Error::Lost`] when the lock was lost while `f` ran: `f` was
    ///   cancelled. When `f` finishes before any loss, its value is returned
    ///   even if the release that follows cannot reach a quorum (that is
    ///   logged): the lock was held for the whole of `f`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future drops `f`'s future and the guard: the
    /// watchdog stops and the lock is released in a spawned task. The same
    /// happens when `f` panics (the panic then goes on unwinding).
    pub async fn with_lock<F, T>(&self, resources: impl Resources, ttl: Duration, f: F) -> Result<T>
    where
        F: AsyncFnOnce(&LockGuard) -> T,
    {
        self.lock(resources, ttl).await?.run(f).await
    }

    /// Makes one attempt to lock `resources`; when another owner holds it,
    /// returns `Ok(None)` at once without running `f` (the job runs
    /// elsewhere); otherwise runs `f` as [`with_lock`](Self::with_lock)
    /// does, under an auto-extended lock, and returns `Ok(Some(value))`.
    /// For jobs that every host of a fleet starts and one should run.
    ///
    /// Only contention skips ([`Reason::Contended`]: more nodes refused
    /// than a quorum can spare, so someone else holds the lock whatever
    /// the other nodes would have said). Any other failure is an error,
    /// so that an outage is not taken for "someone else ran it": nodes
    /// down, hung, misconfigured or not yet answered when the attempt was
    /// decided, even with a stale key of another owner on the rest.
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// # async fn rotate_logs() {}
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// match redlock.try_with_lock("cron:rotate-logs", Duration::from_secs(60), async |_| rotate_logs().await).await? {
    ///     Some(()) => println!("rotated"),
    ///     None => println!("another host has it"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::NotAcquired`] when the attempt failed for another
    ///   [reason](crate::Attempts::reason) than contention (nodes
    ///   unavailable or misconfigured, validity exhausted): `f` never runs.
    /// - [`Error::InvalidArgument`], and [`Error::Lost`] as in
    ///   [`with_lock`](Self::with_lock).
    ///
    /// # Cancel safety
    ///
    /// As [`with_lock`](Self::with_lock).
    pub async fn try_with_lock<F, T>(
        &self,
        resources: impl Resources,
        ttl: Duration,
        f: F,
    ) -> Result<Option<T>>
    where
        F: AsyncFnOnce(&LockGuard) -> T,
    {
        let options = LockOptions::new().wait(crate::Wait::No);
        match self.acquire(&resources.names(), ttl, &options).await {
            Ok(guard) => guard.run(f).await.map(Some),
            Err(Error::NotAcquired(why)) if why.reason() == Reason::Contended => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl LockGuard {
    /// Runs `f(&guard)` while the watchdog ([`auto_extend`](Self::auto_extend))
    /// keeps the lock, and releases it when `f` is done: what
    /// [`Redlock::with_lock`] does after it locked, for a lock taken with
    /// any options ([`Redlock::lock_with`]).
    ///
    /// If the lock is lost while `f` runs, `f`'s future is dropped at that
    /// moment and [`Error::Lost`] is returned; the keys still ours are
    /// released in the background.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redquorum::LockOptions;
    ///
    /// # async fn write(_token: Option<u64>) {}
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let fenced = LockOptions::new().fencing(true).wait(redquorum::Wait::For(Duration::from_secs(30)));
    /// redlock
    ///     .lock_with("ledger", Duration::from_secs(10), &fenced)
    ///     .await?
    ///     .run(async |guard| write(guard.fencing_token()).await)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Lost`] when the lock was lost while `f` ran: `f` was
    /// cancelled. When `f` finishes before any loss, its value is returned
    /// even if the release that follows cannot reach a quorum (that is
    /// logged): the lock was held for the whole of `f`.
    ///
    /// # Cancel safety
    ///
    /// As [`Redlock::with_lock`]: dropping the future drops `f`'s future and
    /// the guard, and the lock is released in a spawned task.
    pub async fn run<F, T>(mut self, f: F) -> Result<T>
    where
        F: AsyncFnOnce(&LockGuard) -> T,
    {
        self.auto_extend();
        let done = {
            let work = f(&self);
            tokio::select! {
                biased;
                () = self.lost() => None,
                value = work => Some(value),
            }
        };
        let resource = self.resource().to_owned();
        let Some(value) = done else {
            tracing::warn!(resource, remaining = ?self.remaining(), "lock lost; job cancelled");
            // Dropping releases what is still ours, in the background: the
            // caller learns of the loss at once.
            drop(self);
            return Err(Error::Lost);
        };
        if let Err(error) = self.release().await {
            tracing::warn!(resource, %error, "job done, but its release was not confirmed");
        }
        Ok(value)
    }
}
