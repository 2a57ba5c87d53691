//! Start-up checks: is every node a usable, independent Redis master?
//!
//! [`Redlock::check`](crate::Redlock::check) and
//! [`Redlock::check_report`](crate::Redlock::check_report). The first
//! acquisition of each [`Redlock`](crate::Redlock) also runs the checks in
//! the background and logs each problem with `tracing::warn!`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::{ErrorKind, RedisError, Value};
use tokio::time::Instant;

use crate::node::{Node, NodeError};
use crate::redlock::Shared;

/// One misconfiguration found by [`Redlock::check`](crate::Redlock::check),
/// naming the node (its position in the list given and its address).
///
/// ```
/// use redquorum::NodeProblem;
///
/// let p = NodeProblem::Eviction { index: 2, node: "10.0.0.3:6379".into(), policy: "allkeys-lru".into() };
/// assert!(p.to_string().contains("maxmemory-policy noeviction"));
/// assert_eq!(p.index(), 2);
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeProblem {
    /// No answer (down, wrong address, firewall). Only reported by `check()`
    /// when too few nodes answer for a quorum: a minority down is what
    /// Redlock is built to survive.
    Unreachable {
        /// Position in the node list.
        index: usize,
        /// Address, without credentials.
        node: String,
        /// What the connection said.
        reason: String,
    },
    /// The node refused our credentials (`NOAUTH`, `WRONGPASS`).
    AuthFailed {
        /// Position in the node list.
        index: usize,
        /// Address, without credentials.
        node: String,
        /// The server's message.
        reason: String,
    },
    /// `ROLE` says the node is not a master (a replica refuses writes, and a
    /// replica of another voter is not an independent vote).
    NotMaster {
        /// Position in the node list.
        index: usize,
        /// Address, without credentials.
        node: String,
        /// The role reported (`slave`, `sentinel`).
        role: String,
        /// For a replica, the `host:port` of its master.
        master: Option<String>,
    },
    /// `maxmemory-policy` is not `noeviction`: the node may evict lock keys
    /// before their TTL, and two clients would then hold the lock.
    Eviction {
        /// Position in the node list.
        index: usize,
        /// Address, without credentials.
        node: String,
        /// The policy in force.
        policy: String,
    },
    /// Two URLs lead to the same server (same `run_id`), e.g. a hostname and
    /// its IP, or a proxy: one server would cast two votes.
    Duplicate {
        /// Position in the node list.
        index: usize,
        /// Address, without credentials.
        node: String,
        /// Position of the earlier node that is the same server.
        same_as: usize,
    },
    /// The node is part of a Redis Cluster (`cluster_enabled:1` or a `MOVED`
    /// reply). Redlock needs independent masters; cluster redirections are
    /// never followed.
    Cluster {
        /// Position in the node list.
        index: usize,
        /// Address, without credentials.
        node: String,
    },
}

impl NodeProblem {
    /// Position of the node in the list given to the constructor.
    ///
    /// ```
    /// let p = redquorum::NodeProblem::Cluster { index: 1, node: "a:6379".into() };
    /// assert_eq!(p.index(), 1);
    /// ```
    pub fn index(&self) -> usize {
        match self {
            NodeProblem::Unreachable { index, .. }
            | NodeProblem::AuthFailed { index, .. }
            | NodeProblem::NotMaster { index, .. }
            | NodeProblem::Eviction { index, .. }
            | NodeProblem::Duplicate { index, .. }
            | NodeProblem::Cluster { index, .. } => *index,
        }
    }
}

