//! The clients of a run: a real [`Config`] each, drawn from the seed, and
//! a loop of lock operations (every kind of call the library offers),
//! recording every hold and every result for the checkers.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::checks::{Hold, Live, Record, json, record};
use super::ended::{self, End};
use super::faults::{Fault, FaultKind, answers};
use super::gone;
use super::oracle::{self, Rules, Seen};
use super::reasons;
use super::report::{self, Asked, Call};
use super::rng::Rng;
use crate::{Config, Error, LockGuard, LockOptions, Redlock};

/// One client's settings, as drawn.
#[derive(Clone, Debug)]
pub struct ClientPlan {
    /// The config it runs with.
    pub config: Config,
    /// The longest TTL it asks for.
    pub max_ttl: Duration,
}

/// Draws the clients' configs. `guarded`: every client runs the restart
/// guard. Unless `mixed`, the clients are one well-configured fleet: they
/// share the guard's `max_ttl` and the drift settings, so they announce
/// one quarantine (a deployment constant). `mixed`: each client draws its
/// own, and every other one a short `max_ttl` (a misconfigured fleet,
/// whose mismatches must be refused).
pub fn draw_clients(rng: &mut Rng, clients: usize, guarded: bool, mixed: bool) -> Vec<ClientPlan> {
    let quorum = match rng.below(6) {
        0 => Some(4),
        1 => Some(5),
        _ => None,
    };
    let mut plans = each_client(rng, clients, quorum, guarded, mixed);
    if guarded && !mixed {
        let longest = plans.iter().map(|p| p.max_ttl).max().unwrap_or_default();
        let guard_ttl = longest.max(Duration::from_millis(rng.between(1_000, 6_000)));
        let drift = 0.01 + rng.unit() * 0.04;
        for plan in &mut plans {
            plan.config = plan
                .config
                .clone()
                .with_drift(drift, crate::DEFAULT_DRIFT_PADDING)
                .with_restart_guard(guard_ttl);
        }
    }
    plans
}

/// Each client's own draws (the order every seed has always drawn them
/// in).
fn each_client(
    rng: &mut Rng,
    clients: usize,
    quorum: Option<usize>,
    guarded: bool,
    mixed: bool,
) -> Vec<ClientPlan> {
    (0..clients)
        .map(|i| {
            let node_timeout = Duration::from_millis(rng.between(20, 300));
            let mut max_ttl = Duration::from_millis(rng.between(200, 2_000));
            let mut config = Config::default()
                .with_node_timeout(node_timeout)
                .with_drift(0.01 + rng.unit() * 0.04, crate::DEFAULT_DRIFT_PADDING)
                .with_retries(u32::try_from(rng.below(6)).unwrap_or(0))
                .with_retry_delay(Duration::from_millis(rng.between(5, 200)))
                .with_retry_jitter(Duration::from_millis(rng.between(0, 50)))
                .with_fencing(rng.chance(0.3))
                .with_release_notifications(false);
            if let Some(q) = quorum {
                config = config.with_quorum(q);
            }
            if guarded {
                let guard_ttl = if mixed && i % 2 == 1 {
                    max_ttl = max_ttl.min(Duration::from_millis(300));
                    Duration::from_millis(300)
                } else {
                    max_ttl.max(Duration::from_millis(rng.between(2_000, 20_000)))
                };
                config = config.with_restart_guard(guard_ttl);
            }
            ClientPlan { config, max_ttl }
        })
        .collect()
}

/// How long a client waits after a round refused as misconfigured.
const MISCONFIGURED_BACKOFF: Duration = Duration::from_millis(250);

/// Resources the clients contend on.
const PLAIN: [&str; 3] = ["r0", "r1", "r2"];
/// Resources of reentrant holds (another key kind).
const REENTRANT: [&str; 2] = ["e0", "e1"];

