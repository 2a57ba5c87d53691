//! [`Attempts`]: what each node answered when a lock was not acquired,
//! and what that says (contention, unavailability, misconfiguration).

use std::fmt;

use crate::outcome::{NodeOutcome, NodeReport};

/// Why a lock was not acquired: the per-node answers of the last attempt,
/// the number of attempts made and the quorum that was needed.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redquorum::Error;
///
/// # async fn run(redlock: redquorum::Redlock) {
/// match redlock.lock("jobs", Duration::from_secs(5)).await {
///     Ok(guard) => drop(guard),
///     Err(Error::NotAcquired(why)) if why.is_contended() => {
///         println!("busy: {} of {} nodes refused", why.refused(), why.nodes().len());
///     }
///     Err(Error::NotAcquired(why)) if why.is_unavailable() => eprintln!("nodes down: {why}"),
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
    extension: bool,
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
            extension: false,
        }
    }

    /// The report is of an extension, not an acquisition.
    pub(crate) fn of_extension(mut self) -> Self {
        self.extension = true;
        self
    }

    /// True when the report is of an extension (the lock was held, and an
    /// extension could not be confirmed), false for an acquisition.
    pub fn is_extension(&self) -> bool {
        self.extension
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
    pub fn granted(&self) -> usize {
        self.count(NodeOutcome::is_success)
    }

    /// Nodes that refused: another owner holds the lock (for an
    /// extension: the lock is no longer ours there).
    pub fn refused(&self) -> usize {
        self.count(|o| matches!(o, NodeOutcome::Refused))
    }

    /// Nodes that timed out or failed for a reason that may pass.
    pub fn unavailable(&self) -> usize {
        self.count(NodeOutcome::is_unavailable)
    }

    /// Nodes that failed for a reason waiting does not cure (credentials,
    /// ACL, a replica, TLS): see [`NodeOutcome::is_misconfigured`].
    pub fn misconfigured(&self) -> usize {
        self.count(NodeOutcome::is_misconfigured)
    }

    /// True when another owner holds the lock on at least one node: waiting
    /// and trying again may help.
    pub fn is_contended(&self) -> bool {
        self.refused() > 0
    }

    /// True when so many nodes timed out or failed that a quorum could not
    /// have been reached even if the lock had been free, and no node was
    /// [misconfigured](Attempts::is_misconfigured): the nodes are down,
    /// waiting may help.
    pub fn is_unavailable(&self) -> bool {
        !self.is_misconfigured() && self.usable() < self.quorum
    }

    /// True when a quorum could not have been reached even if the lock had
    /// been free, and misconfigured nodes (credentials, ACL, a replica,
    /// TLS) are among the reasons: waiting does not help, the deployment
    /// must change. [`Redlock::lock`](crate::Redlock::lock) stops retrying
    /// then.
    pub fn is_misconfigured(&self) -> bool {
        self.misconfigured() > 0 && self.usable() < self.quorum
    }

    /// Nodes neither unavailable nor misconfigured.
    fn usable(&self) -> usize {
        self.nodes.len() - self.unavailable() - self.misconfigured()
    }

    /// True when a quorum granted the lock but too little validity was left
    /// (slow nodes used up the TTL), so it was released again.
    pub fn is_validity_exhausted(&self) -> bool {
        self.validity_exhausted
    }

    fn count(&self, pred: impl Fn(&NodeOutcome) -> bool) -> usize {
        self.nodes.iter().filter(|r| pred(r.outcome())).count()
    }
}

impl fmt::Display for Attempts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.extension {
            write!(f, "extension of lock {:?} not confirmed: ", self.resource)?;
        } else {
            write!(
                f,
                "lock {:?} not acquired after {} attempt(s): ",
                self.resource, self.attempts
            )?;
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
        if refused > 0 && self.extension {
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::failure::{FailureKind, NodeFailure};

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
        assert!(a.is_unavailable());
        assert!(!a.is_contended());
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
        assert!(a.is_misconfigured());
        assert!(!a.is_unavailable());
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
        assert!(!a.is_misconfigured());
        assert!(a.is_contended());
    }

    #[test]
    fn contention_with_all_nodes_up_is_not_unavailability() {
        let a = attempts(&[const { NodeOutcome::Refused }; 5]);
        assert!(a.is_contended());
        assert!(!a.is_unavailable());
    }
}
