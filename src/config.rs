//! [`Config`]: every tunable of the algorithm, its defaults and its validation.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::watchdog::Policy;

/// Default share of the TTL reserved for clock drift between nodes.
pub const DEFAULT_DRIFT_FACTOR: f64 = 0.01;
/// Default fixed clock-drift allowance added to the proportional part.
pub const DEFAULT_DRIFT_PADDING: Duration = Duration::from_millis(2);
/// Default number of retries after the first attempt of [`Redlock::lock`](crate::Redlock::lock).
pub const DEFAULT_RETRY_COUNT: u32 = 10;
/// Default pause between two attempts of [`Redlock::lock`](crate::Redlock::lock).
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(200);
/// Default random spread (plus or minus) around the retry delay.
pub const DEFAULT_RETRY_JITTER: Duration = Duration::from_millis(100);
/// Default limit on one call to one node.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(100);
/// Default prefix of every key the library writes.
pub const DEFAULT_KEY_PREFIX: &str = "redquorum:";

/// The longest TTL accepted: ten years. Redis takes far longer ones, but a
/// lock held that long is a bug, and the bound keeps every deadline
/// computation far from overflow. It also bounds the settings compared
/// with TTLs: `drift_padding`, `min_validity`, `acquire_timeout`, `max_hold`.
pub const MAX_TTL: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// The longest accepted `retry_delay`, `retry_jitter` and `node_timeout`:
/// one hour. Longer pauses are almost always a unit mistake.
pub const MAX_WAIT: Duration = Duration::from_secs(60 * 60);

/// Tuning for a [`Redlock`](crate::Redlock).
///
/// Every field has a default; change one with its `with_*` setter and read it
/// back with the getter of the same name. Values are checked when the config
/// is handed to [`Redlock::with_config`](crate::Redlock::with_config), which
/// returns [`Error::Config`] naming the bad value.
///
/// | setting | default | meaning |
/// |---|---|---|
/// | `quorum` | `N/2 + 1` | nodes that must agree; must be in `N/2+1 ..= N` |
/// | `drift_factor` | `0.01` | share of the TTL reserved for clock drift, in `[0, 1)` |
/// | `drift_padding` | `2 ms` | fixed drift allowance added to the proportional part; at most [`MAX_TTL`] |
/// | `min_validity` | `0` | an acquisition must leave more validity than this; at most [`MAX_TTL`] |
/// | `retry_count` | `10` | retries after the first attempt of `lock` |
/// | `retry_delay` | `200 ms` | pause between attempts; at most [`MAX_WAIT`] |
/// | `retry_jitter` | `100 ms` | random spread (+/-) around `retry_delay`; at most [`MAX_WAIT`] |
/// | `acquire_timeout` | none | overall deadline for `lock`, across retries; at most [`MAX_TTL`] |
/// | `node_timeout` | `100 ms` | limit on one call to one node (connect included); at most [`MAX_WAIT`] |
/// | `key_prefix` | `"redquorum:"` | prefix of every key written; must not contain `lock:`, `fence:` or `released:` |
/// | `fencing` | `false` | issue a fencing token with every acquisition |
/// | `extend_at` | `1/3` | share of the TTL left when the watchdog extends, in `(0, 1)` |
/// | `max_extensions` | none | at most this many watchdog extensions |
/// | `max_hold` | none | the watchdog never extends past acquisition + this; at most [`MAX_TTL`] |
/// | `reseed_restarted_nodes` | `false` | put the key back on nodes that lost it |
/// | `release_notifications` | `true` | releases wake waiters of `lock()` at once (pub/sub) |
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redquorum::Config;
///
/// let config = Config::default()
///     .with_retry_count(5)
///     .with_retry_delay(Duration::from_millis(50))
///     .with_node_timeout(Duration::from_millis(30));
/// assert_eq!(config.retry_count(), 5);
/// assert_eq!(config.quorum(), None); // majority of the nodes
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    quorum: Option<usize>,
    drift_factor: f64,
    drift_padding: Duration,
    min_validity: Duration,
    retry_count: u32,
    retry_delay: Duration,
    retry_jitter: Duration,
    acquire_timeout: Option<Duration>,
    node_timeout: Duration,
    key_prefix: String,
    fencing: bool,
    watchdog: Policy,
    release_notifications: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            quorum: None,
            drift_factor: DEFAULT_DRIFT_FACTOR,
            drift_padding: DEFAULT_DRIFT_PADDING,
            min_validity: Duration::ZERO,
            retry_count: DEFAULT_RETRY_COUNT,
            retry_delay: DEFAULT_RETRY_DELAY,
            retry_jitter: DEFAULT_RETRY_JITTER,
            acquire_timeout: None,
            node_timeout: DEFAULT_NODE_TIMEOUT,
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            fencing: false,
            watchdog: Policy::default(),
            release_notifications: true,
        }
    }
}

