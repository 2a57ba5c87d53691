#![cfg(feature = "testkit")]
//! A seeded randomized model test. Client tasks run random mixes of every
//! way to take, keep and end a lock (plain, multi-resource, fenced,
//! reentrant and nested, scoped, cancelled; extended by hand with shorter
//! and longer TTLs or by the watchdog; released or dropped) on a few
//! resources, while a nemesis faults a minority of five nodes at a time.
//! Four checkers watch the run:
//!
//! 1. mutual exclusion: one [`History`] per resource, no two holders overlap;
//! 2. the [`Oracle`] on every live guard after every step: no guard claims
//!    more validity than a quorum of nodes holds its keys for;
//! 3. fencing tokens strictly increase per resource in the order the
//!    acquisitions returned;
//! 4. once every fault is healed and every guard has ended, no lock key is
//!    left on any node.
//!
//! Two checkers are told what the faults did, and only that: the oracle
//! counts a node that refuses connections as holding nothing, so its
//! readings are judged again with the nodes the nemesis had killed (kept
//! down past every TTL, so granting nobody) counted as holding; and a
//! token that did not increase is put down to the fault, not the library,
//! when a node came back empty in between (counters must survive, as the
//! README says) or a fast-clock proxy was on while the earlier token was
//! written back (the proxy scales the second argument of any
//! two-argument script, and the write-back's is the token). Both kinds
//! are counted and printed apart; everything else fails the test.
//!
//! The negative controls at the end break the lock from outside and show
//! that the same checkers report it.
//!
//! Every random choice comes from the seed, printed on the first line:
//! `REDQUORUM_SEED=<seed>` replays the choices of a run (not its timing).
//! `REDQUORUM_MODEL_SECS=<secs>` runs longer than the default 30 s.
//!
//! `cargo test --all-features --test model -- --nocapture`

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use redquorum::testkit::{
    FaultKind, History, KeyLife, LocalCluster, Nemesis, ORACLE_TOLERANCE, Oracle, SEED_ENV,
    Violation, quorum_life,
};
use redquorum::{Error, LockGuard, Redlock};
use tokio::time::{Instant, sleep, timeout};

/// Environment variable: how long the model runs, in seconds.
const SECS_ENV: &str = "REDQUORUM_MODEL_SECS";
const DEFAULT_SECS: u64 = 30;
/// The resources the clients fight over.
const RESOURCES: [&str; 3] = ["ledger", "inbox", "report"];
const CLIENTS: usize = 5;
/// Every TTL (acquisition or extension) is drawn from this range, in ms.
const TTL_MS: (u64, u64) = (200, 1_500);
/// The longest TTL any operation uses: the nemesis keeps killed nodes down
/// longer than this, and the clean-up waits this long for orphans.
const MAX_TTL: Duration = Duration::from_millis(TTL_MS.1);
/// Guards a client holds at most before it only extends and ends them.
const MAX_LIVE: usize = 2;
/// Reentrant holds of one owner on one resource at most.
const MAX_NESTING: usize = 3;
/// The faults: a minority at a time, all within Redlock's assumptions
/// (killed nodes come back empty only after `MAX_TTL`, fast clocks stay
/// within the drift allowance).
const FAULTS: [FaultKind; 6] = [
    FaultKind::KillMinority,
    FaultKind::PauseOne,
    FaultKind::DelayAll,
    FaultKind::BlackholeMinority,
    FaultKind::ResetMinority,
    FaultKind::FastClockMinority,
];

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A short name for why an operation failed.
fn cause(e: &Error) -> String {
    match e {
        Error::Expired => "expired".to_owned(),
        Error::Lost => "lost".to_owned(),
        other => common::workload::cause(other),
    }
}

fn millis(rng: &mut StdRng, (low, high): (u64, u64)) -> Duration {
    Duration::from_millis(rng.random_range(low..=high))
}

/// One hold as it ended, to explain an overlap.
#[derive(Clone, Debug)]
struct Note {
    resource: String,
    holder: usize,
    client: usize,
    label: &'static str,
    how: String,
    start: Instant,
    valid_until: Instant,
    released_at: Instant,
}

/// A fencing token as issued.
#[derive(Clone, Copy, Debug)]
struct Issued {
    /// When the acquisition was called.
    called: Instant,
    /// When it returned.
    start: Instant,
    token: u64,
    client: usize,
}

/// Successes and failures (by cause) of one kind of operation.
#[derive(Debug, Default)]
struct Tally {
    ok: u64,
    failed: BTreeMap<String, u64>,
}

