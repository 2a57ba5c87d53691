//! Many schedules: a seed range run on every core until a time budget is
//! spent, failures shrunk to the faults that matter, and a one-line
//! summary.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::run::{Plan, Report, run};

/// What a batch found.
#[derive(Debug, Default)]
pub struct Summary {
    /// Schedules run.
    pub schedules: u64,
    /// The failing reports (with their faults shrunk).
    pub failures: Vec<Report>,
    /// The lowest and highest seed run.
    pub seeds: (u64, u64),
    /// Wall time spent.
    pub elapsed: Duration,
    /// Operations the clients finished, over all schedules.
    pub ops: u64,
    /// Commands the simulated nodes ran, over all schedules.
    pub commands: u64,
    /// Schedules whose every violation is a known open defect (`known`),
    /// with their reports: listed, not failed.
    pub known: Vec<Report>,
}

impl Summary {
    /// Schedules per minute of wall time.
    pub fn per_minute(&self) -> f64 {
        self.schedules as f64 * 60.0 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The summary line:
    /// `schedules=N violations=V schedules_per_min=R seed_range=A..B`.
    pub fn line(&self) -> String {
        format!(
            "schedules={} violations={} schedules_per_min={:.0} seed_range={}..{} \
             known_open={}",
            self.schedules,
            self.failures
                .iter()
                .map(|r| r.violations.len())
                .sum::<usize>(),
            self.per_minute(),
            self.seeds.0,
            self.seeds.1,
            self.known.len()
        )
    }
}

/// Runs seeds `first`, `first + 1`, ... on `threads` threads until
/// `budget` is spent (at least one seed each), at most `limit` seeds. A
/// schedule whose every violation `known` recognises (a known open
/// defect) is listed apart and not shrunk. With `notifications_off`,
/// every client runs without release notifications. With `fail_fast`, the
/// first failing schedule ends the batch and is reported as it ran, not
/// shrunk (the mutation measure only needs to know that one fails).
pub fn batch(
    first: u64,
    budget: Duration,
    threads: usize,
    limit: u64,
    known: fn(&str) -> bool,
    notifications_off: bool,
    fail_fast: bool,
) -> Summary {
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(first));
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let known_open = Arc::new(Mutex::new(Vec::new()));
    let counts = Arc::new(Mutex::new((0u64, 0u64, u64::MAX, 0u64, 0u64)));
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            let (next, stop, failures, counts) = (&next, &stop, &failures, &counts);
            let known_open = &known_open;
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed - first >= limit {
                        break;
                    }
                    let report = run(&Plan {
                        seed,
                        notifications_off,
                        ..Plan::default()
                    });
                    {
                        let mut c = counts.lock().unwrap_or_else(PoisonError::into_inner);
                        c.0 += 1;
                        c.1 += report.ops as u64;
                        c.2 = c.2.min(seed);
                        c.3 = c.3.max(seed);
                        c.4 += report.commands;
                    }
                    if !report.violations.is_empty() && report.violations.iter().all(|v| known(v)) {
                        known_open
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(report);
                    } else if !report.violations.is_empty() {
                        let failed = if fail_fast {
                            stop.store(true, Ordering::Relaxed);
                            report
                        } else {
                            shrink(&report)
                        };
                        failures
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(failed);
                    }
                    if started.elapsed() >= budget {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let (schedules, ops, low, high, commands) =
        *counts.lock().unwrap_or_else(PoisonError::into_inner);
    let mut failures =
        std::mem::take(&mut *failures.lock().unwrap_or_else(PoisonError::into_inner));
    failures.sort_by_key(|r| r.seed);
    let mut known = std::mem::take(&mut *known_open.lock().unwrap_or_else(PoisonError::into_inner));
    known.sort_by_key(|r| r.seed);
    Summary {
        known,
        schedules,
        failures,
        seeds: (if low == u64::MAX { first } else { low }, high),
        elapsed: started.elapsed(),
        ops,
        commands,
    }
}

/// `report`'s schedule again with as few of its faults as still give a
/// violation (each fault dropped in turn, kept out when the run still
/// fails). Returns the failing report of the smallest list found.
pub fn shrink(report: &Report) -> Report {
    let mut faults = report.faults.clone();
    let mut best: Option<Report> = None;
    let mut i = faults.len();
    while i > 0 {
        i -= 1;
        let mut fewer = faults.clone();
        fewer.remove(i);
        let again = run(&Plan {
            seed: report.seed,
            faults: Some(fewer.clone()),
            control: None,
            notifications_off: report.notifications_off,
        });
        if !again.violations.is_empty() {
            faults = fewer;
            best = Some(again);
        }
    }
    best.unwrap_or_else(|| Report {
        seed: report.seed,
        notifications_off: report.notifications_off,
        violations: report.violations.clone(),
        faults: report.faults.clone(),
        clients: report.clients.clone(),
        hash: report.hash,
        ops: report.ops,
        commands: report.commands,
        history: report.history.clone(),
        ended: report.ended.clone(),
    })
}