/// What one client does, shared with its operations.
pub(crate) struct Client {
    pub(crate) index: usize,
    pub(crate) redlock: Redlock,
    pub(crate) plan: ClientPlan,
    pub(crate) record: Arc<Mutex<Record>>,
    pub(crate) start: Instant,
    /// The run's faults, to tell which nodes could answer a call.
    pub(crate) faults: Arc<Vec<Fault>>,
    /// The shortest restart-guard quarantine among the clients: the
    /// soonest a node restarted empty may vote again (it keeps the
    /// quarantine of the first guarded client that meets it).
    pub(crate) quarantine: Option<Duration>,
    /// When the operator's `init_nodes` ended, if it ran.
    pub(crate) trusted: Arc<std::sync::OnceLock<Duration>>,
    /// The simulated nodes, for the oracle's check after an extension.
    pub(crate) world: super::world::Shared,
    /// Every client runs the restart guard.
    pub(crate) guarded: bool,
    /// The last failed round was refused as misconfigured.
    pub(crate) misconfigured: std::sync::atomic::AtomicBool,
}

impl Client {
    fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.start)
    }

    fn virtual_of(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.start)
    }

    /// Runs the oracle on guard `live` at once, with no await, so the
    /// schedule is the same as without it.
    fn check_now(&self, live: u64) {
        let world = super::world::lock(&self.world);
        let mut record = record(&self.record);
        let rules = Rules {
            faults: self.faults.clone(),
            guarded: self.guarded,
        };
        for violation in oracle::check(&world, &record, &rules, Some(live), &mut Seen::default()) {
            record.violation(violation);
        }
    }

    /// Runs operations until `until` (virtual time since the start).
    pub(crate) async fn run(&self, mut rng: Rng, until: Duration) {
        while self.now() < until {
            self.one(&mut rng).await;
            let pause = Duration::from_millis(rng.between(0, 40));
            tokio::time::sleep(pause).await;
            if self.misconfigured.swap(false, Ordering::Relaxed) {
                // A service refused as misconfigured (a mismatched restart
                // guard) backs off instead of asking again at once: the
                // mismatch is seen a few times a run, not thousands.
                tokio::time::sleep(MISCONFIGURED_BACKOFF).await;
            }
        }
    }

    fn ttl(&self, rng: &mut Rng) -> Duration {
        let max = u64::try_from(self.plan.max_ttl.as_millis()).unwrap_or(1_000);
        Duration::from_millis(rng.between(60.min(max), max))
    }

    /// One operation, drawn.
    async fn one(&self, rng: &mut Rng) {
        let resource = *rng.pick(&PLAIN);
        let ttl = self.ttl(rng);
        let invoked = self.now();
        match rng.below(10) {
            0 | 1 => {
                let got = self.redlock.lock(resource, ttl).await;
                let call = self.retried();
                self.held(("lock", call), resource, invoked, got, rng).await;
            }
            2 => {
                let got = self.redlock.try_lock(resource, ttl).await;
                // A strict client refused by its start-up checks made no
                // attempt.
                let failed = got
                    .as_ref()
                    .is_err_and(|e| !matches!(e, Error::Misconfigured(_)));
                let call = Call::Acquire { retries: Some(0) };
                self.held(("try_lock", call), resource, invoked, got, rng)
                    .await;
                if failed {
                    self.check_failed_attempt_latency(invoked);
                }
            }
            3 => {
                let choice = rng.below(4);
                let mut deadline = None;
                let (options, call) = match choice {
                    0 => (
                        LockOptions::new().wait(crate::Wait::No),
                        Call::Acquire { retries: Some(0) },
                    ),
                    1 => {
                        let wait = Duration::from_millis(rng.between(10, 1_000));
                        deadline = Some(wait);
                        (
                            LockOptions::new().wait(crate::Wait::For(wait)),
                            Call::Acquire { retries: None },
                        )
                    }
                    2 => {
                        let n = u32::try_from(rng.below(4)).unwrap_or(0);
                        let options = LockOptions::new().wait(crate::Wait::Retries(n));
                        (options, Call::Acquire { retries: Some(n) })
                    }
                    _ => (LockOptions::new().fencing(true), self.retried()),
                };
                let got = self.redlock.lock_with(resource, ttl, &options).await;
                if let (3, Ok(guard)) = (choice, &got) {
                    self.check_tokens(guard);
                }
                if let (Some(wait), Err(e)) = (deadline, &got) {
                    self.check_deadline(e, wait, invoked);
                }
                self.held(("lock_with", call), resource, invoked, got, rng)
                    .await;
            }
            4 => {
                let other = *rng.pick(&PLAIN);
                let got = self.redlock.lock(&[resource, other], ttl).await;
                let call = self.retried();
                self.held(("lock_many", call), resource, invoked, got, rng)
                    .await;
            }
            5 => {
                let resource = *rng.pick(&REENTRANT);
                let owner = format!("c{}-{}", self.index, rng.below(2));
                let got = self
                    .redlock
                    .lock_with(resource, ttl, &crate::LockOptions::new().owner(&owner))
                    .await;
                let call = self.retried();
                self.held(("lock_reentrant", call), resource, invoked, got, rng)
                    .await;
            }
            6 => self.scoped(resource, ttl, rng, false).await,
            7 => self.scoped(resource, ttl, rng, true).await,
            8 => {
                // Cancelled mid-acquisition: the partial keys must go.
                let within = Duration::from_millis(rng.between(0, 30));
                let got = tokio::time::timeout(within, self.redlock.lock(resource, ttl)).await;
                match got {
                    Ok(got) => {
                        let call = self.retried();
                        self.held(("lock", call), resource, invoked, got, rng).await;
                    }
                    Err(_) => self.log("lock_cancelled", resource, invoked, "cancelled"),
                }
            }
            _ => {
                let got = self.redlock.lock(resource, ttl).await;
                match got {
                    Ok(mut guard) => {
                        guard.auto_extend();
                        if crate::controls::on(super::Control::LeakedWatchdog) {
                            self.log("auto_extend", resource, invoked, "leaked");
                            std::mem::forget(guard);
                            return;
                        }
                        let hold = (ttl * 3, Some(ttl));
                        self.hold_for(guard, "auto_extend", invoked, hold, rng)
                            .await;
                    }
                    Err(e) => {
                        let why = self.describe(&e, (self.retried(), resource), invoked);
                        self.log("auto_extend", resource, invoked, &why);
                    }
                }
            }
        }
        record(&self.record).ops += 1;
    }

    /// After an acquisition: holds, maybe extends, then releases or drops.
    async fn held(
        &self,
        (op, call): (&str, Call),
        resource: &str,
        invoked: Duration,
        got: crate::Result<LockGuard>,
        rng: &mut Rng,
    ) {
        match got {
            Ok(guard) => {
                let ttl = self.ttl(rng);
                let hold = Duration::from_millis(rng.between(0, ttl.as_millis() as u64 * 3 / 2));
                self.hold_for(guard, op, invoked, (hold, None), rng).await;
            }
            Err(e) => {
                let why = self.describe(&e, (call, resource), invoked);
                self.log(op, resource, invoked, &why);
            }
        }
    }

    /// Holds `guard` for `hold`, sometimes extending it, then releases it
    /// (or drops it), recording the hold. `watched`: the TTL the watchdog
    /// extends the guard to, when it runs.
    async fn hold_for(
        &self,
        mut guard: LockGuard,
        op: &str,
        invoked: Duration,
        (hold, watched): (Duration, Option<Duration>),
        rng: &mut Rng,
    ) {
        let start = self.now();
        let holder = self.holder_of(&guard);
        let live = self.go_live(&guard, invoked);
        self.log(op, guard.resource(), invoked, "ok");
        let steps = 1 + rng.below(3);
        for _ in 0..steps {
            tokio::time::sleep(hold / u32::try_from(steps).unwrap_or(1)).await;
            if rng.chance(0.3) {
                let ttl = self.ttl(rng);
                if let Some(watched) = watched {
                    self.just_before_the_watchdog(&guard, watched, rng).await;
                }
                let invoked = self.now();
                record(&self.record).extending(live);
                // An extension may first wait for the watchdog's round.
                let wait = self.plan.config.node_timeout() * 3 + Duration::from_millis(20);
                let before = self.before_call(&guard, wait);
                let spans = super::traced::last_extension().0;
                let extended = guard.extend(ttl).await;
                self.check_gone(before, &extended, "extend");
                self.check_expired_label(&guard, &extended, spans);
                let result = extended.as_ref().map_or_else(
                    |e| self.describe(e, (Call::Extend, guard.resource()), invoked),
                    |()| "ok".to_owned(),
                );
                self.log("extend", guard.resource(), invoked, &result);
                record(&self.record).extended(live);
                self.check_now(live);
            }
        }
        let end = self.now().min(self.virtual_of(guard.valid_until()));
        self.finish(live, &guard, holder, start, end);
        // Ended before its call: lost (an extension or the watchdog found
        // it gone), which counts in `redquorum.lock.lost`.
        if !REENTRANT.contains(&guard.resource()) && guard.status_watch().borrow().ended {
            *record(&self.record).ended.entry("lost").or_default() += 1;
        }
        let status = guard.status_watch();
        let resource = guard.resource().to_owned();
        if rng.chance(0.8) {
            let invoked = self.now();
            let before = self.before_call(&guard, Duration::ZERO);
            let plain = !REENTRANT.contains(&guard.resource());
            let released = guard.release().await;
            let outcome = match &released {
                Ok(()) => Some("released"),
                Err(Error::Expired) => Some("expired"),
                Err(Error::ReleaseUnconfirmed(_)) => Some("unconfirmed"),
                Err(_) => None,
            };
            if let (true, Some(outcome)) = (plain, outcome) {
                *record(&self.record).ended.entry(outcome).or_default() += 1;
            }
            self.check_gone(before, &released, "release");
            let result = released.as_ref().map_or_else(
                |e| self.describe(e, (Call::Release, &resource), invoked),
                |()| "ok".to_owned(),
            );
            self.log("release", "-", invoked, &result);
            ended::check(self, &status, &resource, End::Released);
        } else {
            if !REENTRANT.contains(&guard.resource()) {
                *record(&self.record).ended.entry("dropped").or_default() += 1;
            }
            drop(guard);
            ended::check(self, &status, &resource, End::Dropped);
        }
    }

    /// Sometimes waits until a millisecond or two before the watchdog's
    /// next round of `guard` (which extends it to `watched`), so that an
    /// explicit extension meets it. Draws from a side stream: the
    /// workload's own draws are the same either way.
    async fn just_before_the_watchdog(&self, guard: &LockGuard, watched: Duration, rng: &Rng) {
        let mut side = rng.fork(0x5eed);
        if !side.chance(0.5) {
            return;
        }
        let lead = watched.mul_f64(self.plan.config.extend_at())
            + Duration::from_millis(side.between(0, 2));
        if let Some(at) = guard.valid_until().checked_sub(lead) {
            tokio::time::sleep_until(at).await;
        }
    }

    /// `with_lock` or `try_with_lock` with a job of a drawn length.
    async fn scoped(&self, resource: &str, ttl: Duration, rng: &mut Rng, try_only: bool) {
        let invoked = self.now();
        let job = Duration::from_millis(rng.between(0, ttl.as_millis() as u64 * 3));
        let steps = 1 + rng.below(4);
        let body = async |guard: &LockGuard| {
            let start = self.now();
            let live = self.go_live(guard, invoked);
            let mut open = Open {
                client: self,
                live,
                guard,
                holder: self.holder_of(guard),
                start,
            };
            for _ in 0..steps {
                tokio::time::sleep(job / u32::try_from(steps).unwrap_or(1)).await;
            }
            open.close();
        };
        let (op, result, call) = if try_only {
            let done = self.redlock.try_with_lock(resource, ttl, body).await;
            if matches!(done, Ok(None)) {
                self.check_skip(resource, invoked);
            }
            (
                "try_with_lock",
                done.map(|d| d.map_or("skipped", |()| "ok")),
                Call::Acquire { retries: Some(0) },
            )
        } else {
            let done = self.redlock.with_lock(resource, ttl, body).await;
            ("with_lock", done.map(|()| "ok"), self.retried())
        };
        let result = result.map_or_else(
            |e| self.describe(&e, (call, resource), invoked),
            str::to_owned,
        );
        self.log(op, resource, invoked, &result);
    }

    /// An extension that returned `Expired` from a round (an extension
    /// span's outcome recorded since `spans` were) ended its span `gone` when the hold
    /// had ended (lost in that round or before), else `expired` (no
    /// validity left): read right after the call returned.
    fn check_expired_label(&self, guard: &LockGuard, extended: &crate::Result<()>, spans: u64) {
        let (ended, label) = super::traced::last_extension();
        // A reentrant hold's guard answers for the shared hold: not read.
        let reentrant = REENTRANT.contains(&guard.resource());
        if reentrant || !matches!(extended, Err(Error::Expired)) || ended == spans {
            return;
        }
        let expected = if guard.status_watch().borrow().ended {
            "gone"
        } else {
            "expired"
        };
        if label.as_deref() != Some(expected) {
            record(&self.record).violation(format!(
                "tracing: client {}'s extension of {} returned Expired and ended its span \
                 {label:?}, not {expected:?}",
                self.index,
                guard.resource()
            ));
        }
    }

    fn holder_of(&self, guard: &LockGuard) -> String {
        guard.value().to_owned()
    }

    fn go_live(&self, guard: &LockGuard, since: Duration) -> u64 {
        let prefix = self.plan.config.key_prefix();
        let keys = guard
            .resources()
            .iter()
            .map(|r| crate::keys::lock_key(prefix, r))
            .collect();
        let reentrant = REENTRANT.contains(&guard.resource());
        if self.plan.config.fencing() && !reentrant {
            self.check_tokens(guard);
        }
        // A grant leaves more validity than min_validity (the guard comes
        // back at the instant its validity was computed).
        let floor = self.plan.config.min_validity();
        if !reentrant && guard.remaining() <= floor {
            record(&self.record).violation(format!(
                "granted with {:?} of validity left, not more than min_validity ({floor:?}): {} \
                 by client {}",
                guard.remaining(),
                guard.resource(),
                self.index
            ));
        }
        let live = Live {
            keys,
            value: if reentrant {
                String::new()
            } else {
                guard.value().to_owned()
            },
            status: guard.status_watch(),
            quorum: self.redlock.quorum(),
            since,
            extending: false,
        };
        record(&self.record).go_live(live)
    }

    /// What the nodes hold of `guard` as a call on it begins, when the
    /// guard is valid for more than `margin` (a reentrant hold's value is
    /// its own: not read).
    fn before_call(&self, guard: &LockGuard, margin: Duration) -> Option<gone::Before> {
        if REENTRANT.contains(&guard.resource()) || guard.remaining() <= margin {
            return None;
        }
        let prefix = self.plan.config.key_prefix();
        let keys: Vec<String> = guard
            .resources()
            .iter()
            .map(|r| crate::keys::lock_key(prefix, r))
            .collect();
        let world = super::world::lock(&self.world);
        Some(gone::before(&world, &keys, guard.value()))
    }

    /// A call that began at `before` and reported the lock expired must
    /// have met enough nodes able to refuse it ([`gone`]).
    fn check_gone(&self, before: Option<gone::Before>, result: &crate::Result<()>, call: &str) {
        let (Some(before), Err(Error::Expired)) = (before, result) else {
            return;
        };
        let found = {
            let world = super::world::lock(&self.world);
            let call = format!("client {}'s {call}", self.index);
            gone::check(&before, &world, &self.faults, self.redlock.quorum(), &call)
        };
        if let Some(violation) = found {
            record(&self.record).violation(violation);
        }
    }

    /// A fenced guard carries one token per resource.
    fn check_tokens(&self, guard: &LockGuard) {
        let tokens = guard.fencing_tokens().map_or(0, <[u64]>::len);
        if tokens != guard.resources().len() {
            record(&self.record).violation(format!(
                "fencing: client {}'s fenced guard on {} carries {tokens} token(s) for {} \
                 resource(s)",
                self.index,
                guard.resource(),
                guard.resources().len()
            ));
        }
    }

    fn finish(&self, live: u64, guard: &LockGuard, holder: String, start: Duration, end: Duration) {
        let mut record = record(&self.record);
        record.live.remove(&live);
        let reentrant = REENTRANT.contains(&guard.resource());
        record.holds.push(Hold {
            client: self.index,
            holder: if reentrant {
                format!("reentrant:{}", guard.resource())
            } else {
                holder
            },
            resources: guard.resources().to_vec(),
            start,
            end,
            tokens: guard.fencing_tokens().map(<[u64]>::to_vec),
        });
    }

    /// An acquisition with the client's retry count.
    fn retried(&self) -> Call {
        Call::Acquire {
            retries: Some(self.plan.config.retry_count()),
        }
    }

    /// [`describe`], after checking a failed round's report: it names a
    /// resource of the workload, its reason is right
    /// ([`reasons::misclassified`]), it is the report of the `call` made
    /// on `resource` ([`report::misreported`]), it reports no node timed
    /// out before a node timeout has passed ([`report::early_timeout`]),
    /// and a `lock()` that gave up took the pauses its retries promise
    /// ([`report::wrong_pacing`]).
    fn describe(&self, e: &Error, (call, resource): (Call, &str), invoked: Duration) -> String {
        let (Error::NotAcquired(attempts) | Error::ReleaseUnconfirmed(attempts)) = e else {
            return describe(e);
        };
        if attempts.reason() == crate::Reason::Misconfigured {
            self.misconfigured.store(true, Ordering::Relaxed);
        }
        let named = attempts.resource();
        if !PLAIN.contains(&named) && !REENTRANT.contains(&named) {
            record(&self.record).violation(format!(
                "report: client {}'s failed round names resource {named:?}, not one it locks",
                self.index
            ));
        }
        if let Some(wrong) = reasons::misclassified(attempts) {
            record(&self.record).violation(format!(
                "reason: client {}'s failed round on {}: {wrong}",
                self.index,
                attempts.resource()
            ));
        }
        let call = match e {
            Error::ReleaseUnconfirmed(_) => Call::Release,
            _ => call,
        };
        let asked = Asked {
            call,
            resource,
            quorum: self.redlock.quorum(),
            nodes: self.redlock.node_count(),
            notifications: self.plan.config.release_notifications(),
        };
        if let Some(wrong) = report::misreported(attempts, &asked) {
            record(&self.record).violation(format!(
                "report: client {}'s {call:?} on {resource} invoked at {invoked:?}: {wrong}",
                self.index
            ));
        }
        let took = self.now().saturating_sub(invoked);
        let timeout = self.plan.config.node_timeout();
        if let Some(wrong) = report::early_timeout(attempts, took, timeout) {
            record(&self.record).violation(format!(
                "report: client {}'s {call:?} on {resource} invoked at {invoked:?}: {wrong}",
                self.index
            ));
        }
        if let Some(wrong) = report::late_refusal(attempts, self.redlock.quorum()) {
            record(&self.record).violation(format!(
                "report: client {}'s {call:?} on {resource} invoked at {invoked:?}: {wrong}",
                self.index
            ));
        }
        self.check_pacing(attempts, call, invoked);
        describe(e)
    }

    /// A `lock()` that gave up on its retry count took its pauses.
    fn check_pacing(&self, attempts: &crate::Attempts, call: Call, invoked: Duration) {
        let Call::Acquire {
            retries: Some(retries),
        } = call
        else {
            return;
        };
        if attempts.reason() == crate::Reason::Misconfigured || self.paused_between(invoked) {
            return;
        }
        let config = &self.plan.config;
        let per_attempt = self.attempt_bound(invoked);
        let settings = (config.retry_delay(), config.retry_jitter());
        let took = self.now().saturating_sub(invoked);
        if let Some(wrong) =
            report::wrong_pacing(took, attempts.attempts(), retries, settings, per_attempt)
        {
            record(&self.record).violation(format!(
                "pacing: client {}'s lock invoked at {invoked:?}: {wrong}",
                self.index
            ));
        }
    }

    /// The longest an attempt of a call invoked at `invoked` may take.
    /// With no fault near the call, an attempt takes a few round trips (a
    /// fenced one two, each maybe after a script load) of links under
    /// 1.2 ms each way, plus up to its window more on an unordered link.
    /// Otherwise two round trips (a lock's options may ask for fencing),
    /// each waiting at most for a clean-up's gate and its call.
    fn attempt_bound(&self, invoked: Duration) -> Duration {
        if self.quiet_since(invoked) {
            let window = super::world::lock(&self.world).unordered(self.index);
            Duration::from_millis(15) + window * 4
        } else {
            self.plan.config.node_timeout() * 4 + Duration::from_millis(10)
        }
    }

    /// A `lock_with(Wait::For(wait))` that gave up kept trying until its
    /// next pause would end at or past the deadline (so it took at least
    /// `wait` less one longest pause), and gave up by the deadline plus
    /// one attempt.
    fn check_deadline(&self, e: &Error, wait: Duration, invoked: Duration) {
        let Error::NotAcquired(attempts) = e else {
            return;
        };
        if attempts.reason() == crate::Reason::Misconfigured || self.paused_between(invoked) {
            return;
        }
        let config = &self.plan.config;
        let took = self.now().saturating_sub(invoked);
        let longest_pause = config.retry_delay() + config.retry_jitter();
        let per_attempt = self.attempt_bound(invoked);
        let slack = Duration::from_millis(1);
        let wrong = if took + slack < wait.saturating_sub(longest_pause) {
            Some(format!(
                "gave up after {took:?}: with pauses of at most {longest_pause:?} it should try \
                 until its next pause would end past the deadline"
            ))
        } else if took > wait + per_attempt + slack {
            Some(format!(
                "gave up after {took:?}: an attempt takes at most {per_attempt:?} past the \
                 deadline"
            ))
        } else {
            None
        };
        if let Some(wrong) = wrong {
            record(&self.record).violation(format!(
                "deadline: client {}'s lock_with(Wait::For({wait:?})) invoked at {invoked:?} {wrong}",
                self.index
            ));
        }
    }

    fn log(&self, op: &str, resource: &str, invoked: Duration, result: &str) {
        let line = format!(
            "{{\"client\":{},\"op\":{},\"resource\":{},\"invoke_ms\":{:.3},\"return_ms\":{:.3},\
             \"result\":{}}}",
            self.index,
            json(op),
            json(resource),
            invoked.as_secs_f64() * 1000.0,
            self.now().as_secs_f64() * 1000.0,
            json(result)
        );
        record(&self.record).log(line);
    }

    /// A failed single attempt answers at its decision: within one node
    /// timeout per round trip (two for a fenced one: the acquisition, then
    /// the counters' write-back) and the links' latency, not after waiting
    /// for clean-ups.
    fn check_failed_attempt_latency(&self, invoked: Duration) {
        let took = self.now().saturating_sub(invoked);
        let trips = if self.plan.config.fencing() { 2 } else { 1 };
        let timeouts = self.plan.config.node_timeout() * trips;
        let bound = timeouts + Duration::from_millis(10);
        if took > bound && !self.paused_between(invoked) {
            record(&self.record).violation(format!(
                "latency: client {}'s failed try_lock invoked at {invoked:?} answered after \
                 {took:?}, beyond {trips} node timeout(s) ({timeouts:?})",
                self.index,
            ));
        }
    }
}