impl fmt::Display for NodeProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeProblem::Unreachable {
                index,
                node,
                reason,
            } => write!(f, "node {index} ({node}) is unreachable: {reason}"),
            NodeProblem::AuthFailed {
                index,
                node,
                reason,
            } => write!(
                f,
                "node {index} ({node}): authentication failed ({reason}): put the right \
                 user/password in its URL (redis://user:password@host:port/)"
            ),
            NodeProblem::NotMaster {
                index,
                node,
                master: Some(master),
                ..
            } => write!(
                f,
                "node {index} ({node}) is a replica of {master}, not a master: it refuses \
                 writes and is no independent vote; list independent masters only"
            ),
            NodeProblem::NotMaster {
                index, node, role, ..
            } => write!(
                f,
                "node {index} ({node}) is a {role}, not a master: list independent masters only"
            ),
            NodeProblem::Eviction {
                index,
                node,
                policy,
            } => write!(
                f,
                "node {index} ({node}) has maxmemory-policy {policy}: it may evict lock keys \
                 early; set maxmemory-policy noeviction"
            ),
            NodeProblem::Duplicate {
                index,
                node,
                same_as,
            } => write!(
                f,
                "node {index} ({node}) is the same server as node {same_as} (same run_id): \
                 each vote must come from an independent Redis master"
            ),
            NodeProblem::Cluster { index, node } => write!(
                f,
                "node {index} ({node}) is a Redis Cluster node: use independent standalone \
                 masters, not a cluster"
            ),
        }
    }
}

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
    index: usize,
    node: String,
    reachable: bool,
    role: Option<String>,
    eviction_policy: Option<String>,
    run_id: Option<String>,
    cluster_enabled: bool,
    latency: Option<Duration>,
    problems: Vec<NodeProblem>,
}

impl NodeCheck {
    /// Position in the node list.
    pub fn index(&self) -> usize {
        self.index
    }
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
    /// Whether `INFO cluster` says `cluster_enabled:1`.
    pub fn cluster_enabled(&self) -> bool {
        self.cluster_enabled
    }
    /// Round-trip time of the `ROLE` call, if it succeeded.
    pub fn latency(&self) -> Option<Duration> {
        self.latency
    }
    /// Misconfigurations found on this node (empty when all is well).
    pub fn problems(&self) -> &[NodeProblem] {
        &self.problems
    }
}

/// Facts about every node, duplicates resolved across nodes.
pub(crate) async fn report(shared: &Shared) -> Vec<NodeCheck> {
    let mut checks = futures::future::join_all(
        shared
            .nodes
            .iter()
            .enumerate()
            .map(|(index, node)| probe(index, Arc::clone(node))),
    )
    .await;
    for i in 0..checks.len() {
        let Some(run_id) = checks[i].run_id.clone() else {
            continue;
        };
        if let Some(first) = checks[..i]
            .iter()
            .position(|c| c.run_id.as_deref() == Some(&run_id))
        {
            let problem = NodeProblem::Duplicate {
                index: i,
                node: checks[i].node.clone(),
                same_as: first,
            };
            checks[i].problems.push(problem);
        }
    }
    checks
}

/// The problems that make `check()` fail.
pub(crate) fn problems(checks: &[NodeCheck], quorum: usize) -> Vec<NodeProblem> {
    let reachable = checks.iter().filter(|c| c.reachable).count();
    checks
        .iter()
        .flat_map(|c| c.problems.iter())
        .filter(|p| reachable < quorum || !matches!(p, NodeProblem::Unreachable { .. }))
        .cloned()
        .collect()
}

/// Runs the checks in the background on the first acquisition and logs
/// what they find; never blocks or fails the caller.
pub(crate) fn warn_once(shared: &Arc<Shared>) {
    if shared
        .checked
        .swap(true, std::sync::atomic::Ordering::AcqRel)
    {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let shared = Arc::clone(shared);
    runtime.spawn(async move {
        for check in report(&shared).await {
            for problem in check.problems() {
                tracing::warn!(%problem, "redquorum start-up check");
            }
        }
    });
}

enum Probe {
    Value(Value),
    Problem(NodeProblem),
}

fn classify(index: usize, node: &str, err: NodeError) -> NodeProblem {
    let node = node.to_owned();
    match err {
        NodeError::TimedOut => NodeProblem::Unreachable {
            index,
            node,
            reason: "timed out".to_owned(),
        },
        NodeError::Redis(e) if is_auth(&e) => NodeProblem::AuthFailed {
            index,
            node,
            reason: e.to_string(),
        },
        NodeError::Redis(e) if e.code() == Some("MOVED") => NodeProblem::Cluster { index, node },
        NodeError::Redis(e) => NodeProblem::Unreachable {
            index,
            node,
            reason: e.to_string(),
        },
    }
}

fn is_auth(e: &RedisError) -> bool {
    e.kind() == ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"))
        || e.to_string().contains("NOAUTH")
        || e.to_string().contains("WRONGPASS")
}

async fn call(index: usize, node: &Node, cmd: &redis::Cmd) -> Probe {
    match node.command::<Value>(cmd).await {
        Ok(v) => Probe::Value(v),
        Err(e) => Probe::Problem(classify(index, node.name(), e)),
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) | Value::VerbatimString { text: s, .. } => Some(s.clone()),
        _ => None,
    }
}

fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(|v| v.trim().to_owned())
}

async fn probe(index: usize, node: Arc<Node>) -> NodeCheck {
    let mut check = NodeCheck {
        index,
        node: node.name().to_owned(),
        ..NodeCheck::default()
    };
    let started = Instant::now();
    let role = match call(index, &node, &redis::cmd("ROLE")).await {
        Probe::Value(v) => v,
        Probe::Problem(p) => {
            check.reachable = !matches!(p, NodeProblem::Unreachable { .. });
            check.problems.push(p);
            return check;
        }
    };
    check.reachable = true;
    // Round trip on the open connection: the best of three PINGs (the
    // first call above may have paid for connecting).
    check.latency = Some(started.elapsed());
    for _ in 0..3 {
        let start = Instant::now();
        if let Probe::Value(_) = call(index, &node, &redis::cmd("PING")).await {
            let took = start.elapsed();
            check.latency = check.latency.map(|l| l.min(took));
        }
    }
    // `ROLE` answers ["master", ...], ["slave", host, port, ...] or
    // ["sentinel", ...].
    let mut master = None;
    if let Value::Array(items) = &role {
        check.role = items.first().and_then(text);
        if let (Some(host), Some(Value::Int(port))) = (items.get(1).and_then(text), items.get(2)) {
            master = Some(format!("{host}:{port}"));
        }
    }
    if let Some(role) = check.role.as_deref().filter(|r| *r != "master") {
        check.problems.push(NodeProblem::NotMaster {
            index,
            node: check.node.clone(),
            role: role.to_owned(),
            master: master.filter(|_| role == "slave"),
        });
    }
    if let Probe::Value(v) = call(index, &node, redis::cmd("INFO").arg("server")).await {
        check.run_id = text(&v).and_then(|i| info_field(&i, "run_id"));
    }
    if let Probe::Value(v) = call(index, &node, redis::cmd("INFO").arg("cluster")).await {
        check.cluster_enabled =
            text(&v).and_then(|i| info_field(&i, "cluster_enabled")) == Some("1".to_owned());
        if check.cluster_enabled {
            check.problems.push(NodeProblem::Cluster {
                index,
                node: check.node.clone(),
            });
        }
    }
    let policy = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-policy")
        .clone();
    match call(index, &node, &policy).await {
        Probe::Value(Value::Array(items)) => check.eviction_policy = items.get(1).and_then(text),
        Probe::Value(Value::Map(pairs)) => {
            check.eviction_policy = pairs.first().and_then(|(_, v)| text(v));
        }
        _ => tracing::debug!(node = %check.node, "CONFIG GET maxmemory-policy not allowed"),
    }
    if let Some(policy) = check
        .eviction_policy
        .as_deref()
        .filter(|p| *p != "noeviction")
    {
        check.problems.push(NodeProblem::Eviction {
            index,
            node: check.node.clone(),
            policy: policy.to_owned(),
        });
    }
    check
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_are_read_by_exact_name() {
        let info = "# Server\r\nrun_id_x:1\r\nrun_id:abc\r\ncluster_enabled:1\r\n";
        assert_eq!(info_field(info, "run_id").as_deref(), Some("abc"));
        assert_eq!(info_field(info, "cluster_enabled").as_deref(), Some("1"));
    }

    #[test]
    fn unreachable_nodes_fail_the_check_only_without_a_quorum() {
        let down = |index| NodeCheck {
            index,
            problems: vec![NodeProblem::Unreachable {
                index,
                node: format!("n{index}"),
                reason: "refused".into(),
            }],
            ..NodeCheck::default()
        };
        let up = |index| NodeCheck {
            index,
            reachable: true,
            ..NodeCheck::default()
        };
        assert!(problems(&[down(0), up(1), up(2)], 2).is_empty());
        assert_eq!(problems(&[down(0), down(1), up(2)], 2).len(), 2);
    }
}
