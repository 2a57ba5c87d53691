//! A contended workload for fault tests: workers lock one resource, do a
//! read-sleep-write of a counter under the lock, release, and record every
//! hold in a [`History`]; failures are counted by cause.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::RngExt;
use redquorum::testkit::{Counter, History};
use redquorum::{Config, Error, Redlock};
use tokio::time::Instant;

/// How a run is shaped.
#[derive(Clone, Debug)]
pub struct Params {
    pub workers: usize,
    pub ttl: Duration,
    pub resource: String,
    pub config: Config,
    /// Each hold sleeps a random time in this range before writing.
    pub hold: (Duration, Duration),
    /// A `lock()` call taking longer than this counts as a hang.
    pub hang_after: Duration,
}

impl Params {
    pub fn new(ttl: Duration) -> Params {
        Params {
            workers: 4,
            ttl,
            resource: super::unique("faults"),
            config: Config::default()
                .with_retries(2)
                .with_retry_delay(ttl / 10)
                .with_retry_jitter(ttl / 20)
                .with_node_timeout(ttl / 5),
            hold: (ttl / 40, ttl / 8),
            hang_after: ttl * 10 + Duration::from_secs(2),
        }
    }
}

/// What happened during a run.
#[derive(Debug, Default)]
pub struct Stats {
    pub acquisitions: u64,
    /// Failures of `lock()` by cause.
    pub failures: BTreeMap<String, u64>,
    /// `Ok` guards whose validity was already zero.
    pub empty_validity: u64,
    /// `release()` that said the lock had expired.
    pub expired_releases: u64,
    /// Counter writes skipped because the validity ran out first.
    pub skipped_writes: u64,
}

/// The outcome of a run, with both checkers.
#[derive(Clone)]
pub struct Run {
    pub history: History,
    pub counter: Counter,
    pub stats: Arc<Mutex<Stats>>,
}

impl Run {
    pub fn new() -> Run {
        Run {
            history: History::default(),
            counter: Counter::default(),
            stats: Arc::new(Mutex::new(Stats::default())),
        }
    }

    fn with_stats(&self, f: impl FnOnce(&mut Stats)) {
        f(&mut self.stats.lock().unwrap_or_else(|p| p.into_inner()));
    }

    pub fn acquisitions(&self) -> u64 {
        self.stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .acquisitions
    }

    pub fn failures(&self, cause: &str) -> u64 {
        let stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        stats.failures.get(cause).copied().unwrap_or(0)
    }

    pub fn empty_validity(&self) -> u64 {
        self.stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .empty_validity
    }

    pub fn overlaps(&self) -> usize {
        self.history.overlaps().len()
    }

    /// One line per scenario for the test output.
    pub fn summary(&self, scenario: &str, faults: usize) -> String {
        let stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        format!(
            "[{scenario}] acquisitions={} failures={:?} expired_releases={} \
             skipped_writes={} empty_validity={} faults={faults} overlaps={} \
             lost_updates={} (counter={}, acknowledged={})",
            stats.acquisitions,
            stats.failures,
            stats.expired_releases,
            stats.skipped_writes,
            stats.empty_validity,
            self.history.overlaps().len(),
            self.counter.lost_updates(),
            self.counter.read(),
            self.counter.acknowledged(),
        )
    }

    /// Runs `params.workers` clients until `until`.
    pub async fn drive(&self, urls: &[String], params: &Params, until: Instant) {
        let mut tasks = Vec::new();
        for worker in 0..params.workers {
            let redlock = super::redlock(urls, params.config.clone());
            let (run, params) = (self.clone(), params.clone());
            tasks.push(tokio::spawn(async move {
                run.worker(worker, &redlock, &params, until).await;
            }));
        }
        for task in tasks {
            if let Err(e) = task.await {
                panic!("worker panicked: {e}");
            }
        }
    }