impl Client {
    /// No fault was in force from two node timeouts before `invoked` (a
    /// call it slowed may still hold a gate) until now. A fault's effects
    /// on this client last until the end of any pause of the client that
    /// overlapped it, and its aftermath runs from then: what the client
    /// sent meanwhile leaves when the pause ends, at the fault's pace.
    fn quiet_since(&self, invoked: Duration) -> bool {
        let from = invoked.saturating_sub(self.plan.config.node_timeout() * 2);
        let now = self.now();
        let paused_until = |f: &Fault| {
            self.faults
                .iter()
                .filter(|p| {
                    matches!(p.kind, FaultKind::PauseClient { client } if client == self.index)
                        && p.at <= f.at + f.lasts
                        && f.at <= p.at + p.lasts
                })
                .map(|p| p.at + p.lasts)
                .fold(f.at + f.lasts, Duration::max)
        };
        !self
            .faults
            .iter()
            .any(|f| f.at <= now && from <= paused_until(f) + f.aftermath())
    }

    /// The client was paused at some time since `invoked`.
    fn paused_between(&self, invoked: Duration) -> bool {
        let now = self.now();
        self.faults.iter().any(|f| {
            matches!(f.kind, FaultKind::PauseClient { client } if client == self.index)
                && f.at <= now
                && invoked < f.at + f.lasts
        })
    }

