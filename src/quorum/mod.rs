//! The quorum arithmetic (pure functions, here), the concurrent fan-out
//! with an early decision ([`fan_out`]) and the gates that keep each
//! node's calls in the order their rounds started ([`gates`]).

mod fan_out;

use std::sync::Arc;

use crate::background::Background;
use crate::error::{NodeOutcome, NodeReport};
use crate::node::Node;

use tokio::time::Instant;

pub(crate) use crate::gates::{Gates, WeakGates};
pub(crate) use fan_out::fan_out;

/// Where a round fits among the rounds of one lock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Chain<'a> {
    /// Per node, the previous round's call: this round's call to that
    /// node is sent only once it is over, so that calls reach
    /// each node in the order their rounds started (a late `SET`, or the
    /// re-send of a script after `NOSCRIPT`, never lands after a newer
    /// call), while the other nodes go ahead. The default: nothing to
    /// wait for.
    pub(crate) after: &'a Gates,
    /// Owns the calls a round leaves in flight ([`Leftover::Finish`]).
    pub(crate) background: &'a Background,
    /// What becomes of the calls still in flight at the round's deadline.
    pub(crate) late: Late,
    /// When set, each node's gate here opens once this round's call to it
    /// has been sent (handed to the node's connection), not answered: a
    /// round that must only follow it on the connection waits no longer.
    pub(crate) sent: Option<&'a Gates>,
    /// When set, each node's call also waits for that node's gate here
    /// (the release it waits for has been heard from that node), until the
    /// instant given at the latest ([`Chain::after_heard`]).
    pub(crate) heard: Option<(&'a Gates, Instant)>,
}

impl<'a> Chain<'a> {
    /// This chain for a round of deletes ([`Late::Keep`]).
    pub(crate) fn keeping_late(self) -> Self {
        Chain {
            late: Late::Keep,
            ..self
        }
    }

    /// This chain, opening `sent`'s gate of each node once its call has
    /// been sent ([`Chain::sent`]).
    pub(crate) fn telling_sent(self, sent: Option<&'a Gates>) -> Self {
        Chain { sent, ..self }
    }

    /// This chain, each node's call waiting first for its gate in `heard`
    /// (a hot lock's hand-off: a node's `SET` goes out as soon as that node
    /// has announced the release, not once a quorum has), but no later
    /// than the instant paired with it.
    pub(crate) fn after_heard(self, heard: Option<(&'a Gates, Instant)>) -> Self {
        Chain { heard, ..self }
    }
}

/// What becomes of a call still in flight (or still waiting for its
/// node's previous call) when the round's deadline, the node timeout from
/// its start, passes. Either way the round counts it as timed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Late {
    /// Dropped: a command already written still runs on its node, one not
    /// yet written never will. For acquisitions, extensions and fence
    /// write-backs, whose calls only count when they answer in time.
    Drop,
    /// Kept going, as [`Leftover`] says, for one more node timeout from
    /// when the deadline was seen: about twice the node timeout from the
    /// round's start. For deletes (releases and clean-ups): a delete
    /// chained behind its node's previous call is sent once that call is
    /// over, however late in the round (a call of the round before ends by
    /// that round's deadline, so within one node timeout of this round's
    /// start), and then has a node timeout of its own. It lands after the
    /// call it waited for, so a late `SET` never outlives the release. A
    /// delete sent in time whose answer comes late is read too: answered
    /// `NOSCRIPT` (the node forgot its scripts), it is sent again.
    Keep,
}

/// How a round ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// A quorum granted the request.
    Granted,
    /// So many nodes refused or failed that a quorum cannot grant it.
    Refused,
}

/// Counts answers and says when the outcome is certain.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tally {
    nodes: usize,
    quorum: usize,
    granted: usize,
    refused: usize,
}

impl Tally {
    pub(crate) fn new(nodes: usize, quorum: usize) -> Self {
        Tally {
            nodes,
            quorum,
            granted: 0,
            refused: 0,
        }
    }

    /// Records one answer; `Some` once the outcome can no longer change.
    pub(crate) fn record(&mut self, granted: bool) -> Option<Decision> {
        if granted {
            self.granted += 1;
        } else {
            self.refused += 1;
        }
        self.decision()
    }