#[derive(Debug, Default)]
struct Stats {
    ops: BTreeMap<&'static str, Tally>,
    acquired: u64,
    /// Acquisitions times resources: the holds the histories must end up with.
    acquired_holds: u64,
    /// Reentrant holds taken while the owner already held the resource.
    nested: u64,
    oracle_checks: u64,
    /// Checks given up because a watchdog kept moving the deadline.
    oracle_inconclusive: u64,
    /// Oracle readings that broke the invariant, judged at the end.
    readings: Vec<Observed>,
}

/// An oracle reading that broke the invariant, with when it was taken.
#[derive(Clone, Debug)]
struct Observed {
    from: Instant,
    to: Instant,
    what: String,
    violation: Violation,
}

/// What the faults did that the checkers must take into account, and
/// nothing else: when nodes were down (polled from their pids).
#[derive(Debug, Default)]
struct Faults {
    /// Per node: (down from, back at), `None` while still down.
    down: Vec<Vec<(Instant, Option<Instant>)>>,
}

/// How late the node watcher may see a kill.
const WATCH_SLACK: Duration = Duration::from_millis(50);

impl Faults {
    /// From the node watcher's events.
    fn new(nodes: usize, events: &[(usize, Instant, bool)]) -> Faults {
        let mut faults = Faults {
            down: vec![Vec::new(); nodes],
        };
        for &(node, at, up) in events {
            let periods = &mut faults.down[node];
            if up {
                if let Some(last) = periods.last_mut() {
                    last.1 = Some(at);
                }
            } else {
                periods.push((at, None));
            }
        }
        faults
    }

    /// Whether `node` was down at some point of `[from, to]`.
    fn was_down(&self, node: usize, from: Instant, to: Instant) -> bool {
        self.down.get(node).is_some_and(|periods| {
            periods.iter().any(|&(down, back)| {
                down.checked_sub(WATCH_SLACK).unwrap_or(down) <= to
                    && back.is_none_or(|back| back >= from)
            })
        })
    }
}

