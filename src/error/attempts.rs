//! [`Attempts`]: what each node answered when a lock was not acquired,
//! and its one [`Reason`] (misconfiguration, unavailability, validity
//! exhausted, contention).

use std::fmt;

use crate::error::outcome::{NodeOutcome, NodeReport};

/// The one reason a lock was not acquired (or an extension not
/// confirmed), read from [`Attempts::reason`]. With N nodes and a quorum
/// Q, the first of these that applies is the reason, in this order of
/// precedence: misconfigured, unavailable, validity exhausted, contended.
///
/// ```
/// use redquorum::Reason;
///
/// assert_eq!(Reason::Unavailable.to_string(), "nodes unavailable");
/// assert_eq!(Reason::Contended.as_str(), "contended");
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Nodes that failed for a reason waiting does not cure (credentials,
    /// ACL, a replica, TLS: [`NodeOutcome::is_misconfigured`]), together
    /// with those that timed out or failed, were more than N − Q: no quorum
    /// could answer even had the lock been free. The deployment must
    /// change; [`Redlock::lock`](crate::Redlock::lock) stops retrying.
    Misconfigured,
    /// No quorum granted, and refusals alone did not rule one out (at most
    /// N − Q nodes refused): the nodes needed gave no vote in time (down,
    /// hung, failing, quarantined by the restart guard, or not yet
    /// answered when the attempt was decided). An outage, not contention:
    /// waiting may help. An attempt is decided as soon as a quorum is out
    /// of reach, so with nodes down a lock held elsewhere can come out as
    /// this too: the dead nodes' errors came before enough holders refused.
    Unavailable,
    /// A quorum granted, but so late that too little validity was left
    /// (slow nodes used up the TTL); the lock was released again.
    ValidityExhausted,
    /// More than N − Q nodes refused: another owner holds the lock (for an
    /// extension: it is no longer ours), whatever the other nodes would
    /// have answered. Waiting for the holder may help.
    Contended,
}

impl Reason {
    /// The reason as a short label: `misconfigured`, `unavailable`,
    /// `validity_exhausted` or `contended` (the `outcome` of spans and
    /// metrics).
    ///
    /// ```
    /// assert_eq!(redquorum::Reason::ValidityExhausted.as_str(), "validity_exhausted");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Misconfigured => "misconfigured",
            Reason::Unavailable => "unavailable",
            Reason::ValidityExhausted => "validity_exhausted",
            Reason::Contended => "contended",
        }
    }

    /// The reason of a round of `nodes` outcomes decided by `quorum`;
    /// `exhausted`: a quorum granted with too little validity left.
    pub(crate) fn of(nodes: &[NodeReport], quorum: usize, exhausted: bool) -> Self {
        let count =
            |pred: fn(&NodeOutcome) -> bool| nodes.iter().filter(|r| pred(r.outcome())).count();
        let spare = nodes.len().saturating_sub(quorum);
        let misconfigured = count(NodeOutcome::is_misconfigured);
        let failed = misconfigured + count(NodeOutcome::is_unavailable);
        let refused = count(|o| matches!(o, NodeOutcome::Refused));
        if misconfigured > 0 && failed > spare {
            Reason::Misconfigured
        } else if !exhausted && refused <= spare {
            Reason::Unavailable
        } else if exhausted {
            Reason::ValidityExhausted
        } else {
            Reason::Contended
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reason::Misconfigured => "misconfigured nodes",
            Reason::Unavailable => "nodes unavailable",
            Reason::ValidityExhausted => "validity exhausted",
            Reason::Contended => "held by another owner",
        })
    }
}

/// Why a lock was not acquired: the per-node answers of the last attempt,
/// the number of attempts made, the quorum that was needed, and the one
/// [`Reason`] they give.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redquorum::{Error, NodeOutcome, Reason};
///
/// # async fn run(redlock: redquorum::Redlock) {
/// match redlock.lock("jobs", Duration::from_secs(5)).await {
///     Ok(guard) => drop(guard),
///     Err(Error::NotAcquired(why)) => match why.reason() {
///         Reason::Contended => {
///             let refused = why.nodes().iter().filter(|n| *n.outcome() == NodeOutcome::Refused);
///             println!("busy: {} of {} nodes refused", refused.count(), why.nodes().len());
///         }
///         Reason::Unavailable => eprintln!("nodes down: {why}"),
///         Reason::Misconfigured => eprintln!("fix the nodes: {why}"),
///         _ => eprintln!("{why}"),
///     },
///     Err(e) => eprintln!("{e}"),
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempts {
    resource: String,
    attempts: u32,
    quorum: usize,
    nodes: Vec<NodeReport>,
    validity_exhausted: bool,
    operation: Operation,
}

