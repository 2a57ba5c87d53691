//! "Expired" means gone: a release or an extension that reports
//! [`Error::Expired`](crate::Error::Expired) while the guard was still
//! valid says that more than N - quorum nodes refused it, so at least
//! that many nodes must have been able to refuse: nodes that did not hold
//! the guard's value for the whole call, or that lost their data during
//! it (a restart, a flush, a failover to a lagging replica).

use std::time::Duration;

use super::checks::{is_ours, lives_for};
use super::faults::Fault;
use super::oracle::lost_data;
use super::world::World;

/// What each node held as a call began.
pub(crate) struct Before {
    /// Per node: how much longer it holds every key with the guard's
    /// value (`None`: some key is not the guard's).
    holds_for: Vec<Option<Duration>>,
    /// When the call began (virtual time since the start).
    invoked: Duration,
}

/// Reads, as a call on `keys` (value `value`) begins, how long each node
/// holds them.
pub(crate) fn before(world: &World, keys: &[String], value: &str) -> Before {
    let now = world.elapsed();
    let holds_for = (0..world.node_count())
        .map(|node| {
            let server = world.server(node);
            keys.iter().try_fold(Duration::MAX, |shortest, key| {
                let key = &world.stored_key(node, key);
                let ours = server
                    .value(now, key)
                    .is_some_and(|stored| is_ours(&stored, value));
                let lives = lives_for(server.pttl(now, key), server.clock().rate())?;
                ours.then_some(shortest.min(lives))
            })
        })
        .collect();
    Before {
        holds_for,
        invoked: now,
    }
}

/// The violation, if the call that began at `before` and returned
/// `Expired` now could not have met enough refusals.
pub(crate) fn check(
    before: &Before,
    world: &World,
    faults: &[Fault],
    quorum: usize,
    call: &str,
) -> Option<String> {
    let now = world.elapsed();
    let could_refuse = could_refuse(before, now, faults);
    let nodes = before.holds_for.len();
    let needed = nodes.saturating_sub(quorum) + 1;
    (could_refuse < needed).then(|| {
        format!(
            "gone: {call} invoked at {:?} reported the lock expired, but only {could_refuse} \
             nodes could have refused it ({needed} refusals are needed; quorum {quorum} of \
             {nodes}; held for {:?})",
            before.invoked, before.holds_for
        )
    })
}

/// How many nodes could have refused a call that began at `before` and
/// ended at `now`.
fn could_refuse(before: &Before, now: Duration, faults: &[Fault]) -> usize {
    let took = now.saturating_sub(before.invoked);
    // A key may run out during the call, on a clock up to a tenth fast.
    let outlasts = took.mul_f64(1.1) + Duration::from_millis(5);
    before
        .holds_for
        .iter()
        .enumerate()
        .filter(|&(node, held)| {
            held.is_none_or(|held| held < outlasts)
                || faults
                    .iter()
                    .any(|f| f.at >= before.invoked && f.at <= now && lost_data(&f.kind, node))
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::sim::FaultKind;
    use crate::testkit::sim::node::Persistence;

    const MS: Duration = Duration::from_millis(1);

    fn before(holds_for: [Option<u64>; 5]) -> Before {
        Before {
            holds_for: holds_for
                .iter()
                .map(|h| h.map(|ms| MS * ms as u32))
                .collect(),
            invoked: MS * 1_000,
        }
    }

    #[test]
    fn five_nodes_that_hold_the_key_past_the_call_cannot_refuse_it() {
        let all = before([Some(500); 5]);
        assert_eq!(could_refuse(&all, MS * 1_010, &[]), 0);
    }

    #[test]
    fn a_node_without_the_key_or_whose_key_runs_out_during_the_call_can() {
        let some = before([None, Some(8), Some(500), Some(500), Some(500)]);
        assert_eq!(could_refuse(&some, MS * 1_010, &[]), 2);
    }

    #[test]
    fn a_node_that_loses_its_data_during_the_call_can() {
        let all = before([Some(500); 5]);
        let restart = Fault {
            at: MS * 1_005,
            lasts: Duration::ZERO,
            kind: FaultKind::Restart {
                node: 3,
                persistence: Persistence::None,
            },
        };
        assert_eq!(
            could_refuse(&all, MS * 1_010, std::slice::from_ref(&restart)),
            1
        );
        // Before the call began, the key was already not there to read.
        let earlier = Fault {
            at: MS * 900,
            ..restart
        };
        assert_eq!(could_refuse(&all, MS * 1_010, &[earlier]), 0);
    }
}
