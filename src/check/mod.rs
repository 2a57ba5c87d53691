//! Start-up checks: is every node a usable, independent Redis master?
//!
//! [`Redlock::check`](crate::Redlock::check) and
//! [`Redlock::check_report`](crate::Redlock::check_report). The first
//! acquisition of each [`Redlock`](crate::Redlock) also runs the checks in
//! the background and logs each problem with `tracing::warn!` (or, with
//! [`Config::with_strict_checks`](crate::Config::with_strict_checks), waits
//! for them to pass).

use std::sync::Arc;

use tokio::time::Instant;
use tracing::Instrument;

use crate::node::Node;
mod classify;
mod probe;
pub(crate) mod startup_log;

use crate::error::node_check::NodeCheck;
use crate::error::problem::NodeProblem;
use probe::probe;

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
    // A call sent after the probes began and reported before them is
    // newer news of a node's reachability than its probe.
    let news: Vec<bool> = nodes
        .iter()
        .map(|node| crate::node::observe::check_is_news(node, start))
        .collect();
    crate::metrics::checked(&checks, &news);
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

#[cfg(test)]
mod tests {
    use super::*;

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
