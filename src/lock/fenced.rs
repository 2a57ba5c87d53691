//! Fencing tokens: an acquisition that also issues a number which strictly
//! increases across successful acquisitions of a resource.
//!
//! Two phases, one round trip each:
//!
//! 1. On every node, one script takes the lock keys (all free, then all set,
//!    as `SET NX PX`) and returns the node's counter of each resource, or
//!    "held" and writes nothing.
//! 2. Once a quorum granted phase 1, the token of each resource is the
//!    largest counter read from the granting nodes plus one. Every node is
//!    asked to raise its counters to these tokens, but only where the lock
//!    keys still hold our value. The tokens are issued only if a quorum
//!    did so and validity, measured from the start of phase 1, is left.
//!
//! Any two quorums share a node, so the next acquisition reads, on at least
//! one node, a counter at least as large as our token, and gets a larger one.
//! Counters live at `{prefix}fence:{resource}`, which no lock key can equal
//! (see [`keys`](crate::keys)). The scripts are `FENCED_ACQUIRE` and
//! `FENCE_WRITE_BACK` in [`node::scripts`](crate::node::scripts).

use std::sync::Arc;

use tokio::time::Instant;

use super::release::ReleaseOnDrop;
use super::{Failure, Held, Shared};
use crate::keys::counter_key;
use crate::node::commands::counters_known;
use crate::node::kind::Kind;
use crate::node::request::Request;
use crate::quorum::{Decision, Gates, Leftover};
use crate::ttl::Ttl;

/// The token of each of `resources` resources: one more than the largest
/// counter any granting node returned. `None` if a node returned something
/// unusable or a counter is at `u64::MAX`.
pub(crate) fn next_tokens(
    answers: &[Option<Option<Vec<String>>>],
    resources: usize,
) -> Option<Vec<u64>> {
    let mut tokens = vec![0u64; resources];
    for counters in answers.iter().flatten().flatten() {
        if counters.len() != resources {
            return None;
        }
        for (token, counter) in tokens.iter_mut().zip(counters) {
            let counter: u64 = counter.parse().ok()?;
            *token = (*token).max(counter);
        }
    }
    tokens.iter().map(|t| t.checked_add(1)).collect()
}

/// One fenced attempt with a fresh value; on failure everything is released
/// (in the background). With `mark`, a failed attempt marks the locks it
/// lost as awaited. Each node's call follows that node's gate in `after`
/// (the deletes of this lock not yet sent there: [`Shared::follow`]) and
/// in `heard` (the release this attempt was woken by, heard from that
/// node: [`Chain::after_heard`](crate::quorum::Chain::after_heard)), no
/// later than the end of the pause it interrupted.
pub(crate) async fn attempt(
    shared: &Arc<Shared>,
    (resources, keys): (&Arc<[String]>, &Arc<[String]>),
    ttl: &Ttl,
    mark: bool,
    (after, heard): (&Gates, Option<(&Gates, Instant)>),
) -> Result<Held, Failure> {
    let prefix = shared.config.key_prefix();
    let all_keys: Arc<[String]> = keys
        .iter()
        .cloned()
        .chain(resources.iter().map(|r| counter_key(prefix, r)))
        .collect();
    let value: Arc<str> = Kind::Fenced
        .fresh_value(shared.config.holder_label())
        .into();
    let mut pending = ReleaseOnDrop::arm(shared, (resources, keys), &value);
    let start = Instant::now();
    let guard = shared.restart_guard();
    let request = Request::acquire(Kind::Fenced, &all_keys, (None, &value), &ttl.millis, guard);
    let chained = (Leftover::Finish, shared.chain(after).after_heard(heard));
    let read = (
        counters_known as fn(_) -> _,
        Option::is_some as fn(&_) -> bool,
    );
    let (mut round, answers) = shared.value_round("acquire", chained, request, read).await;
    crate::spans::votes(round.granted(), round.refused());
    pending.gates = std::mem::take(&mut round.gates);
    let mut reports = round.reports(&shared.nodes);
    let mut validity_exhausted = false;
    let tokens = match round.decision {
        Decision::Granted => next_tokens(&answers, resources.len()),
        Decision::Refused => None,
    };
    if let Some(tokens) = tokens {
        let args: Vec<String> = tokens.iter().map(u64::to_string).collect();
        let request = Request::fence_write_back(&all_keys, &value, &args, shared.restart_guard());
        // To every node, not only those that granted: where a late acquire
        // landed the lock is ours too (the write-back follows it on the same
        // connection); elsewhere the script finds the lock not ours and
        // writes nothing.
        let after = (Leftover::Finish, shared.chain(&pending.gates));
        let mut written = shared.vote_round("fence", after, request).await;
        // The write-back calls follow phase 1's on each node.
        pending.gates = std::mem::take(&mut written.gates);
        let validity = ttl
            .validity(start.elapsed())
            .filter(|v| *v > shared.config.min_validity());
        if written.decision == Decision::Granted && validity.is_some() {
            let gates = pending.disarm();
            tracing::debug!(?validity, ?tokens, "fenced lock acquired");
            return Ok(Held::acquired(
                resources,
                keys,
                value,
                Some(tokens.into()),
                ttl,
                start,
                gates,
            ));
        }
        validity_exhausted = written.decision == Decision::Granted;
        if written.decision == Decision::Refused {
            reports = written.reports(&shared.nodes);
        }
    } else if round.decision == Decision::Granted {
        tracing::warn!(resource = %resources[0], "a node returned an unusable fence counter");
    }
    let cleaned = pending.release_failed(mark).await;
    Err(Failure {
        reports,
        validity_exhausted,
        cleaned,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(counters: &[&str]) -> Option<Option<Vec<String>>> {
        Some(Some(counters.iter().map(|c| (*c).to_owned()).collect()))
    }

    #[test]
    fn token_is_one_more_than_the_largest_counter_of_the_granting_nodes() {
        let answers = vec![
            answer(&["4", "0"]),
            None,
            Some(None),
            answer(&["7", "2"]),
            answer(&["0", "9"]),
        ];
        assert_eq!(next_tokens(&answers, 2), Some(vec![8, 10]));
    }

    #[test]
    fn fresh_counters_give_token_one() {
        assert_eq!(
            next_tokens(&[answer(&["0"]), answer(&["0"])], 1),
            Some(vec![1])
        );
    }

    #[test]
    fn unusable_or_exhausted_counters_give_no_token() {
        assert_eq!(next_tokens(&[answer(&["x"])], 1), None);
        assert_eq!(next_tokens(&[answer(&["1", "2"])], 1), None);
        assert_eq!(next_tokens(&[answer(&[&u64::MAX.to_string()])], 1), None);
    }
}
