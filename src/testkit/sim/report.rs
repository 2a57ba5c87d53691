//! A failed round's report read as its docs say: it is of the call that
//! was made (operation, resource, quorum, one answer per node), its
//! counts are those of its answers, its message states them, and a
//! `lock()` that gave up made the attempts and took the pauses its retry
//! settings promise.

use std::time::Duration;

use crate::{Attempts, NodeOutcome, Reason};

/// What the failed call was.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Call {
    /// An acquisition; `retries`: the timed pauses it may take (`None`:
    /// bounded by time, not by a count).
    Acquire { retries: Option<u32> },
    /// An explicit extension.
    Extend,
    /// An explicit release.
    Release,
}

/// The call's settings the report must match.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Asked<'a> {
    pub(crate) call: Call,
    /// The resources asked for (the report names the first).
    pub(crate) resource: &'a str,
    pub(crate) quorum: usize,
    pub(crate) nodes: usize,
    /// Release notifications may wake a waiter early: such attempts take
    /// no pause of their own, so the count is a floor, not exact.
    pub(crate) notifications: bool,
}

/// The documented message of each reason.
const MESSAGES: [(Reason, &str); 4] = [
    (Reason::Misconfigured, "misconfigured nodes"),
    (Reason::Unavailable, "nodes unavailable"),
    (Reason::ValidityExhausted, "validity exhausted"),
    (Reason::Contended, "held by another owner"),
];

/// What is wrong with `attempts` as the report of `asked`, if anything.
pub(crate) fn misreported(attempts: &Attempts, asked: &Asked<'_>) -> Option<String> {
    let nodes = attempts.nodes();
    if attempts.resource() != asked.resource {
        return Some(format!(
            "names resource {:?}, the call asked for {:?}",
            attempts.resource(),
            asked.resource
        ));
    }
    if attempts.quorum() != asked.quorum || nodes.len() != asked.nodes {
        return Some(format!(
            "quorum {} of {} nodes, the client has {} of {}",
            attempts.quorum(),
            nodes.len(),
            asked.quorum,
            asked.nodes
        ));
    }
    let is = |call| asked.call == call;
    if attempts.is_extension() != is(Call::Extend) || attempts.is_release() != is(Call::Release) {
        return Some(format!(
            "a report of {:?} reads as extension {} and release {}",
            asked.call,
            attempts.is_extension(),
            attempts.is_release()
        ));
    }
    if let Some(wrong) = wrong_attempts(attempts, asked) {
        return Some(wrong);
    }
    let count = |pred: fn(&NodeOutcome) -> bool| nodes.iter().filter(|n| pred(n.outcome())).count();
    let granted = count(|o| *o == NodeOutcome::Granted);
    let refused = count(|o| *o == NodeOutcome::Refused);
    let unavailable = count(NodeOutcome::is_unavailable);
    let misconfigured = count(NodeOutcome::is_misconfigured);
    let counted = (
        attempts.granted(),
        attempts.refused(),
        attempts.unavailable(),
        attempts.misconfigured(),
    );
    if counted != (granted, refused, unavailable, misconfigured) {
        return Some(format!(
            "counts (granted, refused, unavailable, misconfigured) {counted:?}, its answers \
             give {:?}",
            (granted, refused, unavailable, misconfigured)
        ));
    }
    // A round stops early only once its outcome is certain: a node left
    // with no answer means the others had already ruled a quorum out.
    let pending = count(|o| *o == NodeOutcome::Pending);
    let quorum = attempts.quorum();
    if pending > 0 && granted < quorum && granted + pending >= quorum {
        return Some(format!(
            "{pending} node(s) with no answer yet and {granted} granted: with them a quorum of \
             {quorum} was still possible, so the round could not have stopped before they \
             answered or timed out"
        ));
    }
    wrong_message(attempts, asked, (granted, refused))
}

/// The attempts a failed acquisition made: at least one; without
/// notifications, exactly one more than its retries (none after the first
/// for a refusal as misconfigured, which no wait mends).
fn wrong_attempts(attempts: &Attempts, asked: &Asked<'_>) -> Option<String> {
    let made = attempts.attempts();
    let expected = match asked.call {
        Call::Extend | Call::Release => Some(1),
        Call::Acquire { .. } if attempts.reason() == Reason::Misconfigured => None,
        Call::Acquire { retries: None } => None,
        Call::Acquire { retries: Some(_) } if asked.notifications => None,
        Call::Acquire { retries: Some(n) } => Some(n.saturating_add(1)),
    };
    match expected {
        Some(expected) if made != expected => Some(format!(
            "{made} attempt(s) reported, {expected} expected for {:?}",
            asked.call
        )),
        None if made == 0 => Some("0 attempts reported".to_owned()),
        _ => None,
    }
}

