//! The concurrent fan-out of one round with an early decision: every
//! node's call is polled from one future (no task per call), under one
//! deadline for the whole round (no timer per call, but for a delete that
//! had to wait for its node's previous call: see [`Late::Keep`]).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tracing::Instrument;

use super::{Chain, Decision, Late, Leftover, Round, Tally};
use crate::error::NodeOutcome;
use crate::gates::{Gates, sent_then};
use crate::node::{Node, NodeError, NodeResult, observe};

/// One node's call: its answer and how long it took once sent.
type Answer<T> = (NodeResult<T>, Duration);

/// The calls of a round still in flight, in node order (`None`: over), in
/// one pinned allocation.
struct Calls<C> {
    calls: Pin<Box<[Option<C>]>>,
    left: usize,
    /// When the round started.
    started: Instant,
    /// Whether the calls outlive the round's deadline ([`Late::Keep`]).
    keep: bool,
}

/// The crate's only unsafe code: the pin projection into the calls' slice
/// (`#![deny(unsafe_code)]` elsewhere). Its unit tests run under Miri.
#[allow(unsafe_code)]
impl<C> Calls<C> {
    /// Node `index`'s call, if still in flight.
    fn call(&mut self, index: usize) -> Option<Pin<&mut C>> {
        // SAFETY: the calls never move out of their pinned slice: each is
        // polled in place and dropped in place (`end`), so pinning each
        // element is structural.
        unsafe {
            let calls = self.calls.as_mut().get_unchecked_mut();
            calls
                .get_mut(index)?
                .as_mut()
                .map(|call| Pin::new_unchecked(call))
        }
    }

    /// Ends node `index`'s call, dropping it in place.
    fn end(&mut self, index: usize) -> bool {
        // SAFETY: as in `call`; assigning drops the old call where it is.
        let slot = unsafe { self.calls.as_mut().get_unchecked_mut().get_mut(index) };
        match slot {
            Some(slot @ Some(_)) => {
                *slot = None;
                self.left -= 1;
                true
            }
            _ => false,
        }
    }
}

