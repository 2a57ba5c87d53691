//! Start-up checks: is every node a usable, independent Redis master?
//!
//! [`Redlock::check`](crate::Redlock::check) and
//! [`Redlock::check_report`](crate::Redlock::check_report). The first
//! acquisition of each [`Redlock`](crate::Redlock) also runs the checks in
//! the background and logs each problem with `tracing::warn!`.

use std::sync::Arc;

use redis::{ErrorKind, RedisError, Value};
use tokio::time::Instant;
use tracing::Instrument;

use crate::node::{Node, NodeError};
use crate::problem::{NodeCheck, NodeProblem};

/// Facts about every node, duplicates resolved across nodes.
pub(crate) async fn report(nodes: &[Arc<Node>]) -> Vec<NodeCheck> {
    let span = crate::spans::check(nodes.len());
    let start = Instant::now();
    let probes = nodes
        .iter()
        .enumerate()
        .map(|(index, node)| probe(index, Arc::clone(node)));
    let mut checks = futures_util::future::join_all(probes)
        .instrument(span.clone())
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
    crate::spans::finish_check(&span, &checks, start.elapsed());
    crate::metrics::checked(&checks);
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