/// The message states the operation, the resource, the reason and the
/// counts, and names each node that failed under its heading.
fn wrong_message(
    attempts: &Attempts,
    asked: &Asked<'_>,
    (granted, refused): (usize, usize),
) -> Option<String> {
    let text = attempts.to_string();
    let reason = attempts.reason();
    let said = MESSAGES.iter().find(|(r, _)| *r == reason).map(|(_, m)| *m);
    if said != Some(reason.to_string().as_str()) {
        return Some(format!("reason {reason:?} reads {:?}", reason.to_string()));
    }
    let resource = asked.resource;
    let head = match asked.call {
        Call::Acquire { .. } => format!(
            "lock {resource:?} not acquired after {} attempt(s), {reason}: ",
            attempts.attempts()
        ),
        Call::Extend => format!("extension of lock {resource:?} not confirmed, {reason}: "),
        Call::Release => format!("release of lock {resource:?} not confirmed, {reason}: "),
    };
    let nodes = attempts.nodes();
    let mut parts = vec![format!(
        "{granted} of {} nodes granted, {} needed",
        nodes.len(),
        attempts.quorum()
    )];
    let mut absent = Vec::new();
    let too_late = "a quorum answered too late";
    if reason == Reason::ValidityExhausted {
        parts.push(too_late.to_owned());
    }
    let refusals = match asked.call {
        Call::Acquire { .. } => format!("; {refused} held by another owner"),
        Call::Extend | Call::Release => format!("; {refused} no longer ours"),
    };
    if refused > 0 { &mut parts } else { &mut absent }.push(refusals);
    for (heading, pred) in [
        (
            "; misconfigured: ",
            NodeOutcome::is_misconfigured as fn(&NodeOutcome) -> bool,
        ),
        ("; unavailable: ", NodeOutcome::is_unavailable),
    ] {
        let listed: Vec<String> = nodes
            .iter()
            .filter(|n| pred(n.outcome()))
            .map(ToString::to_string)
            .collect();
        if listed.is_empty() {
            absent.push(heading.to_owned());
        } else {
            parts.push(format!("{heading}{}", listed.join(", ")));
        }
    }
    let lapse = "lapse at their TTL";
    if asked.call == Call::Release {
        &mut parts
    } else {
        &mut absent
    }
    .push(lapse.to_owned());
    if !text.starts_with(&head) {
        return Some(format!("message {text:?} does not begin {head:?}"));
    }
    if let Some(missing) = parts.iter().find(|p| !text.contains(p.as_str())) {
        return Some(format!("message {text:?} does not say {missing:?}"));
    }
    if let Some(extra) = absent.iter().find(|p| text.contains(p.as_str())) {
        return Some(format!("message {text:?} says {extra:?}"));
    }
    None
}

/// A `lock()` that gave up after `retries` pauses of `delay` ± `jitter`
/// was out between `retries` × (`delay` - `jitter`) and its pauses at most
/// plus `per_attempt` for each attempt. `None` when it was.
pub(crate) fn wrong_pacing(
    took: Duration,
    attempts: u32,
    retries: u32,
    (delay, jitter): (Duration, Duration),
    per_attempt: Duration,
) -> Option<String> {
    let shortest = delay.saturating_sub(jitter) * retries;
    let longest = (delay + jitter) * retries + per_attempt * attempts;
    // The pauses are drawn in floating point: a microsecond of rounding.
    let slack = Duration::from_micros(u64::from(retries) + 1);
    if took + slack < shortest {
        return Some(format!(
            "gave up after {took:?}, {retries} pause(s) of {delay:?} ± {jitter:?} take at least \
             {shortest:?}"
        ));
    }
    (took > longest + slack).then(|| {
        format!(
            "gave up after {took:?}, {retries} pause(s) of {delay:?} ± {jitter:?} and \
             {attempts} attempt(s) of at most {per_attempt:?} take at most {longest:?}"
        )
    })
}

/// A node reported as timed out in a call that returned within `took`,
/// less than one `node_timeout`: a round's deadline is a node timeout
/// from its start, and a round that stops early leaves the nodes still
/// busy as pending, not timed out. `None` when no such node is reported.
pub(crate) fn early_timeout(
    attempts: &Attempts,
    took: Duration,
    node_timeout: Duration,
) -> Option<String> {
    // Timers fire on whole milliseconds.
    if took + Duration::from_millis(1) >= node_timeout {
        return None;
    }
    let timed_out: Vec<usize> = (attempts.nodes().iter().enumerate())
        .filter(|(_, n)| *n.outcome() == NodeOutcome::TimedOut)
        .map(|(index, _)| index)
        .collect();
    (!timed_out.is_empty()).then(|| {
        format!(
            "node(s) {timed_out:?} reported timed out by a call that returned after {took:?}, \
             within one node timeout ({node_timeout:?})"
        )
    })
}