impl Config {
    /// Sets how many nodes must agree; the default is a majority (`N/2 + 1`).
    ///
    /// It must be more than half of the nodes (two quorums must always
    /// share a node) and at most all of them.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_quorum(4);
    /// assert_eq!(config.quorum(), Some(4));
    /// ```
    pub fn with_quorum(mut self, quorum: usize) -> Self {
        self.quorum = Some(quorum);
        self
    }

    /// The quorum set with [`with_quorum`](Self::with_quorum), `None` for a majority.
    ///
    /// ```
    /// assert_eq!(redquorum::Config::default().quorum(), None);
    /// ```
    pub fn quorum(&self) -> Option<usize> {
        self.quorum
    }

    /// Sets the share of the TTL reserved for clock drift; in `[0, 1)`.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_drift_factor(0.02);
    /// assert_eq!(config.drift_factor(), 0.02);
    /// ```
    pub fn with_drift_factor(mut self, factor: f64) -> Self {
        self.drift_factor = factor;
        self
    }

    /// The proportional clock-drift allowance.
    ///
    /// ```
    /// assert_eq!(redquorum::Config::default().drift_factor(), 0.01);
    /// ```
    pub fn drift_factor(&self) -> f64 {
        self.drift_factor
    }

    /// Sets the fixed clock-drift allowance added to `ttl * drift_factor`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redquorum::Config::default().with_drift_padding(Duration::from_millis(5));
    /// assert_eq!(config.drift_padding(), Duration::from_millis(5));
    /// ```
    pub fn with_drift_padding(mut self, padding: Duration) -> Self {
        self.drift_padding = padding;
        self
    }

    /// The fixed clock-drift allowance.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(redquorum::Config::default().drift_padding(), Duration::from_millis(2));
    /// ```
    pub fn drift_padding(&self) -> Duration {
        self.drift_padding
    }

    /// Sets the validity an acquisition must leave at least; an attempt that
    /// leaves less (slow nodes ate the TTL) is released and counts as failed.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redquorum::Config::default().with_min_validity(Duration::from_millis(100));
    /// assert_eq!(config.min_validity(), Duration::from_millis(100));
    /// ```
    pub fn with_min_validity(mut self, min_validity: Duration) -> Self {
        self.min_validity = min_validity;
        self
    }

    /// The least validity an acquisition must leave.
    ///
    /// ```
    /// assert!(redquorum::Config::default().min_validity().is_zero());
    /// ```
    pub fn min_validity(&self) -> Duration {
        self.min_validity
    }

    /// Sets how many times [`Redlock::lock`](crate::Redlock::lock) tries again
    /// after a failed first attempt.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_retry_count(0);
    /// assert_eq!(config.retry_count(), 0);
    /// ```
    pub fn with_retry_count(mut self, retries: u32) -> Self {
        self.retry_count = retries;
        self
    }

    /// Retries after the first attempt.
    ///
    /// ```
    /// assert_eq!(redquorum::Config::default().retry_count(), 10);
    /// ```
    pub fn retry_count(&self) -> u32 {
        self.retry_count
    }

    /// Sets the pause between two attempts.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redquorum::Config::default().with_retry_delay(Duration::from_millis(20));
    /// assert_eq!(config.retry_delay(), Duration::from_millis(20));
    /// ```
    pub fn with_retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    /// The pause between two attempts.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(redquorum::Config::default().retry_delay(), Duration::from_millis(200));
    /// ```
    pub fn retry_delay(&self) -> Duration {
        self.retry_delay
    }

    /// Sets the random spread around the retry delay: each pause is drawn
    /// uniformly from `retry_delay - jitter ..= retry_delay + jitter`
    /// (never below zero), so that contenders do not retry in lockstep.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redquorum::Config::default().with_retry_jitter(Duration::ZERO);
    /// assert!(config.retry_jitter().is_zero());
    /// ```
    pub fn with_retry_jitter(mut self, jitter: Duration) -> Self {
        self.retry_jitter = jitter;
        self
    }

    /// The random spread around the retry delay.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(redquorum::Config::default().retry_jitter(), Duration::from_millis(100));
    /// ```
    pub fn retry_jitter(&self) -> Duration {
        self.retry_jitter
    }