    /// The outcome if it is already certain.
    pub(crate) fn decision(&self) -> Option<Decision> {
        if self.granted >= self.quorum {
            Some(Decision::Granted)
        } else if self.refused > self.nodes - self.quorum {
            Some(Decision::Refused)
        } else {
            None
        }
    }
}

/// What to do with the calls still in flight once a round is decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Leftover {
    /// Drop them: a command already written still runs on its node (and
    /// before any later command on the same connection), one not yet written
    /// never will.
    #[allow(dead_code)]
    Drop,
    /// Drive them to completion in a background task; [`Round::gates`]
    /// tells when each is over. Used for acquire: the lock then lands on
    /// slow nodes too (a lock on just a quorum is one node failure from
    /// lost), and the release that follows is chained after each node's
    /// call, so a late `SET` can never overtake it. Used for release and
    /// extend too, whose compare-and-set scripts are harmless whenever they
    /// land (and a script reloaded after `NOSCRIPT` still gets its second
    /// call).
    Finish,
    /// Wait for every node before returning (each call is bounded by the
    /// node timeout). Used for the clean-up after a failed attempt.
    Wait,
}

/// The answers of one round.
#[derive(Debug)]
pub(crate) struct Round {
    pub(crate) decision: Decision,
    pub(crate) outcomes: Vec<NodeOutcome>,
    /// Per node, when this round's call to it is over: the next round of
    /// the same lock is chained after these ([`Chain::after`]).
    pub(crate) gates: Gates,
}

impl Round {
    /// The per-node report, in node order.
    pub(crate) fn reports(&self, nodes: &[Arc<Node>]) -> Vec<NodeReport> {
        nodes
            .iter()
            .zip(&self.outcomes)
            .map(|(node, outcome)| NodeReport::new(node.name(), outcome.clone()))
            .collect()
    }

    /// Nodes that granted the request.
    pub(crate) fn granted(&self) -> usize {
        self.outcomes.iter().filter(|o| o.is_success()).count()
    }

    /// Nodes that answered "not ours / held by another owner".
    pub(crate) fn refused(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| matches!(o, NodeOutcome::Refused))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_decides_won_at_quorum() {
        let mut t = Tally::new(5, 3);
        assert_eq!(t.record(true), None);
        assert_eq!(t.record(false), None);
        assert_eq!(t.record(true), None);
        assert_eq!(t.record(true), Some(Decision::Granted));
    }

    #[test]
    fn tally_decides_lost_once_quorum_is_impossible() {
        let mut t = Tally::new(5, 3);
        assert_eq!(t.record(false), None);
        assert_eq!(t.record(false), None);
        assert_eq!(t.record(true), None);
        assert_eq!(t.record(false), Some(Decision::Refused));
    }

    #[test]
    fn tally_with_quorum_of_all_loses_at_the_first_refusal() {
        let mut t = Tally::new(3, 3);
        assert_eq!(t.record(true), None);
        assert_eq!(t.record(false), Some(Decision::Refused));
    }

    #[test]
    fn every_full_tally_is_decided() {
        for nodes in 1..=7usize {
            for quorum in nodes / 2 + 1..=nodes {
                for mask in 0u32..(1 << nodes) {
                    let mut t = Tally::new(nodes, quorum);
                    let mut decided = None;
                    for i in 0..nodes {
                        if let Some(d) = t.record(mask & (1 << i) != 0) {
                            decided = Some(d);
                            break;
                        }
                    }
                    let granted = mask.count_ones() as usize;
                    let expect = if granted >= quorum {
                        Decision::Granted
                    } else {
                        Decision::Refused
                    };
                    // An early decision never contradicts the full count.
                    assert_eq!(decided, Some(expect), "n={nodes} q={quorum} mask={mask:b}");
                }
            }
        }
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn an_early_decision_never_contradicts_the_full_count(
                (nodes, quorum) in (1usize..=9).prop_flat_map(|n| (Just(n), n / 2 + 1..=n)),
                answers in prop::collection::vec(any::<bool>(), 9),
            ) {
                let mut tally = Tally::new(nodes, quorum);
                let mut decided = None;
                for granted in &answers[..nodes] {
                    if let Some(d) = tally.record(*granted) {
                        decided = Some(d);
                        break;
                    }
                }
                let granted = answers[..nodes].iter().filter(|g| **g).count();
                let expect = if granted >= quorum { Decision::Granted } else { Decision::Refused };
                prop_assert_eq!(decided, Some(expect));
            }

        }
    }
}
