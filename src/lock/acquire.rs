//! Acquisition: the retry loop (with release notifications) and one
//! attempt of a plain, multi-resource or reentrant lock. Fenced attempts
//! are in [`fenced`](super::fenced).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::release::ReleaseOnDrop;
use super::{Failure, Held, Shared, fenced};
use crate::error::{Attempts, Error, Result};
use crate::node::kind::Kind;
use crate::node::request::Request;
use crate::notifications::{HandOff, Interest};
use crate::options::Plan;
use crate::quorum::{Decision, Gates, Leftover};
use crate::spans::{self, End};
use crate::ttl::{self, Ttl};
use crate::{keys, value};

/// Acquires `resources` as `plan` says (retries, deadline, pauses,
/// fencing); `owner` makes it a reentrant hold.
///
/// # Cancel safety
///
/// Dropping the future releases whatever the attempt under way set, in a
/// background task.
pub(crate) async fn acquire(
    shared: &Arc<Shared>,
    resources: &[&str],
    ttl: Duration,
    plan: &Plan,
    owner: Option<&str>,
) -> Result<Held> {
    keys::check_resources(resources)?;
    #[cfg(feature = "cluster")]
    if let Some(refusal) = shared.placement.get().and_then(|p| p.refusal()) {
        return Err(crate::Error::Placement(refusal));
    }
    if let Some(owner) = owner {
        value::check_owner(owner)?;
    }
    let ttl = Ttl::new(ttl, &shared.config)?;
    let kind = Kind::chosen(owner, plan.fencing);
    let names = keys::unique_names(resources);
    let keys: Arc<[String]> = names.iter().map(|r| shared.lock_key(r)).collect();
    let resources: Arc<[String]> = names.into();
    let config = &shared.config;
    let called = Instant::now();
    let meter = crate::metrics::lock(config, &resources[0]);
    let mut attempts = 0u32;
    // Timed pauses taken so far, and the end of the current one while
    // attempts made on a release notification fail within it.
    let mut pauses = 0u32;
    let mut pause_ends: Option<Instant> = None;
    let mut interest: Option<Interest> = None;
    // The hand-off of the release that woke this call, if one did, and
    // the end of the pause it interrupted: no node's call waits past it.
    let mut heard: Option<(HandOff, Instant)> = None;
    // Per node, when the last failed attempt's clean-up was sent.
    let mut cleaned = Gates::default();
    // A failed attempt marks the locks it lost as awaited if this call
    // may wait for them: their releases then announce themselves.
    let mark = shared.marks(plan);
    if config.strict_checks() {
        super::require_checks(shared).await?;
    }
    loop {
        attempts = attempts.saturating_add(1);
        let span = spans::acquire(&resources[0], attempts, shared.quorum);
        let started = Instant::now();
        let locks = (&resources, &keys);
        let after = shared.follow(&keys, &cleaned);
        let woken_by = heard.take();
        let follow = (
            &after,
            woken_by
                .as_ref()
                .map(|(woken, until)| (&woken.gates, *until)),
        );
        let outcome = async {
            match kind {
                Kind::Fenced => fenced::attempt(shared, locks, &ttl, mark, follow).await,
                kind => attempt(shared, locks, &ttl, (kind, owner, mark), follow).await,
            }
        }
        .instrument(span.clone())
        .await;
        let kind = outcome.as_ref().err().map(|f| f.kind(shared.quorum));
        let end = End {
            outcome: kind.unwrap_or("acquired"),
            failed: kind.is_some(),
            votes: None,
            elapsed: started.elapsed(),
        };
        spans::finish(&span, end);
        meter.attempt(end.outcome, end.elapsed);
        // After the first attempt, so that the checks never slow it down.
        super::warn_once(shared);
        let failure = match outcome {
            Ok(mut held) => {
                meter.acquisition("acquired", called.elapsed(), attempts);
                held.in_a_row = woken_by.map_or(0, |(woken, _)| woken.in_a_row);
                return Ok(held);
            }
            Err(failure) => failure,
        };
        cleaned = failure.cleaned.clone();
        let now = Instant::now();
        let wake_at = match pause_ends {
            Some(at) if at > now => at,
            _ => {
                pauses = pauses.saturating_add(1);
                now + ttl::retry_pause(plan.retry_delay, plan.retry_jitter, crate::rng::unit())
            }
        };
        let out_of_time = plan.give_up_at.is_some_and(|at| wake_at >= at);
        let kind = failure.kind(shared.quorum);
        let report = Attempts::new(&resources[0], attempts, shared.quorum, failure.reports)
            .with_validity_exhausted(failure.validity_exhausted);
        // Waiting does not mend credentials, ACLs or replicas.
        if pauses > plan.retries || out_of_time || report.reason() == crate::Reason::Misconfigured {
            meter.acquisition(kind, called.elapsed(), attempts);
            let attempts = report;
            tracing::debug!(%attempts, "lock not acquired");
            return Err(Error::NotAcquired(Box::new(attempts)));
        }
        // Only a lock held by someone gets released: an attempt that
        // met no holder (nodes down) has nothing to wait for; one that met
        // a holder on any node may (with a quorum of nodes down it is not
        // contended, yet that holder's release frees those nodes).
        if interest.is_none() && report.refused() > 0 && config.release_notifications() {
            let channels = resources
                .iter()
                .map(|r| keys::channel(config.key_prefix(), r))
                .collect();
            interest = Some(shared.notifications.interest(channels));
        }
        let woken = match &interest {
            Some(interest) => interest.wait_until(wake_at).await,
            None => {
                tokio::time::sleep_until(wake_at).await;
                None
            }
        };
        pause_ends = woken.is_some().then_some(wake_at);
        heard = woken.map(|woken| (woken, wake_at));
    }
}