    /// Sets an overall deadline for [`Redlock::lock`](crate::Redlock::lock):
    /// no attempt starts and no retry pause extends past it. An attempt
    /// already under way finishes, so `lock` returns at most about two node
    /// timeouts after the deadline. `None` (the default) leaves only the
    /// retry count as the bound.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redquorum::Config::default().with_acquire_timeout(Some(Duration::from_secs(2)));
    /// assert_eq!(config.acquire_timeout(), Some(Duration::from_secs(2)));
    /// ```
    pub fn with_acquire_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// The overall deadline of `lock`, if any.
    ///
    /// ```
    /// assert_eq!(redquorum::Config::default().acquire_timeout(), None);
    /// ```
    pub fn acquire_timeout(&self) -> Option<Duration> {
        self.acquire_timeout
    }

    /// Sets the limit on one call to one node, connection set-up included.
    /// A hung node costs at most this much per operation. Keep it well
    /// below the TTLs you use.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redquorum::Config::default().with_node_timeout(Duration::from_millis(50));
    /// assert_eq!(config.node_timeout(), Duration::from_millis(50));
    /// ```
    pub fn with_node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// The limit on one call to one node.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(redquorum::Config::default().node_timeout(), Duration::from_millis(100));
    /// ```
    pub fn node_timeout(&self) -> Duration {
        self.node_timeout
    }

    /// Sets the prefix of every key the library writes. The lock of resource
    /// `r` lives at `{prefix}lock:{r}`.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_key_prefix("billing:");
    /// assert_eq!(config.key_prefix(), "billing:");
    /// ```
    pub fn with_key_prefix(mut self, prefix: &str) -> Self {
        prefix.clone_into(&mut self.key_prefix);
        self
    }

    /// The prefix of every key the library writes.
    ///
    /// ```
    /// assert_eq!(redquorum::Config::default().key_prefix(), "redquorum:");
    /// ```
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// Turns fencing tokens on or off (off by default).
    ///
    /// With fencing on, every acquisition also reads a per-resource counter
    /// from the nodes that granted it and writes the next value back to a
    /// quorum of them (one more round trip), and
    /// [`LockGuard::fencing_token`](crate::LockGuard::fencing_token) returns
    /// a token that strictly increases across successful acquisitions of
    /// the resource. Counters live at `{prefix}fence:{resource}` and never
    /// expire. They survive only as long as the nodes keep their data: run
    /// the nodes with `appendonly yes`, `appendfsync always` and
    /// `maxmemory-policy noeviction`, and never `FLUSHALL` them (see the
    /// crate docs, "Fencing tokens").
    ///
    /// ```
    /// let config = redquorum::Config::default().with_fencing(true);
    /// assert!(config.fencing());
    /// ```
    pub fn with_fencing(mut self, fencing: bool) -> Self {
        self.fencing = fencing;
        self
    }

    /// Whether acquisitions issue fencing tokens.
    ///
    /// ```
    /// assert!(!redquorum::Config::default().fencing());
    /// ```
    pub fn fencing(&self) -> bool {
        self.fencing
    }

    /// Sets the share of the TTL still left when the watchdog
    /// ([`LockGuard::auto_extend`](crate::LockGuard::auto_extend)) extends
    /// the lock; in `(0, 1)`, default 1/3. A larger share leaves more time
    /// to retry a failed extension, at the cost of more extensions.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_extend_at(0.5);
    /// assert_eq!(config.extend_at(), 0.5);
    /// ```
    pub fn with_extend_at(mut self, share_left: f64) -> Self {
        self.watchdog.extend_at = share_left;
        self
    }

    /// The share of the TTL left when the watchdog extends.
    ///
    /// ```
    /// assert_eq!(redquorum::Config::default().extend_at(), redquorum::DEFAULT_EXTEND_AT);
    /// ```
    pub fn extend_at(&self) -> f64 {
        self.watchdog.extend_at
    }

    /// Limits how many times the watchdog extends one lock; `None` (the
    /// default) for no limit. Past the limit the lock expires at its
    /// deadline and is reported lost.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_max_extensions(Some(3));
    /// assert_eq!(config.max_extensions(), Some(3));
    /// ```
    pub fn with_max_extensions(mut self, max: Option<u32>) -> Self {
        self.watchdog.max_extensions = max;
        self
    }

    /// The limit on watchdog extensions of one lock, if any.
    ///
    /// ```
    /// assert_eq!(redquorum::Config::default().max_extensions(), None);
    /// ```
    pub fn max_extensions(&self) -> Option<u32> {
        self.watchdog.max_extensions
    }

