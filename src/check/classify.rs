//! A probe's error as the problem a check reports.

use crate::error::failure::FailureKind;
use crate::error::problem::NodeProblem;
use crate::node::NodeError;

/// A call's error as the problem to report; `command` is what was sent.
pub(super) fn classify(index: usize, node: &str, command: &str, err: NodeError) -> NodeProblem {
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
fn is_disabled(failure: &crate::error::failure::NodeFailure) -> bool {
    let message = failure.message().to_ascii_lowercase();
    message.contains("unknown command") || message.contains("unknown subcommand")
}

/// A probe's problem as a warning when its `command` was refused (by the
/// ACL or the provider): what it reads goes unchecked, the other probes
/// still run. The command is named as we sent it (Redis 6.2 says
/// `config` for `config|get`). Other problems are returned as they are.
pub(super) fn refused_probe(problem: NodeProblem, command: &str) -> NodeProblem {
    match problem {
        NodeProblem::AclDenied { index, node, .. } => NodeProblem::Unchecked {
            index,
            node,
            command: command.to_owned(),
        },
        other => other,
    }
}

/// True when `problem` reports the probe `command` as refused.
pub(super) fn is_unchecked(problem: &NodeProblem, command: &str) -> bool {
    matches!(problem, NodeProblem::Unchecked { command: c, .. } if c == command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_the_provider_disables_is_a_refused_probe_not_an_outage() {
        use crate::error::failure::NodeFailure;
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
}