/// Polls every node's pid until `stop` is set; returns (node, instant, up)
/// for every change: a node killed, a node started again.
fn watch_nodes(
    cluster: Arc<LocalCluster>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(usize, Instant, bool)>> {
    std::thread::spawn(move || {
        let mut last: Vec<Option<u32>> = (0..cluster.len()).map(|i| cluster.pid(i)).collect();
        let mut events = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            for (i, last) in last.iter_mut().enumerate() {
                let pid = cluster.pid(i);
                if pid != *last {
                    let at = Instant::from_std(std::time::Instant::now());
                    events.push((i, at, pid.is_some()));
                    *last = pid;
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        events
    })
}

/// What the oracle says of a guard, read while its deadline stood still.
#[derive(Debug)]
enum Reading {
    Held,
    Broken(Box<Violation>),
    /// A watchdog round moved the deadline during every read.
    Moving,
}

/// [`Oracle::check`], trusted only when the guard's deadline did not move
/// during the reads: a watchdog round that completes between the node
/// reads and the guard read would make a correct guard look too long-lived.
async fn read_oracle(oracle: &Oracle, redlock: &Redlock, guard: &LockGuard) -> Reading {
    for _ in 0..3 {
        let before = guard.valid_until();
        match oracle.check(redlock, guard).await {
            Ok(()) => return Reading::Held,
            Err(violation) if guard.valid_until() == before => {
                return Reading::Broken(Box::new(violation));
            }
            Err(_) => {}
        }
    }
    Reading::Moving
}

/// Everything the clients record, shared; and the checkers over it.
#[derive(Clone)]
struct Model {
    seed: u64,
    t0: Instant,
    oracle: Oracle,
    quorum: usize,
    histories: Arc<BTreeMap<String, History>>,
    notes: Arc<Mutex<Vec<Note>>>,
    tokens: Arc<Mutex<BTreeMap<String, Vec<Issued>>>>,
    stats: Arc<Mutex<Stats>>,
    /// Guards that are not reentrant holds each get a holder of their own,
    /// numbered from `CLIENTS` up (reentrant holds use the client's number).
    next_holder: Arc<AtomicUsize>,
}

impl Model {
    fn new(seed: u64, direct_urls: Vec<String>, quorum: usize) -> Model {
        let histories = RESOURCES
            .iter()
            .map(|r| ((*r).to_owned(), History::default()))
            .collect();
        Model {
            seed,
            t0: Instant::now(),
            oracle: Oracle::new(direct_urls, quorum),
            quorum,
            histories: Arc::new(histories),
            notes: Arc::default(),
            tokens: Arc::default(),
            stats: Arc::default(),
            next_holder: Arc::new(AtomicUsize::new(CLIENTS)),
        }
    }

    fn stats(&self) -> MutexGuard<'_, Stats> {
        lock(&self.stats)
    }

    fn fresh_holder(&self) -> usize {
        self.next_holder.fetch_add(1, Ordering::Relaxed)
    }

    /// Seconds since the model started, for messages.
    fn at(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.t0).as_secs_f64()
    }

    fn tally(&self, op: &'static str, outcome: Result<(), String>) {
        let mut stats = self.stats();
        let tally = stats.ops.entry(op).or_default();
        match outcome {
            Ok(()) => tally.ok += 1,
            Err(why) => *tally.failed.entry(why).or_default() += 1,
        }
    }

    /// A lock called at `called` returned at `start`: count it and keep
    /// its fencing tokens.
    fn acquired(&self, guard: &LockGuard, called: Instant, start: Instant, client: usize) {
        {
            let mut stats = self.stats();
            stats.acquired += 1;
            stats.acquired_holds += guard.resources().len() as u64;
        }
        if let Some(tokens) = guard.fencing_tokens() {
            let mut issued = lock(&self.tokens);
            for (resource, &token) in guard.resources().iter().zip(tokens) {
                issued.entry(resource.clone()).or_default().push(Issued {
                    called,
                    start,
                    token,
                    client,
                });
            }
        }
    }

    /// A hold ended: into the resource's history.
    fn record(&self, note: Note) {
        match self.histories.get(&note.resource) {
            Some(history) => {
                history.record(note.holder, note.start, note.valid_until, note.released_at);
            }
            None => panic!("seed={}: unknown resource {}", self.seed, note.resource),
        }
        lock(&self.notes).push(note);
    }

    /// Checks a live guard with the oracle and counts the outcome.
    async fn check(&self, redlock: &Redlock, guard: &LockGuard, client: usize, label: &str) {
        let from = Instant::now();
        let reading = read_oracle(&self.oracle, redlock, guard).await;
        let to = Instant::now();
        let mut stats = self.stats();
        stats.oracle_checks += 1;
        match reading {
            Reading::Held => {}
            Reading::Moving => stats.oracle_inconclusive += 1,
            Reading::Broken(violation) => stats.readings.push(Observed {
                from,
                to,
                what: format!("{:.3}s client {client} {label}", self.at(to)),
                violation: *violation,
            }),
        }
    }

    /// The oracle's violations: (those that stand, those a down node
    /// explains). The oracle counts a node that refuses connections as
    /// holding nothing; but a node killed by the nemesis stays down longer
    /// than any TTL and comes back empty, so while down it grants the lock
    /// to nobody, and it holds the key for the guard as surely as a paused
    /// node does (which the oracle counts as unbounded). Such readings are
    /// judged again with the down nodes unbounded.
    fn oracle_report(&self, faults: &Faults) -> (Vec<String>, Vec<String>) {
        let (mut stand, mut explained) = (Vec::new(), Vec::new());
        for seen in &self.stats().readings {
            let v = &seen.violation;
            let mut shortest: Option<Duration> = None;
            let mut down = Vec::new();
            for lives in &v.lives {
                let judged: Vec<KeyLife> = lives
                    .iter()
                    .enumerate()
                    .map(|(i, life)| {
                        if *life == KeyLife::Gone && faults.was_down(i, seen.from, seen.to) {
                            if !down.contains(&i) {
                                down.push(i);
                            }
                            KeyLife::Unbounded
                        } else {
                            *life
                        }
                    })
                    .collect();
                if let Some(life) = quorum_life(&judged, self.quorum) {
                    shortest = Some(shortest.map_or(life, |s| s.min(life)));
                }
            }
            let text = format!("{}: {v}", seen.what);
            match shortest {
                Some(life) if v.remaining > life + ORACLE_TOLERANCE => stand.push(text),
                _ => explained.push(format!("{text} [nodes {down:?} were down]")),
            }
        }
        (stand, explained)
    }

    /// Every overlap between two holders of one resource, explained.
    fn overlaps(&self) -> Vec<String> {
        let notes = lock(&self.notes).clone();
        let explain = |resource: &str, holder: usize, start: Instant| {
            notes
                .iter()
                .find(|n| n.resource == resource && n.holder == holder && n.start == start)
                .map_or_else(
                    || format!("holder {holder}"),
                    |n| {
                        format!(
                            "client {} {} (holder {}) from {:.3}s, valid until {:.3}s, {} at {:.3}s",
                            n.client,
                            n.label,
                            n.holder,
                            self.at(n.start),
                            self.at(n.valid_until),
                            n.how,
                            self.at(n.released_at)
                        )
                    },
                )
        };
        let mut found = Vec::new();
        for (resource, history) in self.histories.iter() {
            for (a, b) in history.overlaps() {
                found.push(format!(
                    "{resource}: [{}] overlaps [{}]",
                    explain(resource, a.holder, a.start),
                    explain(resource, b.holder, b.start)
                ));
            }
        }
        found
    }

    /// Holds recorded over every resource.
    fn holds(&self) -> usize {
        self.histories.values().map(History::len).sum()
    }

    /// Consecutive fenced acquisitions of a resource (in the order they
    /// returned) whose token did not increase. None is excused: the nodes
    /// keep their counters across the nemesis's kills (AOF), as fencing
    /// requires.
    fn token_report(&self) -> TokenReport {
        let mut issued = lock(&self.tokens).clone();
        let mut report = TokenReport::default();
        for (resource, tokens) in &mut issued {
            tokens.sort_by_key(|t| t.start);
            for pair in tokens.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                report.checked += 1;
                if b.token > a.token {
                    continue;
                }
                let text = format!(
                    "{resource}: token {} (client {}, called {:.3}s, returned {:.3}s) after token {} \
                     (client {}, called {:.3}s, returned {:.3}s)",
                    b.token,
                    b.client,
                    self.at(b.called),
                    self.at(b.start),
                    a.token,
                    a.client,
                    self.at(a.called),
                    self.at(a.start)
                );
                report.regressions.push(text);
            }
        }
        report
    }
}

