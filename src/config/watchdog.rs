//! The watchdog's settings: when it extends, how often and for how long
//! it may, and whether it re-seeds restarted nodes.

use std::time::Duration;

use tokio::time::Instant;

use super::Config;
use crate::error::{Error, Result};

/// Default share of the TTL still left when the watchdog extends the lock.
pub const DEFAULT_EXTEND_AT: f64 = 1.0 / 3.0;

/// The auto-extension settings of a [`Config`](crate::Config).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Policy {
    /// Share of the TTL left when an extension starts, in `(0, 1)`.
    pub(crate) extend_at: f64,
    /// At most this many extensions by the watchdog.
    pub(crate) max_extensions: Option<u32>,
    /// No extension carries the deadline past acquisition + this.
    pub(crate) max_hold: Option<Duration>,
    /// Re-seed nodes that lost the key, once a quorum still holds it.
    pub(crate) reseed: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            extend_at: DEFAULT_EXTEND_AT,
            max_extensions: None,
            max_hold: None,
            reseed: false,
        }
    }
}

impl Policy {
    /// Checks the values; the message says what to use instead.
    pub(crate) fn validate(&self) -> Result<()> {
        if !self.extend_at.is_finite() || self.extend_at <= 0.0 || self.extend_at >= 1.0 {
            return Err(Error::Config(format!(
                "extend_at {} is out of range: it is the share of the TTL left when the \
                 watchdog extends; use a number in (0, 1), e.g. 0.33",
                self.extend_at
            )));
        }
        if self.max_hold == Some(Duration::ZERO) {
            return Err(Error::Config(
                "max hold is zero: the watchdog could never extend; use None (no limit) or a \
                 positive duration"
                    .to_owned(),
            ));
        }
        Ok(())
    }

    /// Why the next extension must not happen, if it must not: `extensions`
    /// done so far, `new_deadline` the deadline it would set.
    pub(crate) fn stop_reason(
        &self,
        extensions: u32,
        acquired_at: Instant,
        new_deadline: Instant,
    ) -> Option<&'static str> {
        if self.max_extensions.is_some_and(|max| extensions >= max) {
            return Some("maximum number of extensions reached");
        }
        if self.max_hold.is_some_and(|max| {
            acquired_at
                .checked_add(max)
                .is_some_and(|limit| new_deadline > limit)
        }) {
            return Some("maximum hold time reached");
        }
        None
    }
}

impl Config {
    /// Sets the share of the TTL still left when the watchdog
    /// ([`LockGuard::auto_extend`](crate::LockGuard::auto_extend)) extends
    /// the lock; in `(0, 1)`, default 1/3. A larger share leaves more time
    /// to retry a failed extension, at the cost of more extensions.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_extend_at(0.5);
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_extend_at(mut self, share_left: f64) -> Self {
        self.watchdog.extend_at = share_left;
        self
    }

    /// The share of the TTL left when the watchdog extends.
    #[cfg(any(test, feature = "sim"))]
    pub(crate) fn extend_at(&self) -> f64 {
        self.watchdog.extend_at
    }

    /// Limits how many times the watchdog extends one lock (by default,
    /// no limit). Past the limit the lock expires at its
    /// deadline and is reported lost.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_max_extensions(3);
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_max_extensions(mut self, max: u32) -> Self {
        self.watchdog.max_extensions = Some(max);
        self
    }

    /// The limit on watchdog extensions of one lock, if any.
    #[cfg(test)]
    pub(crate) fn max_extensions(&self) -> Option<u32> {
        self.watchdog.max_extensions
    }

    /// Limits how long the watchdog keeps one lock, counted from the start
    /// of its acquisition: no extension carries the deadline past it (the
    /// first TTL is always granted). By default, no limit.
    /// Past the limit the lock expires and is reported lost.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redquorum::Config::default().with_max_hold(Duration::from_secs(600));
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_max_hold(mut self, max: Duration) -> Self {
        self.watchdog.max_hold = Some(max);
        self
    }

    /// The limit on how long the watchdog keeps one lock, if any.
    #[cfg(test)]
    pub(crate) fn max_hold(&self) -> Option<Duration> {
        self.watchdog.max_hold
    }

    /// When on, an extension that reached a quorum also puts the lock back
    /// (`SET NX PX`) on nodes where the key is missing, e.g. a node that
    /// restarted empty; a key that holds another owner's value is never
    /// touched. Off by default: extensions then never create keys.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_reseed_restarted_nodes(true);
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_reseed_restarted_nodes(mut self, reseed: bool) -> Self {
        self.watchdog.reseed = reseed;
        self
    }

    /// Whether extensions re-seed nodes that lost the key.
    pub(crate) fn reseed_restarted_nodes(&self) -> bool {
        self.watchdog.reseed
    }

    /// The auto-extension settings.
    pub(crate) fn watchdog(&self) -> Policy {
        self.watchdog.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn extend_at_outside_zero_one_and_zero_max_hold_are_rejected() {
        for bad in [0.0, 1.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
            let policy = Policy {
                extend_at: bad,
                ..Policy::default()
            };
            let err = policy.validate().unwrap_err().to_string();
            assert!(err.contains("extend_at"), "{bad}: {err}");
        }
        let policy = Policy {
            max_hold: Some(Duration::ZERO),
            ..Policy::default()
        };
        assert!(
            policy
                .validate()
                .unwrap_err()
                .to_string()
                .contains("max hold")
        );
        assert!(Policy::default().validate().is_ok());
    }

    #[test]
    fn stop_reason_applies_the_extension_count_and_hold_limits() {
        let t0 = Instant::now();
        let unlimited = Policy::default();
        assert_eq!(
            unlimited.stop_reason(u32::MAX, t0, t0 + 1_000_000 * MS),
            None
        );
        let two = Policy {
            max_extensions: Some(2),
            ..Policy::default()
        };
        assert_eq!(two.stop_reason(1, t0, t0), None);
        assert!(two.stop_reason(2, t0, t0).is_some());
        let hold = Policy {
            max_hold: Some(1000 * MS),
            ..Policy::default()
        };
        assert_eq!(hold.stop_reason(0, t0, t0 + 1000 * MS), None);
        assert!(hold.stop_reason(0, t0, t0 + 1001 * MS).is_some());
    }
}