    /// Limits how long the watchdog keeps one lock, counted from the start
    /// of its acquisition: no extension carries the deadline past it (the
    /// first TTL is always granted). `None` (the default) for no limit.
    /// Past the limit the lock expires and is reported lost.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redquorum::Config::default().with_max_hold(Some(Duration::from_secs(600)));
    /// assert_eq!(config.max_hold(), Some(Duration::from_secs(600)));
    /// ```
    pub fn with_max_hold(mut self, max: Option<Duration>) -> Self {
        self.watchdog.max_hold = max;
        self
    }

    /// The limit on how long the watchdog keeps one lock, if any.
    ///
    /// ```
    /// assert_eq!(redquorum::Config::default().max_hold(), None);
    /// ```
    pub fn max_hold(&self) -> Option<Duration> {
        self.watchdog.max_hold
    }

    /// When on, an extension that reached a quorum also puts the lock back
    /// (`SET NX PX`) on nodes where the key is missing, e.g. a node that
    /// restarted empty; a key that holds another owner's value is never
    /// touched. Off by default: extensions then never create keys.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_reseed_restarted_nodes(true);
    /// assert!(config.reseed_restarted_nodes());
    /// ```
    pub fn with_reseed_restarted_nodes(mut self, reseed: bool) -> Self {
        self.watchdog.reseed = reseed;
        self
    }

    /// Whether extensions re-seed nodes that lost the key.
    ///
    /// ```
    /// assert!(!redquorum::Config::default().reseed_restarted_nodes());
    /// ```
    pub fn reseed_restarted_nodes(&self) -> bool {
        self.watchdog.reseed
    }

    /// The auto-extension settings.
    pub(crate) fn watchdog(&self) -> Policy {
        self.watchdog.clone()
    }

    /// Sets whether releases wake the waiters of [`Redlock::lock`](crate::Redlock::lock)
    /// at once (the default) instead of leaving them to sleep out their
    /// retry delay while the lock is free.
    ///
    /// When on, every release publishes on the resource's channel,
    /// `{key_prefix}released:{resource}`, on each node, and a `lock()` that
    /// finds the lock held subscribes to it over one pub/sub connection per node,
    /// opened on the first wait and shared by all waiters of the
    /// `Redlock`. One local waiter is woken per release (in arrival order),
    /// the others keep waiting for later releases. The retry delay remains
    /// the bound on every wait: a missed message, a node that cannot be
    /// reached or refuses `SUBSCRIBE` (ACL) only means waiting as without
    /// notifications. Wake-ups never add to the time `lock()` may take:
    /// `retry_count` still counts the timed pauses, and an attempt made on
    /// a wake-up that fails goes on waiting until the end of the current
    /// pause. [`Redlock::try_lock`](crate::Redlock::try_lock) never subscribes.
    ///
    /// When off, releases publish nothing and waiters only sleep.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_release_notifications(false);
    /// assert!(!config.release_notifications());
    /// ```
    pub fn with_release_notifications(mut self, on: bool) -> Self {
        self.release_notifications = on;
        self
    }

    /// Whether releases wake waiting `lock()` calls at once.
    ///
    /// ```
    /// assert!(redquorum::Config::default().release_notifications());
    /// ```
    pub fn release_notifications(&self) -> bool {
        self.release_notifications
    }

