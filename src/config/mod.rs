//! [`Config`]: every tunable of the algorithm, its defaults and its validation.

use std::time::Duration;

mod connect;
mod drift;
#[cfg(test)]
mod examples;
mod labels;
mod operations;
mod restart_guard;
mod retry;
mod validate;
mod watchdog;

pub(crate) use connect::Connect;
pub use connect::DEFAULT_CONNECT_TIMEOUT;
pub use watchdog::DEFAULT_EXTEND_AT;
pub(crate) use watchdog::Policy;

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
/// with TTLs: `drift_padding`, `min_validity`, `wait`, `max_hold`.
pub const MAX_TTL: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// The longest accepted `retry_delay`, `retry_jitter` and `node_timeout`:
/// one hour. Longer pauses are almost always a unit mistake.
pub const MAX_WAIT: Duration = Duration::from_secs(60 * 60);

/// Tuning for a [`Redlock`](crate::Redlock).
///
/// Every field has a default; change one with its `with_*` setter and read it
/// back with the getter of the same name. Values are checked when the config
/// is handed to [`Redlock::with_config`](crate::Redlock::with_config), which
/// returns [`Error::Config`](crate::Error::Config) naming the bad value.
///
/// | setting | default | meaning |
/// |---|---|---|
/// | `quorum` | `N/2 + 1` | nodes that must agree; must be in `N/2+1 ..= N` |
/// | `drift_factor` | `0.01` | share of the TTL reserved for clock drift, in `[0, 1)` |
/// | `drift_padding` | `2 ms` | fixed drift allowance added to the proportional part; at most [`MAX_TTL`] |
/// | `min_validity` | `0` | an acquisition must leave more validity than this; at most [`MAX_TTL`] |
/// | `retries` | `10` | retries after the first attempt of `lock` |
/// | `retry_delay` | `200 ms` | pause between attempts; at most [`MAX_WAIT`] |
/// | `retry_jitter` | `100 ms` | random spread (+/-) around `retry_delay`; at most [`MAX_WAIT`] |
/// | `wait` | none | overall deadline for `lock`, across retries; at most [`MAX_TTL`] |
/// | `node_timeout` | `100 ms` | limit on one call to one node (connect included); at most [`MAX_WAIT`] |
/// | `connect_timeout` | `1 s` | limit on opening a connection, which goes on in the background past a call's limit; at most [`MAX_WAIT`] |
/// | `key_prefix` | `"redquorum:"` | prefix of every key written; must not contain `lock:`, `fence:` or `released:` |
/// | `fencing` | `false` | issue a fencing token with every acquisition |
/// | `extend_at` | `1/3` | share of the TTL left when the watchdog extends, in `(0, 1)` |
/// | `max_extensions` | none | at most this many watchdog extensions |
/// | `max_hold` | none | the watchdog never extends past acquisition + this; at most [`MAX_TTL`] |
/// | `reseed_restarted_nodes` | `false` | put the key back on nodes that lost it |
/// | `release_notifications` | `true` | releases wake waiters of `lock()` at once (pub/sub) |
/// | `holder_label` | none | text stored with each lock, shown by [`Redlock::inspect`](crate::Redlock::inspect) |
/// | `strict_checks` | `false` | no acquisition until [`Redlock::check`](crate::Redlock::check) has passed |
/// | `tls_certificates` | none | CA and client certificate for `rediss://` nodes (TLS features) |
/// | `metrics_resource_label` | `false` | lock metrics carry the resource name (feature `metrics`) |
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redquorum::Config;
///
/// let config = Config::default()
///     .with_retries(5)
///     .with_retry_delay(Duration::from_millis(50))
///     .with_node_timeout(Duration::from_millis(30));
/// assert_ne!(config, Config::default());
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
    strict_checks: bool,
    holder_label: Option<String>,
    connect: Connect,
    metrics_resource_label: bool,
    restart_guard: Option<Duration>,
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
            strict_checks: false,
            holder_label: None,
            connect: Connect::default(),
            metrics_resource_label: false,
            restart_guard: None,
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
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_quorum(mut self, quorum: usize) -> Self {
        self.quorum = Some(quorum);
        self
    }

    /// The quorum set with [`with_quorum`](Self::with_quorum), `None` for a majority.
    #[cfg(test)]
    pub(crate) fn quorum(&self) -> Option<usize> {
        self.quorum
    }

    /// Sets the clock-drift allowance an acquisition subtracts from its
    /// validity: `ttl * factor + padding`. `factor` is in `[0, 1)`
    /// (default [`DEFAULT_DRIFT_FACTOR`]), `padding` at most
    /// [`MAX_TTL`] (default [`DEFAULT_DRIFT_PADDING`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redquorum::Config::default().with_drift(0.02, Duration::from_millis(5));
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_drift(mut self, factor: f64, padding: Duration) -> Self {
        self.drift_factor = factor;
        self.drift_padding = padding;
        self
    }

    /// The proportional clock-drift allowance.
    #[cfg(any(test, feature = "sim"))]
    pub(crate) fn drift_factor(&self) -> f64 {
        self.drift_factor
    }

    /// The fixed clock-drift allowance.
    #[cfg(test)]
    pub(crate) fn drift_padding(&self) -> Duration {
        self.drift_padding
    }

    /// Sets the validity an acquisition must leave at least; an attempt that
    /// leaves less (slow nodes ate the TTL) is released and counts as failed.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redquorum::Config::default().with_min_validity(Duration::from_millis(100));
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_min_validity(mut self, min_validity: Duration) -> Self {
        self.min_validity = min_validity;
        self
    }

    /// The least validity an acquisition must leave.
    pub(crate) fn min_validity(&self) -> Duration {
        self.min_validity
    }

    /// Sets the limit on one call to one node, connection set-up included.
    /// A hung node costs at most this much per operation. Keep it well
    /// below the TTLs you use. A connection still opening when a call
    /// gives up goes on opening in the background, up to the
    /// [connect timeout](Self::with_connect_timeout).
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redquorum::Config::default().with_node_timeout(Duration::from_millis(50));
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// The limit on one call to one node.
    pub(crate) fn node_timeout(&self) -> Duration {
        self.node_timeout
    }

    /// Sets the prefix of every key the library writes. The lock of resource
    /// `r` lives at `{prefix}lock:{r}`.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_key_prefix("billing:");
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_key_prefix(mut self, prefix: &str) -> Self {
        prefix.clone_into(&mut self.key_prefix);
        self
    }

    /// The prefix of every key the library writes.
    pub(crate) fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// Turns fencing tokens on or off: every acquisition then issues a
    /// token that strictly increases across acquisitions of the resource,
    /// for one more round trip (see the crate docs, "Fencing tokens", for
    /// how, and for what the nodes must keep). Defaults to `false`.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_fencing(true);
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_fencing(mut self, fencing: bool) -> Self {
        self.fencing = fencing;
        self
    }

    /// Whether acquisitions issue fencing tokens.
    pub(crate) fn fencing(&self) -> bool {
        self.fencing
    }

    /// Sets whether releases wake the waiters of [`Redlock::lock`](crate::Redlock::lock)
    /// at once instead of leaving them to sleep out their retry delay (see
    /// the crate docs, "Waiting", for how and what it costs). When off, this
    /// `Redlock`'s waiters neither subscribe nor mark the locks they wait
    /// for, and only sleep; its releases still announce themselves to the
    /// waiters of other clients that marked them. Defaults to `true`.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_release_notifications(false);
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_release_notifications(mut self, on: bool) -> Self {
        self.release_notifications = on;
        self
    }

    /// Whether releases wake waiting `lock()` calls at once.
    pub(crate) fn release_notifications(&self) -> bool {
        self.release_notifications
    }
}