/// What the token check found.
#[derive(Debug, Default, PartialEq)]
struct TokenReport {
    /// Pairs of consecutive acquisitions compared.
    checked: usize,
    /// Tokens that did not increase.
    regressions: Vec<String>,
}

/// Lock keys under `prefix` on every node, as `(node, key)`.
fn keys_left(direct_urls: &[String], prefix: &str) -> Vec<(usize, String)> {
    let pattern = format!("{prefix}lock:*");
    let mut left = Vec::new();
    for (i, url) in direct_urls.iter().enumerate() {
        match common::query::<Vec<String>>(url, redis::cmd("KEYS").arg(&pattern)) {
            Ok(keys) => left.extend(keys.into_iter().map(|k| (i, k))),
            Err(e) => panic!("KEYS {pattern} on node {i}: {e}"),
        }
    }
    left
}

/// A guard a client holds.
struct Live {
    guard: LockGuard,
    label: &'static str,
    holder: usize,
    reentrant: bool,
    start: Instant,
    /// When the client means to end it.
    end_at: Instant,
}

/// One client: a task drawing operations from its own seeded generator.
struct Client {
    id: usize,
    owner: String,
    rng: StdRng,
    plain: Redlock,
    fenced: Redlock,
    model: Model,
    live: Vec<Live>,
}

impl Client {
    fn new(id: usize, seed: u64, plain: &Redlock, fenced: &Redlock, model: &Model) -> Client {
        Client {
            id,
            owner: format!("client-{id}"),
            // The nemesis draws from `seed` itself.
            rng: StdRng::seed_from_u64(seed.wrapping_add(1 + id as u64)),
            plain: plain.clone(),
            fenced: fenced.clone(),
            model: model.clone(),
            live: Vec::new(),
        }
    }

    fn ttl(&mut self) -> Duration {
        millis(&mut self.rng, TTL_MS)
    }