    /// Checks every value against `nodes` nodes and returns the quorum in force.
    pub(crate) fn validate(&self, nodes: usize) -> Result<usize> {
        let quorum = match self.quorum {
            None => nodes / 2 + 1,
            Some(q) if q <= nodes / 2 => {
                return Err(Error::Config(format!(
                    "quorum {q} is too small for {nodes} nodes: it must be more than half \
                     ({} ..= {nodes}) so that two quorums always share a node",
                    nodes / 2 + 1
                )));
            }
            Some(q) if q > nodes => {
                return Err(Error::Config(format!(
                    "quorum {q} is larger than the {nodes} nodes given; use {} ..= {nodes}",
                    nodes / 2 + 1
                )));
            }
            Some(q) => q,
        };
        if !self.drift_factor.is_finite() || !(0.0..1.0).contains(&self.drift_factor) {
            return Err(Error::Config(format!(
                "drift factor {} is out of range: use a finite number in [0, 1), e.g. 0.01",
                self.drift_factor
            )));
        }
        if self.node_timeout.is_zero() {
            return Err(Error::Config(
                "node timeout is zero: every node call would time out; use e.g. 50ms".to_owned(),
            ));
        }
        self.watchdog.validate()?;
        let bounded = [
            (
                "drift padding",
                Some(self.drift_padding),
                MAX_TTL,
                "MAX_TTL",
            ),
            ("min validity", Some(self.min_validity), MAX_TTL, "MAX_TTL"),
            ("retry delay", Some(self.retry_delay), MAX_WAIT, "MAX_WAIT"),
            (
                "retry jitter",
                Some(self.retry_jitter),
                MAX_WAIT,
                "MAX_WAIT",
            ),
            ("acquire timeout", self.acquire_timeout, MAX_TTL, "MAX_TTL"),
            (
                "node timeout",
                Some(self.node_timeout),
                MAX_WAIT,
                "MAX_WAIT",
            ),
            ("max hold", self.watchdog.max_hold, MAX_TTL, "MAX_TTL"),
        ];
        for (setting, value, bound, name) in bounded {
            if let Some(value) = value.filter(|v| *v > bound) {
                return Err(Error::Config(format!(
                    "{setting} {value:?} is longer than {name} ({bound:?}); use a shorter one"
                )));
            }
        }
        crate::keys::check_prefix(&self.key_prefix)?;
        if self.acquire_timeout == Some(Duration::ZERO) {
            return Err(Error::Config(
                "acquire timeout is zero: no attempt could start; use None or a positive duration"
                    .to_owned(),
            ));
        }
        Ok(quorum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_quorum_is_a_majority() {
        let config = Config::default();
        assert_eq!(config.validate(1).ok(), Some(1));
        assert_eq!(config.validate(2).ok(), Some(2));
        assert_eq!(config.validate(3).ok(), Some(2));
        assert_eq!(config.validate(5).ok(), Some(3));
        assert_eq!(config.validate(6).ok(), Some(4));
    }

    #[test]
    fn quorum_of_half_or_less_is_rejected_with_the_valid_range() {
        let err = Config::default().with_quorum(2).validate(5).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::Config(_)));
        assert!(
            text.contains("quorum 2") && text.contains("3 ..= 5"),
            "{text}"
        );
        assert!(Config::default().with_quorum(0).validate(5).is_err());
    }

    #[test]
    fn quorum_above_node_count_is_rejected() {
        let text = Config::default()
            .with_quorum(6)
            .validate(5)
            .unwrap_err()
            .to_string();
        assert!(text.contains("quorum 6"), "{text}");
    }

    #[test]
    fn quorum_of_all_nodes_is_accepted() {
        assert_eq!(Config::default().with_quorum(5).validate(5).ok(), Some(5));
    }

    #[test]
    fn drift_factor_nan_negative_or_one_is_rejected() {
        for bad in [f64::NAN, -0.1, 1.0, 2.5, f64::INFINITY] {
            let err = Config::default()
                .with_drift_factor(bad)
                .validate(5)
                .unwrap_err();
            assert!(err.to_string().contains("drift factor"), "{bad}: {err}");
        }
        assert!(Config::default().with_drift_factor(0.0).validate(5).is_ok());
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        /// A duration in ms around the bounds: up to 20 years.
        fn span() -> impl Strategy<Value = Duration> {
            (1u64..20 * 365 * 86_400_000).prop_map(Duration::from_millis)
        }

        proptest! {
            #[test]
            fn each_duration_setting_is_accepted_exactly_up_to_its_bound(d in span()) {
                let settings: [(Config, Duration); 7] = [
                    (Config::default().with_drift_padding(d), MAX_TTL),
                    (Config::default().with_min_validity(d), MAX_TTL),
                    (Config::default().with_retry_delay(d), MAX_WAIT),
                    (Config::default().with_retry_jitter(d), MAX_WAIT),
                    (Config::default().with_acquire_timeout(Some(d)), MAX_TTL),
                    (Config::default().with_node_timeout(d), MAX_WAIT),
                    (Config::default().with_max_hold(Some(d)), MAX_TTL),
                ];
                for (config, bound) in settings {
                    prop_assert_eq!(config.validate(5).is_ok(), d <= bound, "{:?}", config);
                }
            }
        }
    }

    #[test]
    fn zero_node_timeout_and_zero_acquire_timeout_are_rejected() {
        let config = Config::default().with_node_timeout(Duration::ZERO);
        assert!(
            config
                .validate(5)
                .unwrap_err()
                .to_string()
                .contains("node timeout")
        );
        let config = Config::default().with_acquire_timeout(Some(Duration::ZERO));
        assert!(
            config
                .validate(5)
                .unwrap_err()
                .to_string()
                .contains("acquire timeout")
        );
    }
}
