//! The reason a failed round gives, checked against what the docs say of
//! it: the reason's label is its documented one, and the node answers
//! bear it out; a round is lost only once no quorum can grant; a release
//! or an extension is "not confirmed" only while refusals leave a quorum
//! possible (otherwise the lock is gone: expired).

use crate::{Attempts, NodeOutcome, Reason};

/// The documented label of each reason.
const LABELS: [(Reason, &str); 4] = [
    (Reason::Misconfigured, "misconfigured"),
    (Reason::Unavailable, "unavailable"),
    (Reason::ValidityExhausted, "validity_exhausted"),
    (Reason::Contended, "contended"),
];

/// What is wrong with `attempts`' reason, if anything.
pub(crate) fn misclassified(attempts: &Attempts) -> Option<String> {
    let reason = attempts.reason();
    let label = LABELS.iter().find(|(r, _)| *r == reason).map(|(_, l)| *l);
    if label != Some(reason.as_str()) {
        return Some(format!(
            "reason {reason:?} is labelled {:?}",
            reason.as_str()
        ));
    }
    let spare = attempts.nodes().len().saturating_sub(attempts.quorum());
    let pending = attempts
        .nodes()
        .iter()
        .filter(|n| matches!(n.outcome(), NodeOutcome::Pending))
        .count();
    if reason != Reason::ValidityExhausted && attempts.granted() + pending >= attempts.quorum() {
        return Some(format!(
            "decided lost with {} granted and {pending} not answered yet: a quorum was still \
             possible (quorum {})",
            attempts.granted(),
            attempts.quorum()
        ));
    }
    if (attempts.is_release() || attempts.is_extension()) && attempts.refused() > spare {
        return Some(format!(
            "an unconfirmed {} with {} of {} nodes refusing: the lock is gone (expired), \
             not unconfirmed",
            if attempts.is_release() {
                "release"
            } else {
                "extension"
            },
            attempts.refused(),
            attempts.nodes().len()
        ));
    }
    // The first reason that applies, in the documented precedence (a
    // quorum granted too late is the one fact the answers do not show).
    let failed = attempts.misconfigured() + attempts.unavailable();
    let first = if attempts.misconfigured() > 0 && failed > spare {
        Some(Reason::Misconfigured)
    } else if reason == Reason::ValidityExhausted {
        None
    } else if attempts.refused() <= spare {
        Some(Reason::Unavailable)
    } else {
        Some(Reason::Contended)
    };
    let borne_out = match first {
        Some(first) => first == reason,
        None => attempts.granted() >= attempts.quorum(),
    };
    (!borne_out).then(|| {
        format!(
            "reason {reason:?} with {} granted, {} refused, {} unavailable, {} misconfigured \
             of {} nodes (quorum {})",
            attempts.granted(),
            attempts.refused(),
            attempts.unavailable(),
            attempts.misconfigured(),
            attempts.nodes().len(),
            attempts.quorum()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NodeReport;

    fn attempts(outcomes: &[NodeOutcome], exhausted: bool) -> Attempts {
        let nodes = outcomes
            .iter()
            .enumerate()
            .map(|(i, o)| NodeReport::new(format!("n{i}:6379"), o.clone()))
            .collect();
        Attempts::new("r", 1, 3, nodes).with_validity_exhausted(exhausted)
    }

    #[test]
    fn every_reason_the_library_gives_passes() {
        use NodeOutcome::{CountersUnknown, Granted, Refused, TimedOut};
        let rounds = [
            (vec![Refused, Refused, Refused, Granted, Granted], false),
            (vec![TimedOut, TimedOut, TimedOut, Granted, Granted], false),
            (vec![Granted, Granted, Granted, TimedOut, Refused], true),
            // One misconfigured node among refusals: contended, as the
            // failures alone leave a quorum possible.
            (
                vec![CountersUnknown, Refused, Refused, Refused, Granted],
                false,
            ),
            // Failures past the spare nodes, one of them misconfigured.
            (
                vec![CountersUnknown, TimedOut, TimedOut, Refused, Granted],
                false,
            ),
            // Validity exhausted, with one misconfigured node.
            (
                vec![CountersUnknown, Granted, Granted, Granted, Refused],
                true,
            ),
        ];
        for (outcomes, exhausted) in rounds {
            let round = attempts(&outcomes, exhausted);
            assert_eq!(misclassified(&round), None, "{round}");
        }
    }

    #[test]
    fn the_check_sees_a_reason_the_answers_do_not_bear_out() {
        use NodeOutcome::{Granted, TimedOut};
        // Exhausted validity claimed without a quorum of grants.
        let round = attempts(&[Granted, TimedOut, TimedOut, TimedOut, TimedOut], true);
        assert!(misclassified(&round).is_some());
    }

    #[test]
    fn the_check_sees_a_round_lost_while_a_quorum_could_still_grant() {
        use NodeOutcome::{Granted, Pending, Refused};
        let round = attempts(&[Granted, Refused, Refused, Pending, Pending], false);
        assert!(misclassified(&round).is_some());
    }

    #[test]
    fn the_check_sees_an_unconfirmed_release_that_a_majority_refused() {
        use NodeOutcome::{Refused, TimedOut};
        let outcomes = [Refused, Refused, Refused, TimedOut, TimedOut];
        let release = attempts(&outcomes, false).of_release();
        assert!(misclassified(&release).is_some());
        let acquisition = attempts(&outcomes, false);
        assert_eq!(misclassified(&acquisition), None);
    }
}