/// A round that more than N − `quorum` nodes answered no (refused,
/// failed, quarantined) can no longer be granted: it is decided then, and
/// the nodes still busy are reported pending, never timed out. `None`
/// when the report agrees.
pub(crate) fn late_refusal(attempts: &Attempts, quorum: usize) -> Option<String> {
    let nodes = attempts.nodes();
    let said_no = (nodes.iter())
        .filter(|n| {
            matches!(
                n.outcome(),
                NodeOutcome::Refused | NodeOutcome::Failed(_) | NodeOutcome::Quarantined { .. }
            )
        })
        .count();
    let timed_out = (nodes.iter())
        .filter(|n| *n.outcome() == NodeOutcome::TimedOut)
        .count();
    let most = nodes.len().saturating_sub(quorum);
    (said_no > most && timed_out > 0).then(|| {
        format!(
            "{said_no} node(s) answered no, more than the {most} a quorum of {quorum} allows, yet \
             the round waited for {timed_out} node(s) to time out"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NodeReport;

    fn report(outcomes: Vec<NodeOutcome>, attempts: u32) -> Attempts {
        let nodes = outcomes
            .into_iter()
            .enumerate()
            .map(|(i, o)| NodeReport::new(format!("n{i}:6379"), o))
            .collect();
        Attempts::new("r0", attempts, 3, nodes)
    }

    fn asked(call: Call) -> Asked<'static> {
        Asked {
            call,
            resource: "r0",
            quorum: 3,
            nodes: 5,
            notifications: false,
        }
    }

    fn mixed() -> Vec<NodeOutcome> {
        vec![
            NodeOutcome::Granted,
            NodeOutcome::Refused,
            NodeOutcome::Refused,
            NodeOutcome::Refused,
            NodeOutcome::Pending,
        ]
    }

    #[test]
    fn the_library_s_own_reports_pass() {
        let acquire = report(mixed(), 3);
        let call = Call::Acquire { retries: Some(2) };
        assert_eq!(misreported(&acquire, &asked(call)), None);
        let extension = report(mixed(), 1).of_extension();
        assert_eq!(misreported(&extension, &asked(Call::Extend)), None);
        let release = report(mixed(), 1).of_release();
        assert_eq!(misreported(&release, &asked(Call::Release)), None);
    }

    #[test]
    fn the_check_sees_a_report_of_another_call_or_count() {
        let acquire = report(mixed(), 3);
        let other = Asked {
            resource: "r1",
            ..asked(Call::Acquire { retries: Some(2) })
        };
        assert!(misreported(&acquire, &other).is_some());
        let fewer = asked(Call::Acquire { retries: Some(3) });
        assert!(misreported(&acquire, &fewer).is_some());
        assert!(misreported(&acquire, &asked(Call::Extend)).is_some());
        let woken = Asked {
            notifications: true,
            ..fewer
        };
        assert_eq!(misreported(&acquire, &woken), None);
    }

    #[test]
    fn a_timeout_reported_before_one_node_timeout_is_seen() {
        let mut waited = mixed();
        waited[4] = NodeOutcome::TimedOut;
        let failed = report(waited, 1);
        let timeout = Duration::from_millis(100);
        assert!(early_timeout(&failed, Duration::from_millis(20), timeout).is_some());
        assert_eq!(early_timeout(&failed, timeout, timeout), None);
        let answered = report(vec![NodeOutcome::Refused; 5], 1);
        assert_eq!(
            early_timeout(&answered, Duration::from_millis(20), timeout),
            None
        );
    }

    #[test]
    fn a_round_that_waited_out_a_timeout_after_its_refusals_is_seen() {
        assert_eq!(late_refusal(&report(mixed(), 1), 3), None);
        let mut waited = mixed();
        waited[4] = NodeOutcome::TimedOut;
        assert!(late_refusal(&report(waited.clone(), 1), 3).is_some());
        // Two refusals leave a quorum of 3 possible: the timeout decided.
        waited[3] = NodeOutcome::TimedOut;
        assert_eq!(late_refusal(&report(waited, 1), 3), None);
    }

    #[test]
    fn the_pacing_check_sees_pauses_too_short_or_too_long() {
        let ms = Duration::from_millis;
        let settings = (ms(100), ms(20));
        assert_eq!(wrong_pacing(ms(330), 4, 3, settings, ms(50)), None);
        assert!(wrong_pacing(ms(200), 4, 3, settings, ms(50)).is_some());
        assert!(wrong_pacing(ms(600), 4, 3, settings, ms(50)).is_some());
    }
}