impl<T, C: Future<Output = Answer<T>>> Calls<C> {
    /// Polls every call in flight once; `answered(index, answer)` is told
    /// of each that is over, and returns true to end the drive after this
    /// pass. The pass goes on to the end: answers that came together are
    /// all taken as votes now, often leaving nothing in flight to finish
    /// later.
    fn poll_answers(
        &mut self,
        cx: &mut Context<'_>,
        answered: &mut impl FnMut(usize, Answer<T>) -> bool,
    ) -> Poll<()> {
        let mut done = false;
        for index in 0..self.calls.len() {
            let Some(call) = self.call(index) else {
                continue;
            };
            if let Poll::Ready(answer) = call.poll(cx) {
                self.end(index);
                done |= answered(index, answer);
            }
        }
        if done || self.left == 0 {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Runs the calls until `answered` says stop, every call is over, or
    /// `deadline` passes. True when the deadline passed first.
    async fn drive(
        &mut self,
        mut deadline: Pin<&mut Sleep>,
        mut answered: impl FnMut(usize, Answer<T>) -> bool,
    ) -> bool {
        std::future::poll_fn(|cx| {
            if self.poll_answers(cx, &mut answered).is_ready() {
                return Poll::Ready(false);
            }
            deadline.as_mut().poll(cx).map(|()| true)
        })
        .await
    }

    /// Runs the kept calls still in flight past the round's deadline,
    /// telling `answered` of each, for one more `grace` timed from now
    /// (from when the deadline was seen, not from when it was due: a
    /// runtime busy past the deadline still reads the answers that came
    /// meanwhile, and sends what they call for); drops those left then,
    /// told as timed out.
    async fn drive_late(
        &mut self,
        grace: std::time::Duration,
        mut answered: impl FnMut(usize, Answer<T>) -> bool,
    ) {
        if self.left == 0 {
            return;
        }
        let sleep = tokio::time::sleep(grace);
        tokio::pin!(sleep);
        let timed_out = self.drive(sleep, &mut answered).await;
        if timed_out {
            self.keep = false;
            self.time_out(true, answered);
        }
    }

    /// The nodes (by index) whose calls are still in flight.
    fn in_flight(&self) -> impl Iterator<Item = usize> + '_ {
        self.calls
            .iter()
            .enumerate()
            .filter_map(|(index, call)| call.is_some().then_some(index))
    }

    /// When `timed_out`: unless the round keeps its calls, drops every
    /// call still in flight (which opens its gate), telling `answered` of
    /// each as timed out after `waited`.
    fn time_out(&mut self, timed_out: bool, mut answered: impl FnMut(usize, Answer<T>) -> bool) {
        if !timed_out {
            return;
        }
        let waited = self.started.elapsed();
        for index in 0..self.calls.len() {
            if !self.keep && self.end(index) {
                answered(index, (Err(NodeError::TimedOut), waited));
            }
        }
    }
}

/// Sends `call` to every node at once and returns as soon as the outcome is
/// certain (a quorum granted, or a quorum became impossible): the one way
/// into a round. Each call answers with a value; `granted` says which
/// values count as a grant. Returns the round and, per node, the value it
/// answered before the decision (`None` for no answer, a timeout or an
/// error).
///
/// The round is decided by one deadline: the node timeout from its start.
/// A node that has not answered by then, still busy with its call of the
/// round before ([`Chain::after`]), waiting to hear a release from it
/// ([`Chain::heard`]) or not, counts as timed out. Its call is
/// dropped then; with [`Late::Keep`], no call is: one that had to wait
/// for the node's previous call is sent once that call is over and has a
/// node timeout of its own, and every call still in flight goes on for one
/// more node timeout from when the deadline was seen.
///
/// # Cancel safety
///
/// Dropping the returned future drops the calls in flight: a command
/// already written still runs on its node (and before any later command on
/// the same connection), one not yet written never will.
pub(crate) async fn fan_out<T, F, Fut>(
    op: &'static str,
    nodes: &Arc<[Arc<Node>]>,
    quorum: usize,
    (leftover, chain): (Leftover, Chain<'_>),
    mut call: F,
    granted: fn(&T) -> bool,
) -> (Round, Vec<Option<T>>)
where
    T: Send + 'static,
    F: FnMut(&Arc<Node>) -> Fut,
    Fut: Future<Output = NodeResult<T>> + Send + 'static,
{
    let started = Instant::now();
    let timeout = nodes.iter().map(|n| n.timeout()).max().unwrap_or_default();
    let deadline = started + timeout;
    let gates = Gates::closed(nodes.len(), deadline);
    let keep = chain.late == Late::Keep;
    let calls = nodes.iter().enumerate().map(|(index, node)| {
        let answer = sent_then(call(node), chain.sent.map(|sent| sent.opener(index)));
        let open = gates.opener(index);
        let before = (!chain.after.is_open(index)).then(|| chain.after.clone());
        let heard = chain.heard.filter(|(heard, _)| !heard.is_open(index));
        let heard = heard.map(|(heard, until)| (heard.clone(), until));
        Some(async move {
            // Dropped when this call is over, or dropped unsent.
            let _open = open;
            if let Some((heard, until)) = heard {
                tokio::select! {
                    biased;
                    () = heard.opened(index) => {}
                    () = tokio::time::sleep_until(until) => {}
                }
            }
            if let Some(before) = before {
                before.opened(index).await;
                if keep {
                    // Sent however late, then bounded by a timer of its own.
                    let sent = Instant::now();
                    let answer = tokio::time::timeout(timeout, answer).await;
                    let answer = answer.unwrap_or(Err(NodeError::TimedOut));
                    return (answer, sent.elapsed());
                }
            }
            let sent = Instant::now();
            let answer = answer.await;
            (answer, sent.elapsed())
        })
    });
    let calls = Box::into_pin(calls.collect());
    let mut calls = Calls {
        calls,
        left: nodes.len(),
        started,
        // Every delete outlives the deadline: one sent in time may be
        // answered NOSCRIPT only after it, and must then be sent again.
        keep,
    };
    let mut outcomes = vec![NodeOutcome::Pending; nodes.len()];
    let mut values: Vec<Option<T>> = std::iter::repeat_with(|| None).take(nodes.len()).collect();
    let mut tally = Tally::new(nodes.len(), quorum);
    let mut decision = tally.decision();
    let sleep = tokio::time::sleep_until(deadline);
    tokio::pin!(sleep);
    if decision.is_none() {
        let timed_out = calls
            .drive(sleep.as_mut(), |index, (answer, elapsed)| {
                // Answers that came in the same pass as the deciding one
                // count too: they were there when the round was decided.
                let outcome =
                    observe::answered((op, &nodes[index]), &answer, granted, (elapsed, false));
                if let Ok(value) = answer {
                    values[index] = Some(value);
                }
                decision = tally.record(outcome.is_success());
                outcomes[index] = outcome;
                decision.is_some()
            })
            .await;
        calls.time_out(timed_out, |index, (answer, waited)| {
            let outcome = observe::answered((op, &nodes[index]), &answer, granted, (waited, false));
            decision = tally.record(false);
            outcomes[index] = outcome;
            false
        });
        if timed_out {
            // The kept calls: timed out for this round, observed when they
            // end, late.
            for index in calls.in_flight() {
                decision = tally.record(false);
                outcomes[index] = NodeOutcome::TimedOut;
            }
        }
    }
    if calls.left > 0 {
        finish(
            op,
            nodes,
            calls,
            (leftover, chain, deadline, timeout),
            granted,
            sleep,
        )
        .await;
    }
    let round = Round {
        // Every node answered yet no decision: only possible with a quorum
        // of zero nodes, which validation rules out. Losing is the safe reading.
        decision: decision.unwrap_or(Decision::Refused),
        outcomes,
        gates,
    };
    (round, values)
}

/// Deals with the calls still in flight once a round is decided, as
/// `leftover` says; each stays bounded by the round's `deadline`, but the
/// kept ones ([`Late::Keep`]), which get one more `timeout` from when the
/// deadline was seen.
async fn finish<T, C>(
    op: &'static str,
    nodes: &Arc<[Arc<Node>]>,
    mut calls: Calls<C>,
    (leftover, chain, deadline, timeout): (Leftover, Chain<'_>, Instant, Duration),
    granted: fn(&T) -> bool,
    sleep: Pin<&mut Sleep>,
) where
    T: Send + 'static,
    C: Future<Output = Answer<T>> + Send + 'static,
{
    let late = move |nodes: &[Arc<Node>], index: usize, (answer, elapsed): Answer<T>| {
        observe::answered((op, &*nodes[index]), &answer, granted, (elapsed, true));
        false
    };
    match leftover {
        Leftover::Drop => {}
        Leftover::Wait => {
            let timed_out = calls
                .drive(sleep, |index, answer| late(nodes, index, answer))
                .await;
            calls.time_out(timed_out, |index, answer| late(nodes, index, answer));
            calls
                .drive_late(timeout, |index, answer| late(nodes, index, answer))
                .await;
        }
        Leftover::Finish => {
            // fan_out runs inside a runtime (it awaits tokio timers), so
            // this spawns; were it not to, the calls are dropped, which
            // opens their gates.
            let nodes = Arc::clone(nodes);
            let task = async move {
                let sleep = tokio::time::sleep_until(deadline);
                tokio::pin!(sleep);
                let timed_out = calls
                    .drive(sleep, |index, answer| late(&nodes, index, answer))
                    .await;
                calls.time_out(timed_out, |index, answer| late(&nodes, index, answer));
                calls
                    .drive_late(timeout, |index, answer| late(&nodes, index, answer))
                    .await;
            };
            chain.background.spawn(task.in_current_span());
        }
    }
}

/// The pin projection of [`Calls`], on calls that must not move (each
/// borrows its own state across an await). Plain `std`, no runtime and no
/// I/O, so that Miri can run them (`cargo miri test --lib fan_out`, on a
/// nightly toolchain with Miri) and check the unsafe blocks above.
#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Waker;

    /// Adds one to its counter when dropped.
    struct Dropped<'a>(&'a AtomicUsize);

    impl Drop for Dropped<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Pending once, then ready.
    fn yield_once() -> impl Future<Output = ()> {
        let mut yielded = false;
        std::future::poll_fn(move |cx| {
            if std::mem::replace(&mut yielded, true) {
                Poll::Ready(())
            } else {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        })
    }

    /// A call that holds a borrow of its own local across an await (so it
    /// is not `Unpin`), answers `n` on its second poll, and counts its drop.
    async fn call(n: usize, drops: &AtomicUsize) -> Answer<usize> {
        let _dropped = Dropped(drops);
        let local = [n; 4];
        let borrowed = &local;
        yield_once().await;
        (Ok(borrowed[3]), Duration::ZERO)
    }

    #[test]
    fn calls_are_polled_and_dropped_in_place_each_exactly_once() {
        let drops = AtomicUsize::new(0);
        let all: Vec<_> = (0..3).map(|n| Some(call(n, &drops))).collect();
        let mut calls = Calls {
            calls: Box::into_pin(all.into_boxed_slice()),
            left: 3,
            started: Instant::now(),
            keep: false,
        };
        let mut cx = Context::from_waker(Waker::noop());
        // Node 1's call is ended before it answers: dropped where it is.
        assert!(calls.call(1).is_some_and(|c| c.poll(&mut cx).is_pending()));
        assert!(calls.end(1));
        assert!(!calls.end(1), "an ended call ends once");
        assert!(calls.call(1).is_none());
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        let mut answers = Vec::new();
        let mut answered = |index: usize, (answer, _): Answer<usize>| {
            answers.push((index, answer.ok()));
            false
        };
        while calls.poll_answers(&mut cx, &mut answered).is_pending() {}
        assert_eq!(answers, [(0, Some(0)), (2, Some(2))]);
        assert_eq!(calls.left, 0);
        assert_eq!(drops.load(Ordering::SeqCst), 3);
        assert!((0..3).all(|index| calls.call(index).is_none()));
    }
}