/// What a report is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    Acquire,
    Extend,
    Release,
}

impl Attempts {
    /// Builds the report of `attempts` attempts on `resource` whose last
    /// attempt got the answers `nodes`, `quorum` being needed.
    pub(crate) fn new(
        resource: &str,
        attempts: u32,
        quorum: usize,
        nodes: Vec<NodeReport>,
    ) -> Self {
        Attempts {
            resource: resource.to_owned(),
            attempts,
            quorum,
            nodes,
            validity_exhausted: false,
            operation: Operation::Acquire,
        }
    }

    /// The report is of an extension, not an acquisition.
    pub(crate) fn of_extension(mut self) -> Self {
        self.operation = Operation::Extend;
        self
    }

    /// The report is of a release, not an acquisition.
    pub(crate) fn of_release(mut self) -> Self {
        self.operation = Operation::Release;
        self
    }

    /// True when the report is of an extension.
    #[cfg(feature = "sim")]
    pub(crate) fn is_extension(&self) -> bool {
        self.operation == Operation::Extend
    }

    /// True when the report is of a release.
    #[cfg(feature = "sim")]
    pub(crate) fn is_release(&self) -> bool {
        self.operation == Operation::Release
    }

    pub(crate) fn with_validity_exhausted(mut self, exhausted: bool) -> Self {
        self.validity_exhausted = exhausted;
        self
    }

    /// The resource that was asked for.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// How many attempts were made.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The number of nodes that had to agree.
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// Each node's answer in the last attempt, in the order the nodes were given.
    pub fn nodes(&self) -> &[NodeReport] {
        &self.nodes
    }

    /// Nodes that granted the last attempt.
    pub(crate) fn granted(&self) -> usize {
        self.count(|o| matches!(o, NodeOutcome::Granted))
    }

    /// Nodes that refused: another owner holds the lock (for an
    /// extension: the lock is no longer ours there).
    pub(crate) fn refused(&self) -> usize {
        self.count(|o| matches!(o, NodeOutcome::Refused))
    }

    /// Nodes that timed out or failed for a reason that may pass.
    #[cfg(any(test, feature = "sim"))]
    pub(crate) fn unavailable(&self) -> usize {
        self.count(NodeOutcome::is_unavailable)
    }

    /// Nodes that failed for a reason waiting does not cure (credentials,
    /// ACL, a replica, TLS): see [`NodeOutcome::is_misconfigured`].
    #[cfg(any(test, feature = "sim"))]
    pub(crate) fn misconfigured(&self) -> usize {
        self.count(NodeOutcome::is_misconfigured)
    }

    /// The one reason the attempt failed, by the precedence [`Reason`]
    /// documents: misconfigured, unavailable, validity exhausted,
    /// contended.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) {
    /// if let Err(redquorum::Error::NotAcquired(why)) =
    ///     redlock.try_lock("jobs", std::time::Duration::from_secs(5)).await
    /// {
    ///     println!("{}", why.reason()); // e.g. "held by another owner"
    /// }
    /// # }
    /// ```
    pub fn reason(&self) -> Reason {
        Reason::of(&self.nodes, self.quorum, self.validity_exhausted)
    }

    fn count(&self, pred: impl Fn(&NodeOutcome) -> bool) -> usize {
        self.nodes.iter().filter(|r| pred(r.outcome())).count()
    }
}

