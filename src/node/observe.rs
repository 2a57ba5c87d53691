//! What one node call tells the spans and the metrics: its outcome, its
//! `error.type`, how long it took.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::{Node, NodeError, NodeResult};
use crate::error::NodeOutcome;
use crate::error::failure::FailureKind;
use crate::{metrics, spans};

/// Reports `node`'s `answer` to one call of a round (`granted` says which
/// answers grant) that took `elapsed`; `late`: it came after the round was
/// decided (then it is no vote in the round, yet the metrics count it:
/// a hung or dead node's answers all come late once the others are
/// quicker). Returns the outcome to tally.
pub(crate) fn answered<T>(
    (op, node): (&'static str, &Node),
    answer: &NodeResult<T>,
    granted: fn(&T) -> bool,
    (elapsed, late): (Duration, bool),
) -> NodeOutcome {
    let (outcome, vote) = match answer {
        Ok(value) if granted(value) => (NodeOutcome::Granted, "granted"),
        Ok(_) => (NodeOutcome::Refused, "refused"),
        Err(e @ NodeError::TimedOut) => (e.outcome(), "timed_out"),
        Err(e @ NodeError::Quarantined(_)) => (e.outcome(), "quarantined"),
        Err(e) => (e.outcome(), "failed"),
    };
    let up = match answer {
        // The node answered: a refusal of the restart guard is an answer.
        Ok(_)
        | Err(
            NodeError::Quarantined(_)
            | NodeError::QuarantineMismatch { .. }
            | NodeError::CountersUnknown,
        ) => true,
        Err(NodeError::TimedOut) => false,
        Err(NodeError::Failed(failure)) => !matches!(
            failure.kind(),
            FailureKind::ConnectionRefused | FailureKind::Io | FailureKind::Tls
        ),
    };
    #[cfg(feature = "cluster")]
    if let Some(cluster) = &node.cluster {
        cluster.observe(answer);
    }
    if !up {
        // Timed out or cut off: if it restarted meanwhile, or is too slow
        // for a NOSCRIPT to be read in time, its next delete must not
        // depend on one.
        node.set_doubts_scripts(true);
    }
    // Answers are reported as their rounds read them: an older call's
    // late answer may come after a newer call's, and is older news.
    let up = node.newest_answer.is_newest(elapsed).then_some(up);
    let error = answer.as_ref().err().map(error_type);
    spans::node_answer(
        op,
        node.server(),
        &outcome,
        error.as_deref(),
        (elapsed, late),
    );
    metrics::node_call((op, &node.labels), (vote, up), elapsed);
    outcome
}

/// Whether the start-up checks begun at `started` are the newest news of
/// `node`'s reachability: not when a call sent since has been reported
/// (a release that met the node dead after its probe answered).
pub(crate) fn check_is_news(node: &Node, started: Instant) -> bool {
    node.newest_answer.is_newest_sent(started)
}

/// When the newest call whose answer set a node's reachability was sent.
#[derive(Debug, Default)]
pub(crate) struct NewestAnswer(Mutex<Option<Instant>>);

impl NewestAnswer {
    /// True when the call whose answer came `elapsed` after it was sent
    /// is the newest reported so far (a tie counts as newest); records it.
    fn is_newest(&self, elapsed: Duration) -> bool {
        let now = Instant::now();
        self.is_newest_sent(now.checked_sub(elapsed).unwrap_or(now))
    }

    /// True when a call sent at `sent` is the newest reported so far (a
    /// tie counts as newest); records it.
    fn is_newest_sent(&self, sent: Instant) -> bool {
        if !cfg!(feature = "metrics") {
            return true; // Only the gauge needs to know.
        }
        let mut newest = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if newest.is_some_and(|n| sent < n) {
            return false;
        }
        *newest = Some(sent);
        true
    }
}

/// `error.type` of a failed node call: `timeout`, `quarantined` (the
/// restart guard refused the vote), `quarantine_mismatch` (the node keeps
/// another quarantine than this client's), `counters_unknown` (fence
/// counters not known intact), the server's error code
/// (`READONLY`, `NOSCRIPT`, ...), or the kind of a client-side error.
pub(crate) fn error_type(error: &NodeError) -> String {
    match error {
        NodeError::TimedOut => "timeout".to_owned(),
        NodeError::Quarantined(_) => "quarantined".to_owned(),
        NodeError::QuarantineMismatch { .. } => "quarantine_mismatch".to_owned(),
        NodeError::CountersUnknown => "counters_unknown".to_owned(),
        NodeError::Failed(failure) => match failure.code() {
            Some(code) => code.to_owned(),
            None => failure.kind().name().to_owned(),
        },
    }
}

#[cfg(all(test, feature = "metrics"))]
mod tests {
    use std::time::Duration;

    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    use super::*;
    use crate::error::failure::NodeFailure;

    /// A node nothing listens at (no call here reaches it).
    fn node() -> Option<Node> {
        Node::new(
            0,
            "redis://127.0.0.1:7399",
            Duration::from_millis(50),
            &crate::node::Connect::default(),
        )
        .ok()
    }

    /// The value of `redquorum.node.up` once `calls` (answer, time since
    /// its call was sent) have been reported, in that order.
    fn up_after(calls: Vec<(NodeResult<bool>, Duration)>) -> Option<f64> {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let node = node()?;
        ::metrics::with_local_recorder(&recorder, || {
            for (answer, elapsed) in &calls {
                answered(("release", &node), answer, |v| *v, (*elapsed, false));
            }
        });
        up_of(&snapshotter)
    }

    /// The value of `redquorum.node.up` in the recorder's snapshot.
    fn up_of(snapshotter: &metrics_util::debugging::Snapshotter) -> Option<f64> {
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .find(|(key, ..)| key.key().name() == crate::metrics::NODE_UP)
            .and_then(|(.., value)| match value {
                DebugValue::Gauge(v) => Some(v.into_inner()),
                _ => None,
            })
    }

    #[test]
    fn checks_begun_before_a_newer_calls_failure_do_not_mark_the_node_up_again() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let node = node().unwrap();
        let dropped = NodeFailure::from_redis(&redis::RedisError::from(std::io::Error::from(
            std::io::ErrorKind::BrokenPipe,
        )));
        let check = crate::error::node_check::NodeCheck {
            node: node.name().to_owned(),
            reachable: true,
            ..Default::default()
        };
        // The probe answered 300 ms ago; a release sent 1 ms ago met the
        // node dead and was reported first.
        let started = Instant::now() - Duration::from_millis(300);
        ::metrics::with_local_recorder(&recorder, || {
            let failed: NodeResult<bool> = Err(NodeError::Failed(dropped));
            answered(
                ("release", &node),
                &failed,
                |v| *v,
                (Duration::from_millis(1), true),
            );
            let news = [check_is_news(&node, started)];
            crate::metrics::checked(std::slice::from_ref(&check), &news);
        });
        assert_eq!(up_of(&snapshotter), Some(0.0));
    }

    #[test]
    fn an_older_calls_late_answer_does_not_overwrite_a_newer_calls_failure() {
        let dropped = NodeFailure::from_redis(&redis::RedisError::from(std::io::Error::from(
            std::io::ErrorKind::BrokenPipe,
        )));
        // The newer call, sent 1 ms ago, met a dead connection; the older
        // one, sent 300 ms ago, had its answer read before the node died,
        // and is reported after.
        let up = up_after(vec![
            (Err(NodeError::Failed(dropped)), Duration::from_millis(1)),
            (Ok(true), Duration::from_millis(300)),
        ]);
        assert_eq!(up, Some(0.0));
    }

    #[test]
    fn a_newer_calls_answer_overwrites_an_older_calls_failure() {
        let up = up_after(vec![
            (Err(NodeError::TimedOut), Duration::from_millis(300)),
            (Ok(true), Duration::from_millis(1)),
        ]);
        assert_eq!(up, Some(1.0));
    }
}
