//! [`Inspection`]: what every node holds for one resource (holder label,
//! TTL, reentrant holds, fence counter), read by
//! [`Redlock::inspect`](crate::Redlock::inspect) with one read-only
//! script per node.

use std::sync::Arc;
use std::time::Duration;

use crate::error::NodeOutcome;
use crate::node::Node;
use crate::node::request::{Grant, Request};
use crate::node::restart_guard::Trust;
use crate::node::scripts::INSPECT;
use crate::value;

/// What one node holds for the resource.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeHold {
    /// No lock key.
    Free,
    /// A plain lock.
    Held {
        /// The holder's label ([`Config::with_holder_label`](crate::Config::with_holder_label)),
        /// if it set one.
        label: Option<String>,
        /// The first 8 characters of the holder's random value: enough to
        /// tell whether two nodes hold the same lock, useless for releasing
        /// it.
        id: String,
        /// Time to live, if the key has one.
        ttl: Option<Duration>,
    },
    /// A reentrant lock.
    Reentrant {
        /// Its owner.
        owner: String,
        /// Holds on this node.
        holds: u64,
        /// Time to live, if the key has one.
        ttl: Option<Duration>,
    },
    /// The key holds a type no lock uses (written by someone else).
    Foreign {
        /// The key's type.
        kind: String,
    },
    /// The node could not be read.
    Unknown(NodeOutcome),
}

/// One node's view: its address, what it holds, its fence counter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeView {
    node: String,
    hold: NodeHold,
    counter: Option<u64>,
    quarantine: Option<Duration>,
}

impl NodeView {
    /// The node's address, without credentials.
    pub fn node(&self) -> &str {
        &self.node
    }
    /// What it holds for the resource.
    pub fn hold(&self) -> &NodeHold {
        &self.hold
    }
    /// Its fence counter for the resource (the last token issued through
    /// it), if it has one.
    pub fn counter(&self) -> Option<u64> {
        self.counter
    }
    /// With the restart guard on: how much longer the node refuses to vote
    /// (it restarted or lost its data), or, when it has no record for its
    /// process yet, the quarantine its next vote starts. `None`: it votes
    /// (or the guard is off, or its state could not be read).
    pub fn quarantine(&self) -> Option<Duration> {
        self.quarantine
    }
}

/// What every node holds for one resource, from
/// [`Redlock::inspect`](crate::Redlock::inspect).
///
/// ```no_run
/// # async fn run(redlock: redquorum::Redlock) {
/// let seen = redlock.inspect("nightly-export").await.unwrap();
/// match seen.holder() {
///     Some(holder) => println!("held by {holder:?} on a quorum"),
///     None => println!("not held by anyone on a quorum"),
/// }
/// for view in seen.nodes() {
///     println!("{}: {:?} counter={:?}", view.node(), view.hold(), view.counter());
///     if let Some(left) = view.quarantine() {
///         println!("  no vote for {left:?} (restart guard)");
///     }
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inspection {
    resource: String,
    quorum: usize,
    nodes: Vec<NodeView>,
}

impl Inspection {
    /// Each node's view, in node order.
    pub fn nodes(&self) -> &[NodeView] {
        &self.nodes
    }
    /// The hold that a quorum of nodes agree on (same holder), if any: the
    /// holder as far as the nodes can tell right now.
    pub fn holder(&self) -> Option<&NodeHold> {
        self.nodes
            .iter()
            .map(|v| &v.hold)
            .find(|hold| same_holder_count(&self.nodes, hold) >= self.quorum)
    }
    /// The highest fence counter on any node: the last token issued.
    pub fn counter(&self) -> Option<u64> {
        self.nodes.iter().filter_map(|v| v.counter).max()
    }
}

/// How many nodes hold the same lock as `hold` (plain: same id;
/// reentrant: same owner). Free and unknown nodes agree with nobody.
fn same_holder_count(nodes: &[NodeView], hold: &NodeHold) -> usize {
    nodes
        .iter()
        .filter(|v| match (&v.hold, hold) {
            (NodeHold::Held { id: a, .. }, NodeHold::Held { id: b, .. }) => a == b,
            (NodeHold::Reentrant { owner: a, .. }, NodeHold::Reentrant { owner: b, .. }) => a == b,
            _ => false,
        })
        .count()
}

type Reply = (String, i64, String, u64, String);

/// Reads every node.
pub(crate) async fn inspect(
    nodes: &[Arc<Node>],
    quorum: usize,
    resource: &str,
    lock_key: String,
    counter_key: String,
) -> Inspection {
    let request = Request::script(&INSPECT, &[lock_key, counter_key], &[], Grant::NotNil);
    let views = futures_util::future::join_all(nodes.iter().map(|node| {
        let request = &request;
        async move {
            let read = node.send_bounded::<Reply>(request).await;
            let mut view = view(node.name(), read.map_err(|e| e.outcome()));
            if let Some(guard) = &node.restart_guard {
                view.quarantine = match node.trust_status(guard).await.map(|s| s.trust) {
                    Ok(Trust::Quarantined(left) | Trust::Untrusted(left)) => Some(left),
                    _ => None,
                };
            }
            view
        }
    }))
    .await;
    Inspection {
        resource: resource.to_owned(),
        quorum,
        nodes: views,
    }
}

fn view(node: &str, read: Result<Reply, NodeOutcome>) -> NodeView {
    let (kind, pttl, holder, holds, counter) = match read {
        Ok(reply) => reply,
        Err(outcome) => {
            return NodeView {
                node: node.to_owned(),
                hold: NodeHold::Unknown(outcome),
                counter: None,
                quarantine: None,
            };
        }
    };
    let ttl = u64::try_from(pttl).ok().map(Duration::from_millis);
    let hold = match kind.as_str() {
        "none" => NodeHold::Free,
        "string" => NodeHold::Held {
            label: value::label_of(&holder).map(str::to_owned),
            id: holder.chars().take(8).collect(),
            ttl,
        },
        "hash" => NodeHold::Reentrant {
            owner: holder,
            holds,
            ttl,
        },
        _ => NodeHold::Foreign { kind },
    };
    NodeView {
        node: node.to_owned(),
        hold,
        counter: counter.parse().ok(),
        quarantine: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(id: &str) -> NodeView {
        view(
            "n",
            Ok((
                "string".into(),
                900,
                format!("{id}.web-1"),
                0,
                String::new(),
            )),
        )
    }

    #[test]
    fn the_holder_is_the_one_a_quorum_agrees_on() {
        let free = view("n", Ok(("none".into(), -2, String::new(), 0, "4".into())));
        let seen = Inspection {
            resource: "r".into(),
            quorum: 2,
            nodes: vec![held("aaaaaaaa11"), free.clone(), held("aaaaaaaa11")],
        };
        assert!(matches!(
            seen.holder(),
            Some(NodeHold::Held { label: Some(l), .. }) if l == "web-1"
        ));
        assert_eq!(seen.counter(), Some(4));
        let split = Inspection {
            nodes: vec![held("aaaaaaaa11"), free, held("bbbbbbbb22")],
            ..seen
        };
        assert_eq!(split.holder(), None);
    }

    #[test]
    fn only_eight_characters_of_the_value_are_shown() {
        let NodeHold::Held { id, ttl, .. } = held("0123456789abcdef").hold else {
            panic!("not held");
        };
        assert_eq!(id, "01234567");
        assert_eq!(ttl, Some(Duration::from_millis(900)));
    }
}
