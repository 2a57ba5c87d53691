//! What the start-up checks log: each problem once, but the persistence
//! of the nodes in one line per [`Redlock`](crate::Redlock), and none of
//! its advice when the restart guard is on (the guard is what it advises).

use crate::error::node_check::NodeCheck;
use crate::error::problem::NodeProblem;

/// Logs the warnings of `checks` at warn level: the persistence warnings
/// of every node as one line (at debug level with the restart guard on and
/// fencing off: the guard keeps a restart from granting a held lock again),
/// every other warning on its own.
pub(crate) fn log_warnings(checks: &[NodeCheck], restart_guard: bool, fencing: bool) {
    let mut persistence = Vec::new();
    for problem in checks.iter().flat_map(NodeCheck::problems) {
        match problem {
            NodeProblem::Persistence {
                index,
                node,
                appendonly,
                appendfsync,
                ..
            } => {
                let setting = if appendonly == "yes" {
                    format!("appendfsync {appendfsync}")
                } else {
                    format!("appendonly {appendonly}")
                };
                persistence.push(format!("node {index} ({node}) {setting}"));
            }
            problem if problem.is_warning() => {
                tracing::warn!(%problem, "redquorum start-up check");
            }
            _ => {}
        }
    }
    if persistence.is_empty() {
        return;
    }
    let problem = persistence_line(&persistence, checks.len(), restart_guard, fencing);
    if restart_guard && !fencing {
        tracing::debug!(%problem, "redquorum start-up check");
    } else {
        tracing::warn!(%problem, "redquorum start-up check");
    }
}

/// Logs, at warn level, the problems of `checks` that fail
/// [`Redlock::check`](crate::Redlock::check): for the background check of
/// the first acquisition, which nothing else reports.
pub(crate) fn log_errors(checks: &[NodeCheck]) {
    for problem in checks.iter().flat_map(NodeCheck::problems) {
        if !problem.is_warning() {
            tracing::warn!(%problem, "redquorum start-up check");
        }
    }
}

/// The one line on the nodes in `nodes` (each named with its setting) of
/// `total`, with the advice that fits.
fn persistence_line(nodes: &[String], total: usize, restart_guard: bool, fencing: bool) -> String {
    let mut line = format!(
        "{} of {total} nodes forget recent writes on a restart ({})",
        nodes.len(),
        nodes.join(", ")
    );
    if restart_guard {
        line.push_str(": the restart guard keeps a restarted node from granting a held lock again");
    } else {
        line.push_str(
            ": a restart forgets recent locks; turn on the restart guard \
             (Config::with_restart_guard), or restart a node only after the longest \
             TTL, or set appendonly yes and appendfsync always",
        );
    }
    if fencing {
        line.push_str(
            "; with fencing on, a restart can lose fence counters (with the guard on, \
             fenced locks then wait until the counters are vouched for: \
             Redlock::vouch_fence_counters); appendonly yes and appendfsync always keep them",
        );
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> Vec<String> {
        vec![
            "node 0 (a:1) appendonly no".into(),
            "node 3 (b:2) appendfsync everysec".into(),
        ]
    }

    #[test]
    fn the_line_names_every_node_and_its_setting() {
        let line = persistence_line(&two(), 5, false, false);
        assert!(line.starts_with("2 of 5 nodes"), "{line}");
        assert!(line.contains("node 0 (a:1) appendonly no"), "{line}");
        assert!(line.contains("node 3 (b:2) appendfsync everysec"), "{line}");
        assert!(line.contains("with_restart_guard"), "{line}");
    }

    #[test]
    fn with_the_guard_on_the_line_does_not_advise_the_guard() {
        let line = persistence_line(&two(), 5, true, false);
        assert!(!line.contains("with_restart_guard"), "{line}");
        let fenced = persistence_line(&two(), 5, true, true);
        assert!(fenced.contains("vouch_fence_counters"), "{fenced}");
    }
}