    /// `try_with_lock` skipped: refusals alone must have made a quorum
    /// impossible, so at least N - Q + 1 nodes must have been able to
    /// answer this call.
    fn check_skip(&self, resource: &str, invoked: Duration) {
        if self.paused_between(invoked) {
            return;
        }
        let window = (invoked, self.now());
        let nodes = self.redlock.node_count();
        let answering = (0..nodes)
            .filter(|&node| {
                answers(
                    &self.faults,
                    self.index,
                    node,
                    window,
                    self.plan.config.node_timeout(),
                    (
                        self.quarantine,
                        self.trusted.get().copied().unwrap_or_default(),
                    ),
                )
            })
            .count();
        let needed = nodes - self.redlock.quorum() + 1;
        if answering < needed {
            record(&self.record).violation(format!(
                "skip: client {}'s try_with_lock({resource}) invoked at {invoked:?} skipped as \
                 held elsewhere, but only {answering} nodes could answer it (refusals from \
                 {needed} are needed to rule a quorum out)",
                self.index
            ));
        }
    }
}

/// A hold taken inside a scoped job; recorded when the job ends or is
/// cancelled (dropped), whichever comes first.
struct Open<'a> {
    client: &'a Client,
    live: u64,
    guard: &'a LockGuard,
    holder: String,
    start: Duration,
}

