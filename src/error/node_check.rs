//! [`NodeCheck`]: the facts the start-up checks read from one node.

use std::time::Duration;

use crate::error::problem::NodeProblem;

/// Facts about one node, from
/// [`Redlock::check_report`](crate::Redlock::check_report).
///
/// ```no_run
/// # async fn run(redlock: redquorum::Redlock) {
/// for node in redlock.check_report().await {
///     println!("{} reachable={} role={:?} policy={:?} latency={:?} problems={}",
///         node.node(), node.reachable(), node.role(), node.eviction_policy(),
///         node.latency(), node.problems().len());
/// }
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct NodeCheck {
    pub(crate) index: usize,
    pub(crate) node: String,
    pub(crate) reachable: bool,
    pub(crate) role: Option<String>,
    pub(crate) eviction_policy: Option<String>,
    pub(crate) run_id: Option<String>,
    pub(crate) cluster_enabled: bool,
    pub(crate) latency: Option<Duration>,
    pub(crate) replicas: Option<usize>,
    pub(crate) persistence: Option<(String, String)>,
    pub(crate) problems: Vec<NodeProblem>,
    pub(crate) cluster_slot: Option<(String, u16)>,
}

impl NodeCheck {
    /// Address, without credentials.
    pub fn node(&self) -> &str {
        &self.node
    }
    /// Whether the node answered at all (an authentication refusal counts as
    /// an answer).
    pub fn reachable(&self) -> bool {
        self.reachable
    }
    /// First element of `ROLE` (`master`, `slave`, `sentinel`), if read.
    pub fn role(&self) -> Option<&str> {
        self.role.as_deref()
    }
    /// `maxmemory-policy`, if `CONFIG GET` is allowed.
    pub fn eviction_policy(&self) -> Option<&str> {
        self.eviction_policy.as_deref()
    }
    /// The server's `run_id` from `INFO server`, if read.
    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }
    /// Round-trip time of the `ROLE` call, if it succeeded.
    pub fn latency(&self) -> Option<Duration> {
        self.latency
    }
    /// For a master, how many replicas `ROLE` lists.
    pub fn replicas(&self) -> Option<usize> {
        self.replicas
    }
    /// `appendonly` and `appendfsync`, if `CONFIG GET` is allowed.
    pub fn persistence(&self) -> Option<(&str, &str)> {
        self.persistence
            .as_ref()
            .map(|(a, f)| (a.as_str(), f.as_str()))
    }
    /// On a lock over a Redis Cluster
    /// (`Redlock::cluster`, feature `cluster`): the node's hash tag
    /// and the slot it hashes to; this check's other facts are those of
    /// the master serving that slot. `None` for independent masters.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) {
    /// for check in redlock.check_report().await {
    ///     if let Some((tag, slot)) = check.cluster_slot() {
    ///         println!("{tag} -> slot {slot} on {}", check.node());
    ///     }
    /// }
    /// # }
    /// ```
    pub fn cluster_slot(&self) -> Option<(&str, u16)> {
        self.cluster_slot
            .as_ref()
            .map(|(tag, slot)| (tag.as_str(), *slot))
    }
    /// Misconfigurations and warnings found on this node (empty when all
    /// is well); see [`NodeProblem::is_warning`].
    pub fn problems(&self) -> &[NodeProblem] {
        &self.problems
    }
}
