//! [`LockOptions`]: the settings of one acquisition (how long to wait,
//! fencing, the retry pause), over the defaults of the [`Config`].

use std::time::Duration;

use tokio::time::Instant;

use crate::config::{Config, MAX_TTL, MAX_WAIT};
use crate::error::{Error, Result};

/// Per-call settings for [`Redlock::lock_with`](crate::Redlock::lock_with): one
/// `Redlock` (one set of connections) serves calls of different shapes.
/// What is not set here comes from the [`Config`].
///
/// The wait is one [`Wait`]: one attempt, a number of retries, retries
/// until a deadline, or forever; the last one set wins. Whatever the wait,
/// `lock` gives up at once when misconfigured nodes make a quorum
/// impossible ([`Reason::Misconfigured`](crate::Reason::Misconfigured)).
///
/// ```no_run
/// use std::time::Duration;
/// use redquorum::{LockOptions, Redlock, Wait};
///
/// # async fn run(redlock: Redlock) -> redquorum::Result<()> {
/// // An HTTP handler: wait up to 2 s, retrying every 50 ms.
/// let quick = LockOptions::new()
///     .wait(Wait::For(Duration::from_secs(2)))
///     .retry_delay(Duration::from_millis(50));
/// let guard = redlock.lock_with("cart:42", Duration::from_secs(5), &quick).await?;
/// guard.release().await?;
///
/// // A write to a store that checks fencing tokens, on the same Redlock.
/// let fenced = LockOptions::new().fencing(true);
/// let guard = redlock.lock_with("ledger", Duration::from_secs(5), &fenced).await?;
/// assert!(guard.fencing_token().is_some());
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockOptions {
    wait: Option<Wait>,
    fencing: Option<bool>,
    retry_delay: Option<Duration>,
    retry_jitter: Option<Duration>,
    owner: Option<String>,
}

/// How long one call waits for the lock: the argument of
/// [`LockOptions::wait`]. Without one, a call waits as the [`Config`]
/// says ([`Config::with_retries`], [`Config::with_wait`]).
///
/// ```
/// use std::time::Duration;
/// use redquorum::{LockOptions, Wait};
///
/// let once = LockOptions::new().wait(Wait::No);
/// let three = LockOptions::new().wait(Wait::Retries(3));
/// let patient = LockOptions::new().wait(Wait::For(Duration::from_secs(30)));
/// let forever = LockOptions::new().wait(Wait::Forever);
/// assert_ne!(once, forever);
/// # let _ = (three, patient);
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// One attempt, no retry (as [`Redlock::try_lock`](crate::Redlock::try_lock)).
    No,
    /// This many retries after the first attempt, within the [`Config`]'s
    /// wait ([`Config::with_wait`]) if it sets one.
    Retries(u32),
    /// Retries until this much time has passed since the call began,
    /// however many attempts that takes: no attempt starts and no pause
    /// extends past it. Positive, and at most [`MAX_TTL`](crate::MAX_TTL).
    For(Duration),
    /// Retries until the lock is acquired (or a quorum of nodes is found
    /// misconfigured). Cancel the future to stop waiting.
    Forever,
}

impl LockOptions {
    /// Options that change nothing: every setting from the [`Config`].
    ///
    /// ```
    /// assert_eq!(redquorum::LockOptions::new(), redquorum::LockOptions::default());
    /// ```
    pub fn new() -> Self {
        LockOptions::default()
    }

    /// How long this call waits for the lock (see [`Wait`]); the last
    /// wait set wins.
    ///
    /// ```
    /// use redquorum::{LockOptions, Wait};
    ///
    /// let patient = LockOptions::new().wait(Wait::For(std::time::Duration::from_secs(30)));
    /// assert_eq!(patient.clone().wait(Wait::No), LockOptions::new().wait(Wait::No));
    /// ```
    #[must_use = "a setter returns the changed options"]
    pub fn wait(mut self, wait: Wait) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Fencing for this call, whatever [`Config::with_fencing`] says (see
    /// the crate docs on fencing tokens). Ignored by reentrant locks.
    ///
    /// ```
    /// let fenced = redquorum::LockOptions::new().fencing(true);
    /// # let _ = fenced;
    /// ```
    #[must_use = "a setter returns the changed options"]
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = Some(on);
        self
    }

    /// The pause between two attempts of this call. At most
    /// [`MAX_WAIT`](crate::MAX_WAIT).
    ///
    /// ```
    /// let brisk = redquorum::LockOptions::new().retry_delay(std::time::Duration::from_millis(20));
    /// # let _ = brisk;
    /// ```
    #[must_use = "a setter returns the changed options"]
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = Some(delay);
        self
    }

    /// The random spread around the retry delay of this call. At most
    /// [`MAX_WAIT`](crate::MAX_WAIT).
    ///
    /// ```
    /// let steady = redquorum::LockOptions::new().retry_jitter(std::time::Duration::ZERO);
    /// # let _ = steady;
    /// ```
    #[must_use = "a setter returns the changed options"]
    pub fn retry_jitter(mut self, jitter: Duration) -> Self {
        self.retry_jitter = Some(jitter);
        self
    }

    /// A reentrant hold for `owner` (a job id, a request id): the same
    /// owner may take the lock again while holding it, and each guard is
    /// one hold; the lock is free for others once every hold of `owner` is
    /// released (or has expired).
    ///
    /// On each node one script takes a free lock for `owner`, or adds a
    /// hold when `owner` already has it (raising the TTL to at least the
    /// call's), or refuses. Quorum, validity, retries and the clean-up
    /// after a failed attempt are those of any other lock. A reentrant lock
    /// and a plain lock of the same resource exclude each other. Reentrant
    /// holds cover one resource and carry no fencing token, even with
    /// fencing on.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redquorum::LockOptions;
    ///
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let job = LockOptions::new().owner("job-17");
    /// let ttl = Duration::from_secs(10);
    /// let outer = redlock.lock_with("ledger", ttl, &job).await?;
    /// let inner = redlock.lock_with("ledger", ttl, &job).await?;
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
    /// An empty owner, or an owner with several resources, is refused by
    /// the call with [`Error::InvalidArgument`].
    #[must_use = "a setter returns the changed options"]
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// The owner of a reentrant hold, if [`owner`](Self::owner) set one.
    pub(crate) fn owner_name(&self) -> Option<&str> {
        self.owner.as_deref()
    }
}

