//! The operations settings: strict start-up checks, and the holder label
//! that inspection shows.

use super::Config;

impl Config {
    /// When on, every acquisition first runs the start-up checks of
    /// [`Redlock::check`](crate::Redlock::check) until they have passed
    /// once, and fails with their [`Error::Misconfigured`](crate::Error::Misconfigured)
    /// while they do not: a replica, a node with an evicting memory policy,
    /// credentials or an ACL that do not fit, or two URLs of one server
    /// never get to vote. Off by default: the checks then run in the
    /// background on the first acquisition and only log what they find.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_strict_checks(true);
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_strict_checks(mut self, on: bool) -> Self {
        self.strict_checks = on;
        self
    }

    /// Whether acquisitions wait for the start-up checks to pass.
    pub(crate) fn strict_checks(&self) -> bool {
        self.strict_checks
    }

    /// Stores `label` (who holds the lock: a host, a pid, a job name) with
    /// every plain lock this `Redlock` takes, after the random part of the
    /// value, so that [`Redlock::inspect`](crate::Redlock::inspect) and
    /// `redquorum status` can say who holds it. 1 to 200 bytes, no control
    /// characters; never a secret (anyone who may `GET` the key reads it).
    /// Reentrant locks show their owner instead.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_holder_label("web-3:4242");
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_holder_label(mut self, label: impl Into<String>) -> Self {
        self.holder_label = Some(label.into());
        self
    }

    /// The label stored with each lock, if any.
    pub(crate) fn holder_label(&self) -> Option<&str> {
        self.holder_label.as_deref()
    }
}
