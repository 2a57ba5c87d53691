//! The retry settings: how often and how long [`Redlock::lock`](crate::Redlock::lock)
//! tries again.

use std::time::Duration;

use super::Config;

impl Config {
    /// Sets how many times [`Redlock::lock`](crate::Redlock::lock) tries again
    /// after a failed first attempt: the default of
    /// [`Wait::Retries`](crate::Wait::Retries) in [`LockOptions::wait`](crate::LockOptions::wait).
    ///
    /// ```
    /// let config = redquorum::Config::default().with_retries(0);
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_retries(mut self, retries: u32) -> Self {
        self.retry_count = retries;
        self
    }

    /// Retries after the first attempt.
    pub(crate) fn retry_count(&self) -> u32 {
        self.retry_count
    }

    /// Sets the pause between two attempts.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redquorum::Config::default().with_retry_delay(Duration::from_millis(20));
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    /// The pause between two attempts.
    pub(crate) fn retry_delay(&self) -> Duration {
        self.retry_delay
    }

    /// Sets the random spread around the retry delay: each pause is drawn
    /// uniformly from `retry_delay - jitter ..= retry_delay + jitter`
    /// (never below zero), so that contenders do not retry in lockstep.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redquorum::Config::default().with_retry_jitter(Duration::ZERO);
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_retry_jitter(mut self, jitter: Duration) -> Self {
        self.retry_jitter = jitter;
        self
    }

    /// The random spread around the retry delay.
    pub(crate) fn retry_jitter(&self) -> Duration {
        self.retry_jitter
    }

    /// Sets an overall deadline for [`Redlock::lock`](crate::Redlock::lock):
    /// no attempt starts and no retry pause extends past it. An attempt
    /// already under way finishes, so `lock` returns at most about two node
    /// timeouts after the deadline. Without one (the default) only the
    /// retry count bounds `lock`. The default of
    /// [`LockOptions::wait`](crate::LockOptions::wait).
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redquorum::Config::default().with_wait(Duration::from_secs(2));
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_wait(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = Some(timeout);
        self
    }

    /// The overall deadline of `lock`, if any.
    pub(crate) fn acquire_timeout(&self) -> Option<Duration> {
        self.acquire_timeout
    }
}