impl Open<'_> {
    fn close(&mut self) {
        if self.live == 0 {
            return;
        }
        let client = self.client;
        let end = client
            .now()
            .min(client.virtual_of(self.guard.valid_until()));
        client.finish(
            self.live,
            self.guard,
            std::mem::take(&mut self.holder),
            self.start,
            end,
        );
        self.live = 0;
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.close();
    }
}

/// A short text for an error, for the history.
pub(crate) fn describe(e: &Error) -> String {
    match e {
        Error::NotAcquired(attempts) => format!(
            "not acquired (granted {}, refused {}, unavailable {}, misconfigured {}; contended \
             {}, unavailable {}; nodes: {})",
            attempts.granted(),
            attempts.refused(),
            attempts.unavailable(),
            attempts.misconfigured(),
            attempts.reason() == crate::Reason::Contended,
            attempts.reason() == crate::Reason::Unavailable,
            attempts
                .nodes()
                .iter()
                .map(|n| n.outcome().to_string().chars().take(60).collect::<String>())
                .collect::<Vec<_>>()
                .join(" | ")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quarantines(seed: u64, mixed: bool) -> Vec<Option<Duration>> {
        let mut rng = Rng::new(seed);
        draw_clients(&mut rng, 5, true, mixed)
            .iter()
            .map(|p| p.config.quarantine())
            .collect()
    }

    #[test]
    fn a_guarded_fleet_that_is_not_mixed_announces_one_quarantine() {
        for seed in 0..50 {
            let q = quarantines(seed, false);
            assert!(q[0].is_some(), "seed {seed}: no restart guard");
            assert!(q.iter().all(|x| *x == q[0]), "seed {seed}: {q:?}");
        }
    }

    #[test]
    fn a_mixed_fleet_announces_more_than_one_quarantine() {
        let q = quarantines(7, true);
        assert!(q.iter().any(|x| *x != q[0]), "{q:?}");
    }

    #[test]
    fn every_client_of_a_guarded_fleet_stays_within_the_guards_max_ttl() {
        for seed in 0..50 {
            let mut rng = Rng::new(seed);
            for plan in draw_clients(&mut rng, 4, true, false) {
                let quarantine = plan.config.quarantine().unwrap_or_default();
                assert!(plan.max_ttl <= quarantine, "seed {seed}: {plan:?}");
            }
        }
    }
}
