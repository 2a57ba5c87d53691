//! [`Error`]: everything that can go wrong, and the reports errors and
//! checks carry: a failed round's [`Attempts`], each node's outcome
//! ([`NodeOutcome`], [`NodeReport`]) and failure
//! ([`NodeFailure`](failure::NodeFailure)), a check's findings
//! ([`NodeCheck`](node_check::NodeCheck),
//! [`NodeProblem`](problem::NodeProblem)).

pub(crate) mod attempts;
pub(crate) mod failure;
pub(crate) mod node_check;
pub(crate) mod outcome;
pub(crate) mod problem;

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub use attempts::{Attempts, Reason};
pub use outcome::{NodeOutcome, NodeReport};

/// Everything that can go wrong, as a value the caller can match on.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redquorum::{Error, Redlock};
///
/// # async fn run() {
/// let redlock = Redlock::new(["redis://127.0.0.1:7001/"]).unwrap();
/// match redlock.try_lock("", Duration::from_secs(1)).await {
///     Err(Error::InvalidArgument(why)) => assert!(why.contains("empty")),
///     other => panic!("{other:?}"),
/// }
/// # }
/// ```
#[non_exhaustive]
#[derive(thiserror::Error, Debug)]
pub enum Error {
    /// The nodes or the [`Config`](crate::Config) given at construction are
    /// unusable (no nodes, a bad URL, the same node twice, a quorum out of
    /// range, a drift factor out of range...). The message names the value.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An argument of a call is unusable (empty resource name, a TTL of zero,
    /// not above the drift allowance, or too large). The message names it.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// No quorum was reached after every attempt. [`Attempts`] holds what each
    /// node answered in the last attempt and tells contention from
    /// unavailability.
    #[error("{0}")]
    NotAcquired(Box<Attempts>),
    /// The lock's validity ran out, or a quorum of nodes no longer holds our
    /// value (more than N − quorum nodes answered that it is not ours): it
    /// may already belong to someone else.
    #[error("the lock expired: its validity ran out or a quorum no longer holds it")]
    Expired,
    /// A release of a lock that had not expired could not be confirmed:
    /// too few nodes answered for a quorum (hung, down, failing), and not
    /// enough of them said the lock was gone to call it expired. The lock
    /// was held until the release; its keys on the nodes that did not
    /// answer lapse at their TTL (or are deleted once the delete reaches
    /// them). [`Attempts`] names each node and its answer.
    #[error("{0}")]
    ReleaseUnconfirmed(Box<Attempts>),
    /// The lock was lost while held (an extension could not reach a quorum
    /// before the validity ran out).
    #[error("the lock was lost: it could not be kept on a quorum of nodes")]
    Lost,
    /// [`Redlock::check`](crate::Redlock::check) found misconfigured nodes:
    /// one entry per problem, each naming its node and what to change.
    #[error("misconfigured nodes: {}", list_problems(.0))]
    Misconfigured(Vec<crate::error::problem::NodeProblem>),
    /// On a Redis Cluster (`Redlock::cluster`,
    /// feature `cluster`): the cluster's layout could not be read, or two
    /// of the lock's nodes are served by one master, so one master's loss
    /// would take two votes. Acquisitions are refused until the layout
    /// gives each node its own master again. The message names the nodes,
    /// their hash tags and slots, and the master.
    #[error("cluster placement: {0}")]
    Placement(String),
}

fn list_problems(problems: &[crate::error::problem::NodeProblem]) -> String {
    let texts: Vec<String> = problems.iter().map(ToString::to_string).collect();
    texts.join("; ")
}
