//! [`Gates`]: per node, when something this round waits for is over: the
//! node's call of the round before (so that the next round of the same lock
//! sends its call to that node only then), or a release heard from the
//! node (the hand-off of a hot lock). No I/O: a primitive of the rounds
//! and of the release notifications.
//!
//! One shared record per round (a flag per node and one [`Notify`]), in
//! place of a channel per node: a round of five nodes costs one allocation
//! for its gates, and opening a gate is a store and a wake-up.
//!
//! A gate is also open once its round's deadline has passed, whether or
//! not the task running the call has seen it: a call past the deadline is
//! over for the round, and a task that is not being run (left on a
//! current-thread runtime that nothing drives) cannot hold the next round.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use tokio::sync::Notify;
use tokio::time::Instant;

#[derive(Debug)]
struct State {
    /// Per node, in node order: its call is over (answered, failed, timed
    /// out, or dropped unsent).
    over: Box<[AtomicBool]>,
    opened: Notify,
    /// The round's deadline: every gate is open from then on.
    until: Instant,
}

/// Per node, when one round's call to it is over. Cheap to clone; the
/// default waits for nothing (no earlier round).
#[derive(Clone, Debug, Default)]
pub(crate) struct Gates(Option<Arc<State>>);

impl Gates {
    /// The gates of a round of `nodes` calls, all closed until their call
    /// is over or `until` (the round's deadline) has passed.
    pub(crate) fn closed(nodes: usize, until: Instant) -> Self {
        let over = (0..nodes).map(|_| AtomicBool::new(false)).collect();
        Gates(Some(Arc::new(State {
            over,
            opened: Notify::new(),
            until,
        })))
    }

    /// Opens node `index`'s gate when dropped: move it into that node's
    /// call, so that the gate opens however the call ends.
    pub(crate) fn opener(&self, index: usize) -> Opener {
        Opener {
            state: self.0.clone(),
            index,
        }
    }

    /// True once the round's deadline has passed: every gate is open.
    pub(crate) fn expired(&self) -> bool {
        self.0
            .as_ref()
            .is_none_or(|state| state.until <= Instant::now())
    }

    /// True when some node's gate is still closed (its call not over).
    pub(crate) fn any_closed(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|state| (0..state.over.len()).any(|index| !self.is_open(index)))
    }

    /// A handle that does not keep the gates alive: once every opener and
    /// every `Gates` of the round is gone, nothing is left to wait for.
    pub(crate) fn downgrade(&self) -> WeakGates {
        WeakGates(self.0.as_ref().map(Arc::downgrade))
    }

    /// True when node `index`'s call is over (or there was no such call);
    /// [`opened`](Self::opened) also counts the round's deadline.
    pub(crate) fn is_open(&self, index: usize) -> bool {
        self.0.as_ref().is_none_or(|state| {
            state
                .over
                .get(index)
                .is_none_or(|over| over.load(Ordering::Acquire))
        })
    }

    /// Waits until node `index`'s call is over, or its round's deadline
    /// has passed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only watches.
    pub(crate) async fn opened(&self, index: usize) {
        let Some(state) = &self.0 else {
            return;
        };
        let deadline = tokio::time::sleep_until(state.until);
        tokio::pin!(deadline);
        loop {
            let notified = state.opened.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_open(index) {
                return;
            }
            tokio::select! {
                biased;
                () = notified => {}
                () = deadline.as_mut() => return,
            }
        }
    }
}

/// [`Gates`] that do not keep their round's record alive
/// ([`Gates::downgrade`]).
#[derive(Clone, Debug)]
pub(crate) struct WeakGates(Option<Weak<State>>);

impl WeakGates {
    /// The gates, while anything of their round is still alive.
    pub(crate) fn upgrade(&self) -> Option<Gates> {
        self.0.as_ref()?.upgrade().map(|state| Gates(Some(state)))
    }
}

/// Runs `future`, dropping `opener` (opening its gate) right after the
/// first poll: for a node call, once the command has been handed to the
/// connection, which writes commands in the order it was given them.
pub(crate) async fn sent_then<F: Future>(future: F, mut opener: Option<Opener>) -> F::Output {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        let poll = future.as_mut().poll(cx);
        opener = None;
        poll
    })
    .await
}

/// Opens one node's gate when dropped ([`Gates::opener`]).
#[derive(Debug)]
pub(crate) struct Opener {
    state: Option<Arc<State>>,
    index: usize,
}

impl Drop for Opener {
    fn drop(&mut self) {
        if let Some(state) = &self.state
            && let Some(over) = state.over.get(self.index)
        {
            over.store(true, Ordering::Release);
            state.opened.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn far() -> Instant {
        Instant::now() + std::time::Duration::from_secs(3600)
    }

    #[tokio::test]
    async fn a_gate_opens_when_its_opener_is_dropped_and_not_before() {
        let gates = Gates::closed(3, far());
        let (first, second) = (gates.opener(0), gates.opener(1));
        assert!(!gates.is_open(0) && !gates.is_open(1));
        let waiting = tokio::spawn({
            let gates = gates.clone();
            async move { gates.opened(1).await }
        });
        drop(first);
        assert!(gates.is_open(0) && !gates.is_open(1));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(second);
        assert!(waiting.await.is_ok());
        assert!(gates.is_open(1) && !gates.is_open(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_gate_whose_call_is_never_over_opens_at_the_rounds_deadline() {
        let until = Instant::now() + std::time::Duration::from_millis(100);
        let gates = Gates::closed(1, until);
        let _never = gates.opener(0);
        gates.opened(0).await;
        assert_eq!(Instant::now(), until);
    }

    #[tokio::test]
    async fn a_sent_gate_opens_after_the_first_poll_not_at_the_answer() {
        let gates = Gates::closed(1, far());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let call = tokio::spawn(sent_then(rx, Some(gates.opener(0))));
        gates.opened(0).await;
        assert!(!call.is_finished());
        drop(tx);
        assert!(call.await.is_ok());
    }

    #[tokio::test]
    async fn no_earlier_round_waits_for_nothing() {
        let none = Gates::default();
        assert!(none.is_open(4));
        none.opened(4).await;
        drop(none.opener(4));
    }
}