    fn resource(&mut self) -> &'static str {
        RESOURCES[self.rng.random_range(0..RESOURCES.len())]
    }

    fn two_resources(&mut self) -> [&'static str; 2] {
        let first = self.rng.random_range(0..RESOURCES.len());
        let second = (first + self.rng.random_range(1..RESOURCES.len())) % RESOURCES.len();
        [RESOURCES[first], RESOURCES[second]]
    }

    /// Runs random steps until `until`, checking every live guard after
    /// each; returns the client with the guards it still holds.
    async fn run(mut self, until: Instant) -> Client {
        while Instant::now() < until {
            self.end_due().await;
            self.step().await;
            self.check_live().await;
        }
        self
    }

    async fn check_live(&self) {
        for live in &self.live {
            self.model
                .check(&self.plain, &live.guard, self.id, live.label)
                .await;
        }
    }

    /// Takes a guard just returned by a call made at `called` (the
    /// instant it returned is taken first).
    fn admit(
        &mut self,
        label: &'static str,
        called: Instant,
        result: redquorum::Result<LockGuard>,
    ) -> bool {
        let start = Instant::now();
        match result {
            Ok(guard) => {
                self.model.tally(label, Ok(()));
                self.model.acquired(&guard, called, start, self.id);
                let reentrant = label == "reentrant";
                let holder = if reentrant {
                    self.id
                } else {
                    self.model.fresh_holder()
                };
                let hold = millis(&mut self.rng, (10, 500));
                self.live.push(Live {
                    guard,
                    label,
                    holder,
                    reentrant,
                    start,
                    end_at: start + hold,
                });
                true
            }
            Err(e) => {
                self.model.tally(label, Err(cause(&e)));
                false
            }
        }
    }

    /// Ends live guard `index` by release or by drop, and records the hold.
    async fn end(&mut self, index: usize, release: bool) {
        let live = self.live.swap_remove(index);
        let valid_until = live.guard.valid_until();
        let resources = live.guard.resources().to_vec();
        let released_at = Instant::now();
        let how = if release {
            let result = live.guard.release().await;
            let how = match &result {
                Ok(()) => "released".to_owned(),
                Err(Error::Expired) => "released (expired)".to_owned(),
                Err(e) => format!("released ({e})"),
            };
            self.model.tally("release", result.map_err(|e| cause(&e)));
            how
        } else {
            drop(live.guard);
            self.model.tally("drop", Ok(()));
            "dropped".to_owned()
        };
        for resource in resources {
            self.model.record(Note {
                resource,
                holder: live.holder,
                client: self.id,
                label: live.label,
                how: how.clone(),
                start: live.start,
                valid_until,
                released_at,
            });
        }
    }

    async fn end_due(&mut self) {
        let now = Instant::now();
        while let Some(i) = self.live.iter().position(|l| l.end_at <= now) {
            let release = self.rng.random_bool(0.6);
            self.end(i, release).await;
        }
    }

    /// Ends every guard still held (at the end of the run).
    async fn finish(&mut self) {
        self.check_live().await;
        while let Some(last) = self.live.len().checked_sub(1) {
            let release = self.rng.random_bool(0.5);
            self.end(last, release).await;
        }
    }

    async fn step(&mut self) {
        let mut roll = self.rng.random_range(0..100u32);
        if roll < 59 && self.live.len() >= MAX_LIVE {
            roll = 74; // room first: release one
        }
        match roll {
            0..8 => {
                let (r, ttl) = (self.resource(), self.ttl());
                let called = Instant::now();
                let result = self.plain.try_lock(r, ttl).await;
                self.admit("try_lock", called, result);
            }
            8..16 => {
                let (r, ttl) = (self.resource(), self.ttl());
                let called = Instant::now();
                let result = self.plain.lock(r, ttl).await;
                self.admit("lock", called, result);
            }
            16..22 => {
                let (rs, ttl) = (self.two_resources(), self.ttl());
                let called = Instant::now();
                let result = self.plain.try_lock(&rs, ttl).await;
                self.admit("try_lock_many", called, result);
            }
            22..28 => {
                let (rs, ttl) = (self.two_resources(), self.ttl());
                let called = Instant::now();
                let result = self.plain.lock(&rs, ttl).await;
                self.admit("lock_many", called, result);
            }
            28..36 => {
                let (r, ttl) = (self.resource(), self.ttl());
                let called = Instant::now();
                let result = if self.rng.random_bool(0.5) {
                    self.fenced.lock(r, ttl).await
                } else {
                    self.fenced.try_lock(r, ttl).await
                };
                self.admit("fenced", called, result);
            }
            36..41 => {
                let (rs, ttl) = (self.two_resources(), self.ttl());
                let called = Instant::now();
                let result = self.fenced.lock(&rs, ttl).await;
                self.admit("fenced_many", called, result);
            }
            41..50 => self.reentrant().await,
            50..55 => self.cancelled_lock().await,
            55..59 => self.scoped().await,
            59..69 => {
                if let Some(i) = self.pick() {
                    let ttl = self.ttl();
                    let result = self.live[i].guard.extend(ttl).await;
                    self.model.tally("extend", result.map_err(|e| cause(&e)));
                }
            }
            69..74 => {
                if let Some(i) = self.pick() {
                    self.live[i].guard.auto_extend();
                    let keep = millis(&mut self.rng, (200, 2_500));
                    let live = &mut self.live[i];
                    live.end_at = live.end_at.max(Instant::now() + keep);
                    self.model.tally("auto_extend", Ok(()));
                }
            }
            74..82 => {
                if let Some(i) = self.pick() {
                    self.end(i, true).await;
                }
            }
            82..88 => {
                if let Some(i) = self.pick() {
                    self.end(i, false).await;
                }
            }
            _ => {
                let pause = millis(&mut self.rng, (5, 80));
                sleep(pause).await;
            }
        }
    }

    fn pick(&mut self) -> Option<usize> {
        (!self.live.is_empty()).then(|| self.rng.random_range(0..self.live.len()))
    }

    /// One to three reentrant holds in a row, nested on a resource the
    /// owner already holds when there is one.
    async fn reentrant(&mut self) {
        let held: Vec<&'static str> = RESOURCES
            .iter()
            .copied()
            .filter(|r| self.holds_of(r) > 0)
            .collect();
        let r = if !held.is_empty() && self.rng.random_bool(0.7) {
            held[self.rng.random_range(0..held.len())]
        } else {
            self.resource()
        };
        for _ in 0..self.rng.random_range(1..=MAX_NESTING) {
            let holds = self.holds_of(r);
            if holds >= MAX_NESTING || self.live.len() >= MAX_LIVE + MAX_NESTING {
                break;
            }
            let ttl = self.ttl();
            let called = Instant::now();
            let result = if self.rng.random_bool(0.5) {
                self.plain
                    .lock_with(r, ttl, &redquorum::LockOptions::new().owner(&self.owner))
                    .await
            } else {
                self.plain
                    .lock_with(
                        r,
                        ttl,
                        &redquorum::LockOptions::new()
                            .owner(&self.owner)
                            .wait(redquorum::Wait::No),
                    )
                    .await
            };
            if holds > 0 && result.is_ok() {
                self.model.stats().nested += 1;
            }
            if !self.admit("reentrant", called, result) {
                break;
            }
            self.check_live().await;
        }
    }

    fn holds_of(&self, resource: &str) -> usize {
        self.live
            .iter()
            .filter(|l| l.reentrant && l.guard.resource() == resource)
            .count()
    }

    /// `lock()` under a short timeout: often cancelled mid-attempt.
    async fn cancelled_lock(&mut self) {
        let (r, ttl) = (self.resource(), self.ttl());
        let limit = millis(&mut self.rng, (1, 40));
        let redlock = if self.rng.random_bool(0.5) {
            self.plain.clone()
        } else {
            self.fenced.clone()
        };
        let called = Instant::now();
        match timeout(limit, redlock.lock(r, ttl)).await {
            Ok(result) => {
                self.admit("lock_in_time", called, result);
            }
            Err(_) => self
                .model
                .tally("lock_in_time", Err("cancelled".to_owned())),
        }
    }

    /// `with_lock`: a job of a few chunks under the watchdog, checked with
    /// the oracle after each chunk.
    async fn scoped(&mut self) {
        let (r, ttl) = (self.resource(), self.ttl());
        let chunks = self.rng.random_range(1..=4u32);
        let chunk = millis(&mut self.rng, (20, 400));
        // (start, latest deadline seen): kept if the job is cancelled.
        let seen: Mutex<Option<(Instant, Instant)>> = Mutex::new(None);
        let (model, plain, id) = (self.model.clone(), self.plain.clone(), self.id);
        let called = Instant::now();
        let result = self
            .plain
            .with_lock(r, ttl, async |guard: &LockGuard| {
                let start = Instant::now();
                *lock(&seen) = Some((start, guard.valid_until()));
                model.acquired(guard, called, start, id);
                for _ in 0..chunks {
                    sleep(chunk).await;
                    model.check(&plain, guard, id, "with_lock").await;
                    *lock(&seen) = Some((start, guard.valid_until()));
                }
                (guard.valid_until(), Instant::now())
            })
            .await;
        let returned_at = Instant::now();
        let seen = *lock(&seen);
        let ended = match result {
            Ok((valid_until, done_at)) => {
                self.model.tally("with_lock", Ok(()));
                seen.map(|(start, _)| (start, valid_until, done_at, "done"))
            }
            Err(Error::Lost) => {
                self.model.tally("with_lock", Err("lost".to_owned()));
                seen.map(|(start, valid_until)| (start, valid_until, returned_at, "lost"))
            }
            Err(e) => {
                self.model.tally("with_lock", Err(cause(&e)));
                None
            }
        };
        if let Some((start, valid_until, released_at, how)) = ended {
            self.model.record(Note {
                resource: r.to_owned(),
                holder: self.model.fresh_holder(),
                client: self.id,
                label: "with_lock",
                how: how.to_owned(),
                start,
                valid_until,
                released_at,
            });
        }
    }
}

