//! What the start-up checks report: [`NodeProblem`], one misconfiguration
//! (or warning) of one node.

use std::fmt;

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
    /// The node's ACL forbids a command the checks or the lock need
    /// (`NOPERM`): the node answered, but cannot be checked or used.
    AclDenied {
        /// Position in the node list.
        index: usize,
        /// Address, without credentials.
        node: String,
        /// The command to allow, in lower case (`role`, `info`).
        command: String,
    },
    /// The TLS handshake failed (an untrusted certificate, a name that does
    /// not match, TLS spoken to a plain port).
    Tls {
        /// Position in the node list.
        index: usize,
        /// Address, without credentials.
        node: String,
        /// What the TLS layer said.
        reason: String,
    },
    /// A warning: one probe of the checks was refused, by the node's ACL or
    /// by a managed service that disables the command (Aiven's `ROLE`,
    /// ElastiCache's and Azure's `CONFIG`), so what it reads went
    /// unchecked; the other probes still ran. Does not fail
    /// [`Redlock::check`](crate::Redlock::check).
    Unchecked {
        /// Position in the node list.
        index: usize,
        /// Address, without credentials.
        node: String,
        /// The command refused, in lower case: `role`, `info` or
        /// `config|get`.
        command: String,
    },
    /// A warning: the master has connected replicas. A failover to a
    /// replica that had not yet received the latest writes loses the locks
    /// (and fence counters) written last, and two clients can then hold one
    /// lock. Does not fail [`Redlock::check`](crate::Redlock::check).
    Replicas {
        /// Position in the node list.
        index: usize,
        /// Address, without credentials.
        node: String,
        /// How many replicas `ROLE` lists.
        replicas: usize,
    },
    /// A warning: a restart of this node forgets recent writes
    /// (`appendonly` is not `yes`, or `appendfsync` is not `always`). Safe
    /// with the restart guard on, or if it is restarted only after the
    /// longest TTL has passed; fence counters, which never expire, are not
    /// saved by a delayed restart.
    /// Does not fail [`Redlock::check`](crate::Redlock::check).
    Persistence {
        /// Position in the node list.
        index: usize,
        /// Address, without credentials.
        node: String,
        /// `appendonly` in force.
        appendonly: String,
        /// `appendfsync` in force.
        appendfsync: String,
        /// Whether fencing is on (the advice is then firmer).
        fencing: bool,
    },
    /// A warning: the restart guard keeps this node from voting for `left`
    /// (it restarted, lost its data or is new), or, when `started` is
    /// false, it has no record for its process yet and its next vote
    /// starts a quarantine of `left`. The node counts as unavailable until
    /// then; it passes by itself, so it does not fail
    /// [`Redlock::check`](crate::Redlock::check).
    Quarantined {
        /// Position in the node list.
        index: usize,
        /// Address, without credentials.
        node: String,
        /// How long it still refuses to vote (or will, from its next vote).
        left: std::time::Duration,
        /// Whether the quarantine is under way.
        started: bool,
    },
    /// The node keeps another restart-guard quarantine than this client
    /// announces, so it refuses this client's votes and extensions: the
    /// clients of the nodes disagree on `max_ttl` or the drift settings,
    /// which must be the same on every client (see
    /// [`Config::with_restart_guard`](crate::Config::with_restart_guard)).
    QuarantineMismatch {
        /// Position in the node list.
        index: usize,
        /// Address, without credentials.
        node: String,
        /// The quarantine the node keeps.
        kept: std::time::Duration,
        /// The quarantine this client announces.
        ours: std::time::Duration,
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
            | NodeProblem::Cluster { index, .. }
            | NodeProblem::AclDenied { index, .. }
            | NodeProblem::Tls { index, .. }
            | NodeProblem::Unchecked { index, .. }
            | NodeProblem::Replicas { index, .. }
            | NodeProblem::Persistence { index, .. }
            | NodeProblem::Quarantined { index, .. }
            | NodeProblem::QuarantineMismatch { index, .. } => *index,
        }
    }

    /// True for the advice that does not fail
    /// [`Redlock::check`](crate::Redlock::check) (connected replicas,
    /// persistence, a restart guard's quarantine, a refused probe): logged with
    /// `tracing::warn!` and listed in
    /// [`Redlock::check_report`](crate::Redlock::check_report).
    ///
    /// ```
    /// let p = redquorum::NodeProblem::Replicas { index: 0, node: "a:6379".into(), replicas: 1 };
    /// assert!(p.is_warning());
    /// ```
    pub fn is_warning(&self) -> bool {
        matches!(
            self,
            NodeProblem::Replicas { .. }
                | NodeProblem::Persistence { .. }
                | NodeProblem::Quarantined { .. }
                | NodeProblem::Unchecked { .. }
        )
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
            NodeProblem::AclDenied {
                index,
                node,
                command,
            } => write!(
                f,
                "node {index} ({node}): the ACL forbids `{command}`: allow it for this user \
                 (ACL SETUSER <user> +{command}); see the README's deployment section"
            ),
            NodeProblem::Tls {
                index,
                node,
                reason,
            } => write!(
                f,
                "node {index} ({node}): TLS failed ({reason}): check the CA the client \
                 trusts, the certificate's name, and that the port speaks TLS"
            ),
            NodeProblem::Unchecked {
                index,
                node,
                command,
            } => {
                let (what, unseen) = match command.as_str() {
                    "role" => ("its role", "a replica or a master with replicas"),
                    "info" => (
                        "its run_id and cluster mode",
                        "two URLs of one server or a cluster node",
                    ),
                    _ => ("its maxmemory-policy and persistence", "an evicting policy"),
                };
                write!(
                    f,
                    "node {index} ({node}): could not check {what} (refused by ACL or the \
                     provider): {unseen} would go unnoticed; allow it where you can \
                     (ACL SETUSER <user> +{command})"
                )
            }
            NodeProblem::Replicas {
                index,
                node,
                replicas,
            } => write!(
                f,
                "node {index} ({node}) has {replicas} connected replica(s): a failover to a \
                 replica that missed the latest writes loses held locks; do not fail lock \
                 nodes over, or accept that risk"
            ),
            NodeProblem::Persistence {
                index,
                node,
                appendonly,
                appendfsync,
                fencing,
            } => {
                if appendonly == "yes" {
                    write!(f, "node {index} ({node}) has appendfsync {appendfsync}")?;
                } else {
                    write!(f, "node {index} ({node}) has appendonly {appendonly}")?;
                }
                f.write_str(
                    ": a restart forgets recent locks; turn on the restart guard \
                     (Config::with_restart_guard), or restart it only after the longest \
                     TTL, or set appendonly yes and appendfsync always",
                )?;
                if *fencing {
                    f.write_str(
                        "; with fencing on, a lost counter can let a token go backwards \
                         whatever the restart delay",
                    )?;
                }
                Ok(())
            }
            NodeProblem::Quarantined {
                index,
                node,
                left,
                started: true,
            } => write!(
                f,
                "node {index} ({node}) is quarantined by the restart guard for {left:?} more: \
                 it restarted or lost its data and votes once every lock it may have granted \
                 has expired (redquorum init skips the wait only when no lock can be live)"
            ),
            NodeProblem::Quarantined {
                index, node, left, ..
            } => write!(
                f,
                "node {index} ({node}) has no restart-guard record for its process: its next \
                 vote starts a quarantine of {left:?} (new node, restart or flush; \
                 redquorum init skips the wait only when no lock can be live)"
            ),
            NodeProblem::QuarantineMismatch {
                index,
                node,
                kept,
                ours,
            } => write!(
                f,
                "node {index} ({node}) keeps a restart-guard quarantine of {kept:?}, this client \
                 announces {ours:?}: it refuses this client's votes; the quarantine is a \
                 deployment constant, give every client of the nodes the same max_ttl and \
                 drift settings, then, once no lock longer than that can be live, `redquorum \
                 --restart-guard MAX_TTL set-quarantine --no-longer-lock-is-live` \
                 (Redlock::set_node_quarantine) makes every node keep it"
            ),
        }
    }
}
