//! [`NodeOutcome`] and [`NodeReport`]: what one node answered in one
//! round.

use std::fmt;

/// What one node answered in one attempt.
///
/// # Examples
///
/// ```
/// use redquorum::NodeOutcome;
///
/// let outcome = NodeOutcome::Refused;
/// assert_ne!(outcome, redquorum::NodeOutcome::Granted);
/// assert!(!outcome.is_unavailable());
/// assert_eq!(outcome.to_string(), "refused");
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeOutcome {
    /// The node granted the request: the lock set, extended or released.
    Granted,
    /// The node refused: for an acquisition, another owner holds the key;
    /// for an extension or a release, the key is no longer ours (expired,
    /// or another owner's).
    Refused,
    /// No answer within the node timeout.
    TimedOut,
    /// A connection or server error: its [`FailureKind`](crate::FailureKind)
    /// and message.
    Failed(crate::error::failure::NodeFailure),
    /// The attempt was decided before this node answered.
    Pending,
    /// The restart guard refused the vote: the node restarted, lost its
    /// data or is new, and may have forgotten locks it granted, so it votes
    /// again only once they have all expired, after `left`. Counts as
    /// [unavailability](NodeOutcome::is_unavailable): it passes by itself.
    /// See [`Config::with_restart_guard`](crate::Config::with_restart_guard).
    Quarantined {
        /// How much longer the node refuses to vote.
        left: std::time::Duration,
    },
    /// The restart guard refused: the node keeps another quarantine than
    /// this client announces (`max_ttl` or the drift settings differ
    /// between clients of the nodes). They must be the same on every
    /// client: a [misconfiguration](NodeOutcome::is_misconfigured), which
    /// [`Redlock::lock`](crate::Redlock::lock) does not wait out. Until it
    /// is fixed, the longer of the two is given to every node still in
    /// quarantine. See
    /// [`Config::with_restart_guard`](crate::Config::with_restart_guard).
    QuarantineMismatch {
        /// The quarantine the node keeps.
        kept: std::time::Duration,
        /// The quarantine this client announces
        /// ([`Config::quarantine`](crate::Config::quarantine)).
        ours: std::time::Duration,
    },
    /// With the restart guard and fencing on: the node's fence counters of
    /// the resource are not known intact (its trust period began after they
    /// were last written back: it restarted, under any persistence mode, or
    /// lost data), so it is no vote in the fenced read. Its lock keys were
    /// set all the same, and a token written back makes them count again.
    /// When more nodes than a quorum can spare answer this, no token can be
    /// issued until someone vouches for the counters
    /// ([`Redlock::vouch_fence_counters`](crate::Redlock::vouch_fence_counters)):
    /// a [misconfiguration](NodeOutcome::is_misconfigured), which
    /// [`Redlock::lock`](crate::Redlock::lock) does not wait out.
    CountersUnknown,
}

impl NodeOutcome {
    /// True when the node granted the request.
    pub(crate) fn is_success(&self) -> bool {
        matches!(self, NodeOutcome::Granted)
    }

    /// True when the node could not be used for a reason that may pass
    /// (a timeout, a refused or broken connection, a server error, a
    /// [quarantine](NodeOutcome::Quarantined) after a restart), as
    /// opposed to answering that someone else holds the lock, or to a
    /// [misconfiguration](NodeOutcome::is_misconfigured).
    ///
    /// ```
    /// assert!(redquorum::NodeOutcome::TimedOut.is_unavailable());
    /// ```
    pub fn is_unavailable(&self) -> bool {
        match self {
            NodeOutcome::TimedOut | NodeOutcome::Quarantined { .. } => true,
            NodeOutcome::Failed(failure) => !failure.kind().is_misconfiguration(),
            _ => false,
        }
    }

    /// True when the node failed for a reason waiting does not cure: our
    /// credentials refused, the ACL forbids a command, the node is a
    /// read-only replica, TLS settings do not match
    /// ([`FailureKind::is_misconfiguration`](crate::FailureKind::is_misconfiguration)),
    /// the node keeps another restart-guard quarantine than this client
    /// ([`NodeOutcome::QuarantineMismatch`]), its fence counters are not
    /// known intact ([`NodeOutcome::CountersUnknown`]: only an operator's
    /// word, or a token written back, mends them).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redquorum::NodeOutcome;
    ///
    /// assert!(!NodeOutcome::TimedOut.is_misconfigured());
    /// let mismatch = NodeOutcome::QuarantineMismatch {
    ///     kept: Duration::from_millis(20_202),
    ///     ours: Duration::from_millis(303),
    /// };
    /// assert!(mismatch.is_misconfigured() && !mismatch.is_unavailable());
    /// ```
    pub fn is_misconfigured(&self) -> bool {
        match self {
            NodeOutcome::Failed(failure) => failure.kind().is_misconfiguration(),
            NodeOutcome::QuarantineMismatch { .. } | NodeOutcome::CountersUnknown => true,
            _ => false,
        }
    }
}

impl fmt::Display for NodeOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeOutcome::Granted => f.write_str("granted"),
            NodeOutcome::Refused => f.write_str("refused"),
            NodeOutcome::TimedOut => f.write_str("timed out"),
            NodeOutcome::Failed(why) => write!(f, "error: {why}"),
            NodeOutcome::Pending => f.write_str("no answer yet"),
            NodeOutcome::Quarantined { left } => write!(
                f,
                "quarantined for {left:?} (restarted or lost its data; votes once every lock \
                 it may have granted has expired)"
            ),
            NodeOutcome::QuarantineMismatch { kept, ours } => write!(
                f,
                "restart-guard quarantine mismatch: the node keeps {kept:?}, this client \
                 announces {ours:?}; give every client of the nodes the same max_ttl and \
                 drift settings"
            ),
            NodeOutcome::CountersUnknown => f.write_str(
                "fence counters not known intact: this node restarted or lost data since they \
                 were last written back, so it is no vote in the fenced read; if its counters \
                 survived (appendfsync always, no flush, no eviction), vouch for them: \
                 `redquorum --restart-guard MAX_TTL vouch-counters --resource NAME \
                 --counters-are-intact` (Redlock::vouch_fence_counters)",
            ),
        }
    }
}

/// One node's answer: which node, and what it said. Read from
/// [`Attempts::nodes`](crate::Attempts::nodes); shown as `127.0.0.1:7001: timed out`.
///
/// ```no_run
/// use redquorum::{Error, NodeOutcome};
///
/// # async fn run(redlock: redquorum::Redlock) {
/// if let Err(Error::NotAcquired(why)) = redlock.try_lock("jobs", std::time::Duration::from_secs(5)).await {
///     for report in why.nodes() {
///         if report.outcome().is_unavailable() {
///             eprintln!("{report}"); // e.g. "127.0.0.1:7001: timed out"
///         }
///     }
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReport {
    node: String,
    outcome: NodeOutcome,
}

impl NodeReport {
    /// A report for `node` (its address, without credentials).
    pub(crate) fn new(node: impl Into<String>, outcome: NodeOutcome) -> Self {
        NodeReport {
            node: node.into(),
            outcome,
        }
    }

    /// The node's address, without credentials.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// What the node answered.
    pub fn outcome(&self) -> &NodeOutcome {
        &self.outcome
    }
}

impl fmt::Display for NodeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.node, self.outcome)
    }
}
