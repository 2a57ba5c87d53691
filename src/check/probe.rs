//! One node's probes: the commands a check sends and what it reads from
//! their answers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::{InfoDict, Role};
use tokio::time::Instant;

use super::classify::{classify, is_unchecked, refused_probe};
use crate::error::node_check::NodeCheck;
use crate::error::problem::NodeProblem;
use crate::node::Node;
use crate::node::restart_guard::{Trust, TrustStatus};

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

pub(super) async fn probe(index: usize, node: Arc<Node>, fencing: bool) -> NodeCheck {
    let mut check = NodeCheck {
        index,
        node: node.name().to_owned(),
        cluster_slot: node.cluster_slot(),
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
        if check.cluster_slot.is_some() {
            // One of the masters of a lock over the cluster.
            return;
        }
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
}
