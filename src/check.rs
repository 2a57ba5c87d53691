//! Start-up checks: is every node a usable, independent Redis master?
//!
//! [`Redlock::check`](crate::Redlock::check) and
//! [`Redlock::check_report`](crate::Redlock::check_report). The first
//! acquisition of each [`Redlock`](crate::Redlock) also runs the checks in
//! the background and logs each problem with `tracing::warn!` (or, with
//! [`Config::with_strict_checks`](crate::Config::with_strict_checks), waits
//! for them to pass).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::{InfoDict, Role};
use tokio::time::Instant;
use tracing::Instrument;

use crate::failure::FailureKind;
use crate::node::restart_guard::{Trust, TrustStatus};
use crate::node::{Node, NodeError};
use crate::node_check::NodeCheck;
use crate::problem::NodeProblem;

/// Facts about every node, duplicates resolved across nodes. `fencing`
/// sharpens the persistence advice (fence counters never expire).
pub(crate) async fn report(nodes: &[Arc<Node>], fencing: bool) -> Vec<NodeCheck> {
    let span = crate::spans::check(nodes.len());
    let start = Instant::now();
    let probes = nodes
        .iter()
        .enumerate()
        .map(|(index, node)| probe(index, Arc::clone(node), fencing));
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

/// The problems that make `check()` fail: not the warnings, and unreachable
/// nodes only when fewer than a quorum of nodes are usable (reachable,
/// with warnings at most: a node that answered with a TLS or ACL problem
/// is no vote either).
pub(crate) fn problems(checks: &[NodeCheck], quorum: usize) -> Vec<NodeProblem> {
    let usable = checks
        .iter()
        .filter(|c| c.reachable && c.problems.iter().all(NodeProblem::is_warning))
        .count();
    checks
        .iter()
        .flat_map(|c| c.problems.iter())
        .filter(|p| !p.is_warning())
        .filter(|p| usable < quorum || !matches!(p, NodeProblem::Unreachable { .. }))
        .cloned()
        .collect()
}

/// The warning for a node count that wastes nodes or tolerates no loss,
/// if any.
pub(crate) fn node_count_warning(nodes: usize) -> Option<String> {
    if nodes < 3 {
        Some(format!(
            "{nodes} node(s): Redlock tolerates no node loss below 3 independent masters; use 3 or 5"
        ))
    } else if nodes.is_multiple_of(2) {
        Some(format!(
            "{nodes} nodes: an even count tolerates no more failures than {} nodes; use an odd count",
            nodes - 1
        ))
    } else {
        None
    }
}

/// A call's error as the problem to report; `command` is what was sent.
fn classify(index: usize, node: &str, command: &str, err: NodeError) -> NodeProblem {
    let node = node.to_owned();
    let failure = match err {
        NodeError::TimedOut => {
            return NodeProblem::Unreachable {
                index,
                node,
                reason: "timed out".to_owned(),
            };
        }
        NodeError::Failed(failure) => failure,
        NodeError::Quarantined(left) => {
            return NodeProblem::Quarantined {
                index,
                node,
                left,
                started: true,
            };
        }
        NodeError::QuarantineMismatch { kept, ours } => {
            return NodeProblem::QuarantineMismatch {
                index,
                node,
                kept,
                ours,
            };
        }
        // Only a fenced acquisition meets it, never a check.
        e @ NodeError::CountersUnknown => {
            return NodeProblem::Unreachable {
                index,
                node,
                reason: e.outcome().to_string(),
            };
        }
    };
    let reason = failure.message().to_owned();
    if is_disabled(&failure) {
        // A managed service's answer to a command it disables.
        return NodeProblem::AclDenied {
            index,
            node,
            command: command.to_owned(),
        };
    }
    match failure.kind() {
        FailureKind::Auth => NodeProblem::AuthFailed {
            index,
            node,
            reason,
        },
        FailureKind::NoPermission { command: denied } => NodeProblem::AclDenied {
            index,
            node,
            command: denied.clone().unwrap_or_else(|| command.to_owned()),
        },
        FailureKind::Tls => NodeProblem::Tls {
            index,
            node,
            reason,
        },
        _ if failure.code() == Some("MOVED") => NodeProblem::Cluster { index, node },
        _ => NodeProblem::Unreachable {
            index,
            node,
            reason,
        },
    }
}

/// True for the answer of a server that disables or renames the command
/// (`ERR unknown command 'CONFIG'`), as managed services do.
fn is_disabled(failure: &crate::failure::NodeFailure) -> bool {
    let message = failure.message().to_ascii_lowercase();
    message.contains("unknown command") || message.contains("unknown subcommand")
}

/// A probe's problem as a warning when its `command` was refused (by the
/// ACL or the provider): what it reads goes unchecked, the other probes
/// still run. The command is named as we sent it (Redis 6.2 says
/// `config` for `config|get`). Other problems are returned as they are.
fn refused_probe(problem: NodeProblem, command: &str) -> NodeProblem {
    match problem {
        NodeProblem::AclDenied { index, node, .. } => NodeProblem::Unchecked {
            index,
            node,
            command: command.to_owned(),
        },
        other => other,
    }
}

/// One command's answer, or the problem it met.
async fn call<T: redis::FromRedisValue>(
    check: &NodeCheck,
    node: &Node,
    cmd: &redis::Cmd,
    name: &str,
) -> Result<T, NodeProblem> {
    call_within(check, node, cmd, name, node.timeout()).await
}

/// [`call`] bounded by `limit` instead of the node timeout.
async fn call_within<T: redis::FromRedisValue>(
    check: &NodeCheck,
    node: &Node,
    cmd: &redis::Cmd,
    name: &str,
    limit: Duration,
) -> Result<T, NodeProblem> {
    node.command_within::<T>(cmd, limit)
        .await
        .map_err(|e| classify(check.index, &check.node, name, e))
}

/// `CONFIG GET name`, when the ACL and the provider allow it. The first
/// refusal is reported once ([`NodeProblem::Unchecked`]); later names are
/// not asked for then.
async fn config_get(check: &mut NodeCheck, node: &Node, name: &str) -> Option<String> {
    if check.problems.iter().any(|p| is_unchecked(p, "config|get")) {
        return None;
    }
    let cmd = redis::cmd("CONFIG").arg("GET").arg(name).clone();
    match call::<HashMap<String, String>>(check, node, &cmd, "config|get").await {
        Ok(mut pairs) => pairs.remove(name),
        Err(problem @ NodeProblem::AclDenied { .. }) => {
            check.problems.push(refused_probe(problem, "config|get"));
            None
        }
        Err(problem) => {
            tracing::debug!(node = %check.node, %problem, "CONFIG GET {name} not read");
            None
        }
    }
}

/// True when `problem` reports the probe `command` as refused.
fn is_unchecked(problem: &NodeProblem, command: &str) -> bool {
    matches!(problem, NodeProblem::Unchecked { command: c, .. } if c == command)
}

async fn probe(index: usize, node: Arc<Node>, fencing: bool) -> NodeCheck {
    let mut check = NodeCheck {
        index,
        node: node.name().to_owned(),
        ..NodeCheck::default()
    };
    let started = Instant::now();
    // The first call may open the connection: it gets the connect timeout
    // too, so that a slow set-up is waited for and a failing one (a TLS
    // certificate refused, say) reports its reason, not "timed out".
    let first = node.timeout().saturating_add(node.connect_timeout());
    let role = match call_within::<Role>(&check, &node, &redis::cmd("ROLE"), "role", first).await {
        Ok(role) => Some(role),
        // Refused (Aiven disables ROLE): say so, and check the rest.
        Err(problem @ NodeProblem::AclDenied { .. }) => {
            check.problems.push(refused_probe(problem, "role"));
            None
        }
        Err(problem) => {
            check.reachable = !matches!(problem, NodeProblem::Unreachable { .. });
            check.problems.push(problem);
            return check;
        }
    };
    check.reachable = true;
    // Round trip on the open connection: the best of three PINGs (the
    // first call above may have paid for connecting).
    check.latency = Some(started.elapsed());
    for _ in 0..3 {
        let start = Instant::now();
        if node.command::<String>(&redis::cmd("PING")).await.is_ok() {
            let took = start.elapsed();
            check.latency = check.latency.map(|l| l.min(took));
        }
    }
    if let Some(role) = role {
        read_role(&mut check, role);
    }
    for section in ["server", "cluster"] {
        let cmd = redis::cmd("INFO").arg(section).clone();
        match call::<InfoDict>(&check, &node, &cmd, "info").await {
            Ok(info) => read_info(&mut check, &info),
            Err(problem @ NodeProblem::AclDenied { .. }) => {
                check.problems.push(refused_probe(problem, "info"));
                break;
            }
            Err(problem) => {
                tracing::debug!(node = %check.node, %problem, "INFO {section} not read")
            }
        }
    }
    check.eviction_policy = config_get(&mut check, &node, "maxmemory-policy").await;
    if let Some(policy) = check.eviction_policy.clone().filter(|p| p != "noeviction") {
        check.problems.push(NodeProblem::Eviction {
            index,
            node: check.node.clone(),
            policy,
        });
    }
    let appendonly = config_get(&mut check, &node, "appendonly").await;
    let appendfsync = config_get(&mut check, &node, "appendfsync").await;
    if let (Some(appendonly), Some(appendfsync)) = (appendonly, appendfsync) {
        if appendonly != "yes" || appendfsync != "always" {
            check.problems.push(NodeProblem::Persistence {
                index,
                node: check.node.clone(),
                appendonly: appendonly.clone(),
                appendfsync: appendfsync.clone(),
                fencing,
            });
        }
        check.persistence = Some((appendonly, appendfsync));
    }
    read_trust(&mut check, &node).await;
    check
}

/// The restart guard's state on the node (when it is on): a quarantine
/// as a warning, another quarantine kept than ours as a problem.
async fn read_trust(check: &mut NodeCheck, node: &Node) {
    let Some(guard) = &node.restart_guard else {
        return;
    };
    let status = node.trust_status(guard).await;
    if let Ok(TrustStatus {
        kept: Some(kept), ..
    }) = status
        && kept != guard.quarantine()
    {
        check.problems.push(NodeProblem::QuarantineMismatch {
            index: check.index,
            node: check.node.clone(),
            kept,
            ours: guard.quarantine(),
        });
    }
    let (left, started) = match status.map(|s| s.trust) {
        Ok(Trust::Trusted) => return,
        Ok(Trust::Quarantined(left)) => (left, true),
        Ok(Trust::Untrusted(left)) => (left, false),
        Err(e) => {
            let problem = classify(check.index, &check.node, "info", e);
            if matches!(problem, NodeProblem::AclDenied { .. }) {
                check.problems.push(problem);
            } else {
                tracing::debug!(node = %check.node, %problem, "restart guard not read");
            }
            return;
        }
    };
    check.problems.push(NodeProblem::Quarantined {
        index: check.index,
        node: check.node.clone(),
        left,
        started,
    });
}

/// Role, replicas, and the not-a-master problem.
fn read_role(check: &mut NodeCheck, role: Role) {
    match role {
        Role::Primary { replicas, .. } => {
            check.role = Some("master".to_owned());
            check.replicas = Some(replicas.len());
            if !replicas.is_empty() {
                check.problems.push(NodeProblem::Replicas {
                    index: check.index,
                    node: check.node.clone(),
                    replicas: replicas.len(),
                });
            }
        }
        Role::Replica {
            primary_ip,
            primary_port,
            ..
        } => {
            check.role = Some("slave".to_owned());
            check.problems.push(NodeProblem::NotMaster {
                index: check.index,
                node: check.node.clone(),
                role: "slave".to_owned(),
                master: Some(format!("{primary_ip}:{primary_port}")),
            });
        }
        other => {
            let role = match other {
                Role::Sentinel { .. } => "sentinel",
                _ => "non-master",
            };
            check.role = Some(role.to_owned());
            check.problems.push(NodeProblem::NotMaster {
                index: check.index,
                node: check.node.clone(),
                role: role.to_owned(),
                master: None,
            });
        }
    }
}

/// `run_id` and the cluster flag, from whichever INFO section has them.
fn read_info(check: &mut NodeCheck, info: &InfoDict) {
    if let Some(run_id) = info.get::<String>("run_id") {
        check.run_id = Some(run_id);
    }
    if info.get::<i64>("cluster_enabled") == Some(1) {
        check.cluster_enabled = true;
        check.problems.push(NodeProblem::Cluster {
            index: check.index,
            node: check.node.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_are_read_by_exact_name() {
        let info = InfoDict::new("# Server\r\nrun_id_x:1\r\nrun_id:abc\r\ncluster_enabled:1\r\n");
        let mut check = NodeCheck::default();
        read_info(&mut check, &info);
        assert_eq!(check.run_id.as_deref(), Some("abc"));
        assert!(check.cluster_enabled);
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
        // Nodes that answered with a TLS failure are no votes: the down
        // node is reported too.
        let tls = |index| NodeCheck {
            index,
            reachable: true,
            problems: vec![NodeProblem::Tls {
                index,
                node: format!("n{index}"),
                reason: "certificate required".into(),
            }],
            ..NodeCheck::default()
        };
        assert_eq!(problems(&[tls(0), tls(1), down(2)], 2).len(), 3);
    }

    #[test]
    fn a_command_the_provider_disables_is_a_refused_probe_not_an_outage() {
        use crate::failure::NodeFailure;
        for message in [
            "ERR unknown command 'ROLE', with args beginning with: ",
            "ERR unknown command `CONFIG`, with args beginning with: `GET`, `maxmemory-policy`, ",
            "ERR unknown subcommand 'GET'. Try CONFIG HELP.",
        ] {
            let failure = NodeFailure::new(FailureKind::Other, message);
            let problem = classify(0, "n0", "role", NodeError::Failed(failure));
            let problem = refused_probe(problem, "role");
            assert!(
                matches!(&problem, NodeProblem::Unchecked { command, .. } if command == "role"),
                "{message}: {problem:?}"
            );
            assert!(problem.is_warning());
        }
        let down = NodeFailure::new(FailureKind::ConnectionRefused, "Connection refused");
        let problem = refused_probe(classify(0, "n0", "role", NodeError::Failed(down)), "role");
        assert!(
            matches!(problem, NodeProblem::Unreachable { .. }),
            "{problem:?}"
        );
    }

    #[test]
    fn warnings_do_not_fail_the_check() {
        let warned = NodeCheck {
            reachable: true,
            problems: vec![NodeProblem::Replicas {
                index: 0,
                node: "n0".into(),
                replicas: 1,
            }],
            ..NodeCheck::default()
        };
        assert!(problems(&[warned], 1).is_empty());
    }

    #[test]
    fn an_even_count_or_fewer_than_three_nodes_is_warned_about() {
        assert!(node_count_warning(1).is_some());
        assert!(node_count_warning(2).is_some());
        assert!(node_count_warning(4).is_some_and(|w| w.contains("3 nodes")));
        assert_eq!(node_count_warning(3), None);
        assert_eq!(node_count_warning(5), None);
    }
}