impl fmt::Display for Attempts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reason = self.reason();
        match self.operation {
            Operation::Extend => write!(
                f,
                "extension of lock {:?} not confirmed, {reason}: ",
                self.resource
            )?,
            Operation::Release => write!(
                f,
                "release of lock {:?} not confirmed, {reason}: ",
                self.resource
            )?,
            Operation::Acquire => write!(
                f,
                "lock {:?} not acquired after {} attempt(s), {reason}: ",
                self.resource, self.attempts
            )?,
        }
        if self.validity_exhausted {
            f.write_str("a quorum answered too late, no validity left; ")?;
        }
        write!(
            f,
            "{} of {} nodes granted, {} needed",
            self.granted(),
            self.nodes.len(),
            self.quorum
        )?;
        let refused = self.refused();
        if refused > 0 && self.operation != Operation::Acquire {
            write!(f, "; {refused} no longer ours")?;
        } else if refused > 0 {
            write!(f, "; {refused} held by another owner")?;
        }
        let mut sep = "; misconfigured: ";
        for report in self.nodes.iter().filter(|r| r.outcome().is_misconfigured()) {
            write!(f, "{sep}{report}")?;
            sep = ", ";
        }
        let mut sep = "; unavailable: ";
        for report in self.nodes.iter().filter(|r| r.outcome().is_unavailable()) {
            write!(f, "{sep}{report}")?;
            sep = ", ";
        }
        if self.operation == Operation::Release {
            f.write_str("; the lock had not expired, and its keys on the nodes that did not answer lapse at their TTL")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::error::failure::{FailureKind, NodeFailure};

    fn failed(kind: FailureKind, message: &str) -> NodeOutcome {
        NodeOutcome::Failed(NodeFailure::new(kind, message))
    }

    fn refused_connection() -> NodeOutcome {
        failed(FailureKind::ConnectionRefused, "connection refused")
    }

    fn attempts(outcomes: &[NodeOutcome]) -> Attempts {
        let nodes = outcomes
            .iter()
            .enumerate()
            .map(|(i, o)| NodeReport::new(format!("n{i}:6379"), o.clone()))
            .collect();
        Attempts::new("res", 2, 3, nodes)
    }

    #[test]
    fn three_dead_nodes_of_five_is_unavailability_not_contention() {
        let a = attempts(&[
            refused_connection(),
            NodeOutcome::TimedOut,
            refused_connection(),
            NodeOutcome::Granted,
            NodeOutcome::Pending,
        ]);
        assert!(a.reason() == Reason::Unavailable);
        assert!(a.reason() != Reason::Contended);
        assert_eq!(a.unavailable(), 3);
    }

    #[test]
    fn display_is_one_line_naming_the_failed_nodes() {
        let a = attempts(&[
            NodeOutcome::Refused,
            refused_connection(),
            NodeOutcome::Granted,
            NodeOutcome::Granted,
            NodeOutcome::TimedOut,
        ]);
        let text = Error::NotAcquired(Box::new(a)).to_string();
        assert!(!text.contains('\n'));
        assert!(
            text.contains("\"res\" not acquired after 2 attempt(s)"),
            "{text}"
        );
        assert!(text.contains("2 of 5 nodes granted, 3 needed"), "{text}");
        assert!(text.contains("1 held by another owner"), "{text}");
        assert!(
            text.contains("n1:6379: error: connection refused"),
            "{text}"
        );
        assert!(text.contains("n4:6379: timed out"), "{text}");
    }

    #[test]
    fn nodes_denied_by_the_acl_are_misconfigured_not_unavailable() {
        let denied = || {
            failed(
                FailureKind::NoPermission {
                    command: Some("evalsha".into()),
                },
                "NOPERM",
            )
        };
        let a = attempts(&[
            denied(),
            denied(),
            refused_connection(),
            NodeOutcome::Granted,
            NodeOutcome::Granted,
        ]);
        assert!(a.reason() == Reason::Misconfigured);
        assert!(a.reason() != Reason::Unavailable);
        assert_eq!((a.misconfigured(), a.unavailable()), (2, 1));
        let text = a.to_string();
        assert!(
            text.contains("misconfigured: n0:6379: error: the ACL forbids `evalsha`"),
            "{text}"
        );
    }

    #[test]
    fn one_misconfigured_node_that_does_not_block_the_quorum_is_no_verdict() {
        let a = attempts(&[
            failed(FailureKind::ReadOnly, "READONLY"),
            NodeOutcome::Refused,
            NodeOutcome::Refused,
            NodeOutcome::Refused,
            NodeOutcome::Granted,
        ]);
        assert!(a.reason() != Reason::Misconfigured);
        assert!(a.reason() == Reason::Contended);
    }

    #[test]
    fn one_refusal_with_the_rest_down_or_unanswered_is_unavailability() {
        // Two dead, two still pending at the decision, one stale key.
        let a = attempts(&[
            refused_connection(),
            refused_connection(),
            NodeOutcome::Pending,
            NodeOutcome::Pending,
            NodeOutcome::Refused,
        ]);
        assert_eq!(a.reason(), Reason::Unavailable);
        assert!(a.reason() == Reason::Unavailable && a.reason() != Reason::Contended);
    }

    #[test]
    fn contention_needs_more_refusals_than_the_nodes_a_quorum_can_spare() {
        let mut outcomes = vec![NodeOutcome::Granted, NodeOutcome::TimedOut];
        outcomes.extend([const { NodeOutcome::Refused }; 2]);
        outcomes.push(NodeOutcome::Pending);
        assert_eq!(attempts(&outcomes).reason(), Reason::Unavailable);
        outcomes[4] = NodeOutcome::Refused;
        assert_eq!(attempts(&outcomes).reason(), Reason::Contended);
    }

    #[test]
    fn misconfiguration_comes_first_and_validity_before_contention() {
        let denied = || failed(FailureKind::ReadOnly, "READONLY");
        let a = attempts(&[
            denied(),
            denied(),
            NodeOutcome::TimedOut,
            NodeOutcome::Refused,
            NodeOutcome::Refused,
        ]);
        assert_eq!(a.reason(), Reason::Misconfigured);
        let late = attempts(&[
            NodeOutcome::Granted,
            NodeOutcome::Granted,
            NodeOutcome::Granted,
            NodeOutcome::Refused,
            NodeOutcome::Refused,
        ])
        .with_validity_exhausted(true);
        assert_eq!(late.reason(), Reason::ValidityExhausted);
        assert!(late.reason() == Reason::ValidityExhausted && late.reason() != Reason::Contended);
    }

    #[test]
    fn only_refusals_that_rule_out_a_quorum_are_contention_in_every_report() {
        let kinds = [
            NodeOutcome::Granted,
            NodeOutcome::Refused,
            NodeOutcome::TimedOut,
            NodeOutcome::Pending,
            failed(FailureKind::ReadOnly, "READONLY"),
        ];
        for code in 0..kinds.len().pow(5) {
            let outcomes: Vec<NodeOutcome> = (0..5)
                .map(|i| kinds[code / kinds.len().pow(i) % kinds.len()].clone())
                .collect();
            let a = attempts(&outcomes);
            if a.granted() >= 3 {
                continue; // not a lost round
            }
            let ruled_out = a.refused() > 2;
            match a.reason() {
                Reason::Contended => assert!(ruled_out, "{outcomes:?}"),
                Reason::Unavailable => assert!(!ruled_out, "{outcomes:?}"),
                Reason::Misconfigured => assert!(a.misconfigured() > 0, "{outcomes:?}"),
                Reason::ValidityExhausted => panic!("{outcomes:?}"),
            }
            if ruled_out && a.misconfigured() == 0 {
                assert_eq!(a.reason(), Reason::Contended, "{outcomes:?}");
            }
        }
    }

    #[test]
    fn an_unconfirmed_release_says_so_and_names_the_silent_nodes() {
        let a = attempts(&[
            NodeOutcome::Granted,
            NodeOutcome::TimedOut,
            NodeOutcome::TimedOut,
            NodeOutcome::Granted,
            NodeOutcome::TimedOut,
        ])
        .of_release();
        assert!(a.operation == Operation::Release);
        let text = a.to_string();
        assert!(
            text.starts_with("release of lock \"res\" not confirmed, nodes unavailable"),
            "{text}"
        );
        assert!(
            text.contains("n1:6379: timed out, n2:6379: timed out, n4:6379: timed out"),
            "{text}"
        );
        assert!(text.contains("lapse at their TTL"), "{text}");
    }

    #[test]
    fn contention_with_all_nodes_up_is_not_unavailability() {
        let a = attempts(&[const { NodeOutcome::Refused }; 5]);
        assert!(a.reason() == Reason::Contended);
        assert!(a.reason() != Reason::Unavailable);
    }
}