fn model_secs() -> u64 {
    std::env::var(SECS_ENV)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(DEFAULT_SECS)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_clients_under_minority_faults_keep_exclusion_validity_fencing_and_clean_up() {
    let seed = Nemesis::seed_from_env();
    let secs = model_secs();
    eprintln!("[model] seed={seed} secs={secs} (replay with {SEED_ENV}={seed})");
    let cluster = Arc::new(common::cluster(5));
    // Killed nodes come back with what they acknowledged: fencing tokens
    // only promise to increase on nodes that keep their counters.
    tokio::task::block_in_place(|| {
        for i in 0..cluster.len() {
            cluster
                .enable_aof(i)
                .unwrap_or_else(|e| panic!("AOF on node {i}: {e}"));
        }
    });
    let prefix = format!("model-{seed:016x}:");
    let config = common::fast_config()
        .with_extend_at(0.5)
        .with_key_prefix(&prefix);
    let plain = common::redlock(&cluster.urls(), config.clone());
    let fenced = common::redlock(&cluster.urls(), config.with_fencing(true));
    let model = Model::new(seed, cluster.direct_urls(), plain.quorum());
    let stop_watching = Arc::new(AtomicBool::new(false));
    let watcher = watch_nodes(Arc::clone(&cluster), Arc::clone(&stop_watching));

    let duration = Duration::from_secs(secs);
    let until = Instant::now() + duration;
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|i| tokio::spawn(Client::new(i, seed, &plain, &fenced, &model).run(until)))
        .collect();
    let nemesis = Nemesis::new(Arc::clone(&cluster), seed, MAX_TTL)
        .with_kinds(&FAULTS)
        .with_durable_restarts();
    // run() heals every node before it returns.
    let report = nemesis.run(duration).await;
    let mut clients = Vec::new();
    for task in tasks {
        match task.await {
            Ok(client) => clients.push(client),
            Err(e) => panic!("seed={seed}: a client task failed: {e}"),
        }
    }
    let report = report.unwrap_or_else(|e| panic!("seed={seed}: the nemesis failed: {e}"));
    for line in &report.log {
        eprintln!("[model] fault {line}");
    }

    // Keys set during faults that no release could reach (a node cut off,
    // a late request applied when a paused node resumed) expire by now.
    sleep(MAX_TTL + Duration::from_millis(250)).await;
    for client in &mut clients {
        client.finish().await;
    }
    plain.shutdown().await;
    fenced.shutdown().await;
    let left = keys_left(&cluster.direct_urls(), &prefix);
    stop_watching.store(true, Ordering::Relaxed);
    let events = watcher
        .join()
        .unwrap_or_else(|_| panic!("seed={seed}: the node watcher failed"));
    let faults = Faults::new(cluster.len(), &events);

    let overlaps = model.overlaps();
    let (violations, down_readings) = model.oracle_report(&faults);
    let tokens = model.token_report();
    let stats = model.stats();
    let ops: u64 = stats
        .ops
        .values()
        .map(|t| t.ok + t.failed.values().sum::<u64>())
        .sum();
    let summary = format!(
        "[model] seed={seed} secs={secs} ops={ops} acquired={} nested={} faults={} overlaps={} \
         oracle_checks={} oracle_violations={} oracle_down_node_readings={} oracle_inconclusive={} \
         tokens_checked={} token_regressions={} keys_left={}",
        stats.acquired,
        stats.nested,
        report.faults(),
        overlaps.len(),
        stats.oracle_checks,
        violations.len(),
        down_readings.len(),
        stats.oracle_inconclusive,
        tokens.checked,
        tokens.regressions.len(),
        left.len(),
    );
    for (op, tally) in &stats.ops {
        eprintln!("[model] {op}: ok={} failed={:?}", tally.ok, tally.failed);
    }
    for line in down_readings.iter().take(3) {
        eprintln!("[model] oracle, down node: {line}");
    }
    eprintln!("{summary}");
    let mut problems = Vec::new();
    // Up to ten of each kind, so that one kind cannot hide another.
    problems.extend(overlaps.iter().map(|o| format!("overlap: {o}")));
    problems.extend(violations.iter().map(|v| format!("oracle: {v}")));
    problems.extend(tokens.regressions.iter().map(|r| format!("fencing: {r}")));
    problems.extend(left.iter().map(|(i, k)| format!("left on node {i}: {k}")));
    for kind in ["overlap:", "oracle:", "fencing:", "left on"] {
        for problem in problems.iter().filter(|p| p.starts_with(kind)).take(10) {
            eprintln!("[model] {problem}");
        }
    }
    assert!(
        problems.is_empty(),
        "seed={seed}: {} problem(s), first: {}\n{summary}",
        problems.len(),
        problems[0]
    );

    // Not vacuous: enough happened, of every kind.
    let min = secs * 2;
    assert!(
        stats.acquired >= min,
        "seed={seed}: fewer than {min} acquisitions\n{summary}"
    );
    assert_eq!(
        model.holds() as u64,
        stats.acquired_holds,
        "seed={seed}: a hold went unrecorded\n{summary}"
    );
    assert!(
        stats.oracle_checks >= stats.acquired,
        "seed={seed}: too few oracle checks\n{summary}"
    );
    if secs >= 10 {
        let ok = |ops: &[&str]| -> u64 {
            ops.iter()
                .map(|op| stats.ops.get(op).map_or(0, |t| t.ok))
                .sum()
        };
        let groups: [&[&str]; 8] = [
            &["try_lock", "lock"],
            &["try_lock_many", "lock_many"],
            &["fenced", "fenced_many"],
            &["reentrant"],
            &["with_lock"],
            &["extend"],
            &["release"],
            &["drop"],
        ];
        for group in groups {
            assert!(
                ok(group) > 0,
                "seed={seed}: no successful {group:?}\n{summary}"
            );
        }
        assert!(
            stats.nested > 0,
            "seed={seed}: no nested reentrant hold\n{summary}"
        );
        assert!(
            tokens.checked > 0,
            "seed={seed}: no fencing token compared\n{summary}"
        );
        assert!(
            report.faults() > 0,
            "seed={seed}: no fault injected\n{summary}"
        );
    }
}