/// The settings of one acquisition, resolved: options over the config.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    /// Timed pauses allowed after the first attempt.
    pub(crate) retries: u32,
    /// No attempt starts and no pause ends past this.
    pub(crate) give_up_at: Option<Instant>,
    pub(crate) retry_delay: Duration,
    pub(crate) retry_jitter: Duration,
    pub(crate) fencing: bool,
}

impl Plan {
    /// Resolves `options` over `config`, the call starting now.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero or too long wait, or a retry
    /// pause longer than [`MAX_WAIT`].
    pub(crate) fn new(config: &Config, options: &LockOptions) -> Result<Plan> {
        let now = Instant::now();
        let config_deadline = config.acquire_timeout().and_then(|t| now.checked_add(t));
        let (retries, give_up_at) = match options.wait {
            None => (config.retry_count(), config_deadline),
            Some(Wait::No) => (0, None),
            Some(Wait::Retries(n)) => (n, config_deadline),
            Some(Wait::Forever) => (u32::MAX, None),
            Some(Wait::For(d)) if d.is_zero() => {
                return Err(Error::InvalidArgument(
                    "a wait of zero leaves no time for an attempt: use Wait::No for one \
                     attempt, or a positive duration"
                        .to_owned(),
                ));
            }
            Some(Wait::For(d)) if d > MAX_TTL => {
                return Err(Error::InvalidArgument(format!(
                    "wait {d:?} is longer than MAX_TTL ({MAX_TTL:?}); use Wait::Forever or a \
                     shorter one"
                )));
            }
            Some(Wait::For(d)) => (u32::MAX, now.checked_add(d)),
        };
        for (name, value) in [
            ("retry delay", options.retry_delay),
            ("retry jitter", options.retry_jitter),
        ] {
            if let Some(value) = value.filter(|v| *v > MAX_WAIT) {
                return Err(Error::InvalidArgument(format!(
                    "{name} {value:?} is longer than MAX_WAIT ({MAX_WAIT:?}); use a shorter one"
                )));
            }
        }
        Ok(Plan {
            retries,
            give_up_at,
            retry_delay: options.retry_delay.unwrap_or(config.retry_delay()),
            retry_jitter: options.retry_jitter.unwrap_or(config.retry_jitter()),
            fencing: options.fencing.unwrap_or(config.fencing()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(options: LockOptions) -> Result<Plan> {
        let config = Config::default()
            .with_retries(4)
            .with_wait(Duration::from_secs(9));
        Plan::new(&config, &options)
    }

    #[test]
    fn no_options_take_the_config() {
        let p = plan(LockOptions::new()).unwrap();
        assert_eq!(p.retries, 4);
        assert!(p.give_up_at.is_some());
        assert_eq!(p.retry_delay, crate::DEFAULT_RETRY_DELAY);
        assert!(!p.fencing);
    }

    #[test]
    fn a_wait_lifts_the_retry_count_and_sets_the_deadline() {
        let before = Instant::now();
        let p = plan(LockOptions::new().wait(Wait::For(Duration::from_secs(1)))).unwrap();
        assert_eq!(p.retries, u32::MAX);
        let deadline = p.give_up_at.unwrap();
        assert!(deadline >= before + Duration::from_secs(1));
        assert!(deadline < before + Duration::from_secs(9));
    }

    #[test]
    fn the_last_wait_set_wins() {
        let p = plan(
            LockOptions::new()
                .wait(Wait::For(Duration::from_secs(1)))
                .wait(Wait::No),
        )
        .unwrap();
        assert_eq!((p.retries, p.give_up_at), (0, None));
        let p = plan(LockOptions::new().wait(Wait::No).wait(Wait::Forever)).unwrap();
        assert_eq!((p.retries, p.give_up_at), (u32::MAX, None));
    }

    #[test]
    fn per_call_fencing_and_pauses_override_the_config() {
        let p = plan(
            LockOptions::new()
                .fencing(true)
                .retry_delay(Duration::from_millis(7))
                .retry_jitter(Duration::ZERO),
        )
        .unwrap();
        assert!(p.fencing);
        assert_eq!(p.retry_delay, Duration::from_millis(7));
        assert_eq!(p.retry_jitter, Duration::ZERO);
    }

    #[test]
    fn a_zero_or_huge_wait_and_a_huge_pause_are_argument_errors() {
        for options in [
            LockOptions::new().wait(Wait::For(Duration::ZERO)),
            LockOptions::new().wait(Wait::For(Duration::MAX)),
            LockOptions::new().retry_delay(Duration::MAX),
            LockOptions::new().retry_jitter(MAX_WAIT + Duration::from_secs(1)),
        ] {
            let err = plan(options)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.starts_with("invalid argument: "), "{err}");
        }
    }
}