    async fn worker(&self, id: usize, redlock: &Redlock, params: &Params, until: Instant) {
        while Instant::now() < until {
            let attempt = tokio::time::timeout(
                params.hang_after,
                redlock.lock(&params.resource, params.ttl),
            )
            .await;
            let guard = match attempt {
                Err(_) => {
                    self.with_stats(|s| *s.failures.entry("hang".into()).or_default() += 1);
                    continue;
                }
                Ok(Err(e)) => {
                    let cause = cause(&e);
                    self.with_stats(|s| *s.failures.entry(cause).or_default() += 1);
                    tokio::time::sleep(params.ttl / 20).await;
                    continue;
                }
                Ok(Ok(guard)) => guard,
            };
            let acquired_at = Instant::now();
            let valid_until = guard.valid_until();
            self.with_stats(|s| {
                s.acquisitions += 1;
                if valid_until <= acquired_at {
                    s.empty_validity += 1;
                }
            });
            let seen = self.counter.read();
            let pause = {
                let (lo, hi) = params.hold;
                let mut rng = rand::rng();
                Duration::from_micros(
                    rng.random_range(lo.as_micros() as u64..=hi.as_micros() as u64),
                )
            };
            tokio::time::sleep(pause).await;
            if Instant::now() < valid_until {
                self.counter.write(seen + 1);
                self.counter.acknowledge();
            } else {
                self.with_stats(|s| s.skipped_writes += 1);
            }
            let released_at = Instant::now();
            self.history
                .record(id, acquired_at, valid_until, released_at);
            if let Err(Error::Expired) = guard.release().await {
                self.with_stats(|s| s.expired_releases += 1);
            }
        }
    }
}

/// A short name for why `lock()` failed.
pub fn cause(e: &Error) -> String {
    match e {
        Error::NotAcquired(a) if a.reason() == redquorum::Reason::ValidityExhausted => {
            "validity_exhausted".into()
        }
        Error::NotAcquired(a) if a.reason() == redquorum::Reason::Unavailable => {
            "unavailable".into()
        }
        Error::NotAcquired(a) if a.reason() == redquorum::Reason::Contended => "contended".into(),
        Error::NotAcquired(_) => "no_quorum".into(),
        Error::ReleaseUnconfirmed(_) => "unconfirmed".into(),
        other => format!("other: {other}"),
    }
}

impl fmt::Debug for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary("run", 0))
    }
}

/// Runs the workload for `duration` while `fault` runs alongside (it
/// returns how many faults it injected), prints the summary, and asserts
/// the invariants every scenario must keep: no overlap, no lost update, no
/// hang, no `Ok` without validity. Returns the run for further checks.
pub async fn scenario<F>(
    name: &str,
    urls: &[String],
    params: &Params,
    duration: Duration,
    fault: F,
) -> Run
where
    F: std::future::Future<Output = usize>,
{
    let run = Run::new();
    let until = Instant::now() + duration;
    let (faults, ()) = tokio::join!(fault, run.drive(urls, params, until));
    let summary = run.summary(name, faults);
    eprintln!("{summary}");
    assert_eq!(run.history.overlaps(), vec![], "{summary}");
    assert_eq!(run.counter.lost_updates(), 0, "{summary}");
    assert_eq!(run.failures("hang"), 0, "{summary}");
    assert_eq!(run.empty_validity(), 0, "{summary}");
    run
}

/// Holds that started (lock() returned) within `[from, to]`.
pub fn started_between(run: &Run, from: Instant, to: Instant) -> usize {
    run.history
        .holds()
        .iter()
        .filter(|h| h.start >= from && h.start <= to)
        .count()
}

/// Instants a fault records while it runs (when it struck, when it
/// healed...), read back after the run in the order they were taken.
#[derive(Clone, Default)]
pub struct Marks(Arc<Mutex<Vec<Instant>>>);

impl Marks {
    /// Records the current instant.
    pub fn mark(&self) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Instant::now());
    }

    /// The `N` instants recorded; panics if the fault did not record them all.
    pub fn get<const N: usize>(&self) -> [Instant; N] {
        let marks = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match <[Instant; N]>::try_from(marks) {
            Ok(marks) => marks,
            Err(marks) => panic!(
                "the fault recorded {} of {N} instants: did it run?",
                marks.len()
            ),
        }
    }
}