// Negative controls: the lock is broken from outside, and the checkers
// above (the same code) must say so.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checkers_report_a_lock_deleted_from_a_quorum_while_its_guard_is_live() {
    let cluster = common::cluster(5);
    let prefix = "control:";
    let config = common::fast_config().with_key_prefix(prefix);
    let first = common::redlock(&cluster.urls(), config.clone());
    let second = common::redlock(&cluster.urls(), config);
    let model = Model::new(0, cluster.direct_urls(), first.quorum());
    let no_faults = Faults::default();
    let ttl = Duration::from_secs(10);

    let called = Instant::now();
    let one = first.lock("ledger", ttl).await.unwrap();
    let one_start = Instant::now();
    model.acquired(&one, called, one_start, 1);
    // The lock returns at quorum; let the slower nodes' calls land too.
    first.shutdown().await;
    let key = first.lock_key("ledger");
    let direct = cluster.direct_urls();
    assert_eq!(common::holders(&direct, &key, one.value()), cluster.len());
    model.check(&first, &one, 1, "lock").await;
    assert_eq!(
        model.oracle_report(&no_faults),
        (vec![], vec![]),
        "a sound guard passes"
    );
    for i in 0..first.quorum() {
        assert!(
            cluster.expire_now(i, &key).unwrap(),
            "node {i} held the key"
        );
    }
    model.check(&first, &one, 1, "lock").await;
    let (violations, explained) = model.oracle_report(&no_faults);
    println!("[model control] oracle: {violations:?}");
    assert_eq!(violations.len(), 1, "the oracle reports the guard");
    assert!(violations[0].contains("ledger"), "{violations:?}");
    assert_eq!(explained, Vec::<String>::new());
    // Had those nodes been down instead, the reading would be explained.
    let now = Instant::now();
    let down = Faults {
        down: (0..cluster.len())
            .map(|i| {
                if i < first.quorum() {
                    vec![(model.t0, None)]
                } else {
                    vec![]
                }
            })
            .collect(),
    };
    assert!(down.was_down(0, now, now));
    assert_eq!(model.oracle_report(&down).0, Vec::<String>::new());

    // The nodes that lost the key grant it to someone else.
    let two = second.try_lock("ledger", ttl).await.unwrap();
    let two_start = Instant::now();
    assert!(!keys_left(&cluster.direct_urls(), prefix).is_empty());
    for (holder, start, guard) in [(1, one_start, &one), (2, two_start, &two)] {
        model.record(Note {
            resource: "ledger".to_owned(),
            holder,
            client: holder,
            label: "lock",
            how: "released".to_owned(),
            start,
            valid_until: guard.valid_until(),
            released_at: Instant::now(),
        });
    }
    let overlaps = model.overlaps();
    println!("[model control] history: {overlaps:?}");
    assert_eq!(overlaps.len(), 1, "the history reports the two holders");

    // Ending both leaves nothing behind: the key check can pass too.
    assert!(matches!(one.release().await, Err(Error::Expired)));
    two.release().await.unwrap();
    first.shutdown().await;
    second.shutdown().await;
    assert_eq!(keys_left(&cluster.direct_urls(), prefix), vec![]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_check_reports_a_fencing_counter_lost_on_every_node() {
    let cluster = common::cluster(5);
    let prefix = "control:";
    let fenced = common::redlock(
        &cluster.urls(),
        common::fast_config()
            .with_key_prefix(prefix)
            .with_fencing(true),
    );
    let model = Model::new(0, cluster.direct_urls(), fenced.quorum());
    let ttl = Duration::from_secs(5);
    let take = async || {
        let called = Instant::now();
        let guard = fenced.lock("ledger", ttl).await.unwrap();
        model.acquired(&guard, called, Instant::now(), 0);
        let token = guard.fencing_token();
        guard.release().await.unwrap();
        // Every node's write-back done, also the slower ones.
        fenced.shutdown().await;
        token
    };
    assert_eq!(take().await, Some(1));
    assert_eq!(take().await, Some(2));
    assert_eq!(
        model.token_report(),
        TokenReport {
            checked: 1,
            ..TokenReport::default()
        }
    );
    // The README's caveat: counters must survive. Forget them everywhere.
    let counter = format!("{prefix}fence:ledger");
    for i in 0..cluster.len() {
        assert!(
            cluster.expire_now(i, &counter).unwrap(),
            "node {i} had the counter"
        );
    }
    assert_eq!(take().await, Some(1));
    let report = model.token_report();
    println!("[model control] tokens: {report:?}");
    assert_eq!(report.checked, 2);
    assert_eq!(report.regressions.len(), 1, "the token check reports it");
}