/// One attempt of a plain or reentrant lock with a fresh value; on
/// failure everything is released (in the background). With `mark`, a
/// failed attempt marks the locks it lost as awaited. Each node's call
/// follows that node's gate in `after` (the deletes of this lock not yet
/// sent there: [`Shared::follow`]) and in `heard` (the release this attempt
/// was woken by, heard from that node: [`Chain::after_heard`]), no later
/// than the end of the pause it interrupted.
///
/// [`Chain::after_heard`]: crate::quorum::Chain::after_heard
async fn attempt(
    shared: &Arc<Shared>,
    (resources, keys): (&Arc<[String]>, &Arc<[String]>),
    ttl: &Ttl,
    (kind, owner, mark): (Kind, Option<&str>, bool),
    (after, heard): (&Gates, Option<(&Gates, Instant)>),
) -> std::result::Result<Held, Failure> {
    let value: Arc<str> = kind.fresh_value(shared.config.holder_label()).into();
    let mut pending = ReleaseOnDrop::arm(shared, (resources, keys), &value);
    let start = Instant::now();
    let guard = shared.restart_guard();
    let request = Request::acquire(kind, keys, (owner, &value), &ttl.millis, guard);
    let after = (Leftover::Finish, shared.chain(after).after_heard(heard));
    let mut round = shared.vote_round("acquire", after, request).await;
    spans::votes(round.granted(), round.refused());
    pending.gates = std::mem::take(&mut round.gates);
    let validity = ttl
        .validity(start.elapsed())
        .filter(|v| *v > shared.config.min_validity());
    if round.decision == Decision::Granted
        && let Some(validity) = validity
    {
        let gates = pending.disarm();
        tracing::debug!(?validity, "lock acquired");
        return Ok(Held::acquired(
            resources, keys, value, None, ttl, start, gates,
        ));
    }
    let cleaned = pending.release_failed(mark).await;
    Err(Failure {
        reports: round.reports(&shared.nodes),
        validity_exhausted: round.decision == Decision::Granted,
        cleaned,
    })
}
