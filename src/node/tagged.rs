//! One node of a lock over a Redis Cluster (feature `cluster`): every key
//! its commands name gets the node's hash tag in front (`{tag}key`), so
//! that all of them, the restart guard's record and the fence counters
//! included, hash to the one slot that the node's master serves.
//!
//! The lock sends keys in two shapes only: scripts (`EVAL`, `EVALSHA`:
//! `numkeys` keys after the script) and single-key commands. Commands
//! without keys (`INFO`, `PING`, `SCRIPT LOAD`, `CONFIG GET`, `ROLE`,
//! `TIME`) go out as they are. A script that derives a name from its key
//! (the release channel, a fence counter's field) keeps the tag.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redis::{Arg, Cmd};

use super::{Node, NodeError, NodeResult};
use crate::config::Connect;
use crate::error::Result;
use crate::error::failure::FailureKind;

/// A client for `info`, with `connect`'s certificates.
///
/// # Errors
///
/// [`Error::Config`](crate::Error::Config) if `info` cannot be used (TLS
/// without a TLS feature, say).
pub(crate) fn client(info: redis::ConnectionInfo, connect: &Connect) -> Result<redis::Client> {
    let name = super::display_name(&info);
    super::tls::client(0, info, &name, connect)
}

impl Node {
    /// This node as node `k` of a lock over a cluster: its keys carry
    /// `tag`, which hashes to `slot`.
    pub(crate) fn in_cluster(mut self, tag: Arc<str>, slot: u16) -> Self {
        self.cluster = Some(ClusterNode {
            tag,
            slot,
            doubt: Arc::default(),
        });
        self
    }

    /// Points this node at another server (`client`): the connections
    /// open are dropped, the next call opens one to it (its slot's new
    /// master).
    pub(crate) fn retarget(&self, client: redis::Client) {
        let mut conns = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        conns.client = client;
        conns.open.clear();
    }

    /// Whether a call met a sign that the node's slot may have moved since
    /// the placement was last read.
    pub(crate) fn doubts_placement(&self) -> bool {
        self.cluster
            .as_ref()
            .is_some_and(|c| c.doubt.load(Ordering::Relaxed))
    }

    /// Clears [`doubts_placement`](Self::doubts_placement): the placement
    /// is being read.
    pub(crate) fn trust_placement(&self) {
        if let Some(c) = &self.cluster {
            c.doubt.store(false, Ordering::Relaxed);
        }
    }
}

/// What a node of a lock over a Redis Cluster adds.
pub(crate) struct ClusterNode {
    /// The hash tag of its keys.
    pub(crate) tag: Arc<str>,
    /// The slot the tag hashes to.
    pub(crate) slot: u16,
    /// Raised when a call meets a redirection, a cluster that is down or
    /// a lost connection: the placement is read again soon.
    pub(crate) doubt: Arc<AtomicBool>,
}

impl ClusterNode {
    /// Takes note of one call's `answer`: a sign that the slot may have
    /// another master now raises [`doubt`](Self::doubt).
    pub(crate) fn observe<T>(&self, answer: &NodeResult<T>) {
        let moved = match answer {
            Ok(_) => false,
            Err(NodeError::TimedOut) => true,
            Err(NodeError::Failed(failure)) => {
                matches!(
                    failure.kind(),
                    FailureKind::ConnectionRefused | FailureKind::Io | FailureKind::ReadOnly
                ) || matches!(
                    failure.code(),
                    Some("MOVED" | "ASK" | "CLUSTERDOWN" | "TRYAGAIN")
                )
            }
            Err(_) => false,
        };
        if moved {
            self.doubt.store(true, Ordering::Relaxed);
        }
    }
}

/// The commands whose only key is their first argument.
const SINGLE_KEY: [&[u8]; 7] = [
    b"SET", b"GET", b"DEL", b"PTTL", b"PEXPIRE", b"EXISTS", b"HGETALL",
];

/// `cmd` with `tag` put in front of each of its keys: `{tag}key`.
pub(crate) fn tag_keys(cmd: &Cmd, tag: &str) -> Cmd {
    let args: Vec<&[u8]> = cmd
        .args_iter()
        .filter_map(|arg| match arg {
            Arg::Simple(bytes) => Some(bytes),
            _ => None,
        })
        .collect();
    let keys = key_positions(&args);
    let mut out = Cmd::new();
    for (i, arg) in args.iter().enumerate() {
        if keys.contains(&i) {
            let mut key = Vec::with_capacity(arg.len() + tag.len() + 2);
            key.push(b'{');
            key.extend_from_slice(tag.as_bytes());
            key.push(b'}');
            key.extend_from_slice(arg);
            out.arg(key);
        } else {
            out.arg(*arg);
        }
    }
    out
}

/// Where the keys are among `args` (the command's name first).
fn key_positions(args: &[&[u8]]) -> std::ops::Range<usize> {
    let Some(name) = args.first() else {
        return 0..0;
    };
    let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
    if is(b"EVAL") || is(b"EVALSHA") || is(b"EVAL_RO") || is(b"EVALSHA_RO") {
        let count = args
            .get(2)
            .and_then(|n| std::str::from_utf8(n).ok())
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
        return 3..(3 + count).min(args.len());
    }
    if SINGLE_KEY.iter().any(|n| is(n)) && args.len() > 1 {
        return 1..2;
    }
    0..0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(cmd: &Cmd) -> Vec<String> {
        cmd.args_iter()
            .filter_map(|a| match a {
                Arg::Simple(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_scripts_keys_get_the_tag_and_its_arguments_do_not() {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg("abc")
            .arg(2)
            .arg("lock:a")
            .arg("guard")
            .arg("value");
        assert_eq!(
            words(&tag_keys(&cmd, "t1")),
            ["EVALSHA", "abc", "2", "{t1}lock:a", "{t1}guard", "value"]
        );
    }

    #[test]
    fn a_single_key_command_gets_the_tag_on_its_key_only() {
        let mut cmd = redis::cmd("set");
        cmd.arg("lock:a").arg("v").arg("NX").arg("PX").arg(10);
        assert_eq!(
            words(&tag_keys(&cmd, "t")),
            ["set", "{t}lock:a", "v", "NX", "PX", "10"]
        );
    }

    #[test]
    fn commands_without_keys_go_out_unchanged() {
        for cmd in [
            redis::cmd("INFO").arg("server").clone(),
            redis::cmd("SCRIPT").arg("LOAD").arg("return 1").clone(),
            redis::cmd("PING").clone(),
        ] {
            assert_eq!(words(&tag_keys(&cmd, "t")), words(&cmd));
        }
    }

    #[test]
    fn a_key_count_past_the_arguments_tags_only_what_is_there() {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg("return 1").arg(5).arg("k");
        assert_eq!(
            words(&tag_keys(&cmd, "t")),
            ["EVAL", "return 1", "5", "{t}k"]
        );
    }
}
