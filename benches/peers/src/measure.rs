//! The uncontended scenarios: sequential pairs and 64-task throughput.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::libs::{Lib, fresh};

/// What one sequential run saw.
pub struct Sequential {
    /// Median time of one acquire+release pair.
    pub pair_p50: Duration,
    /// Median time of one release.
    pub release_p50: Duration,
    /// Pairs per second.
    pub rate: f64,
}

/// Sequential pairs on one resource for `secs`, from one spawned task (as
/// a service's request handler would run them: `main`'s own future runs
/// outside the runtime's workers, so that every wake-up would cross
/// threads).
pub async fn sequential(lib: &Lib, secs: Duration) -> Sequential {
    let lib = lib.clone();
    tokio::spawn(async move { sequential_here(&lib, secs).await })
        .await
        .expect("sequential task")
}

async fn sequential_here(lib: &Lib, secs: Duration) -> Sequential {
    let resource = fresh("seq");
    let (mut pairs, mut releases) = (Vec::new(), Vec::new());
    let start = Instant::now();
    while start.elapsed() < secs {
        let (acquire, release) = lib.timed_pair(&resource).await;
        pairs.push(acquire + release);
        releases.push(release);
    }
    let rate = pairs.len() as f64 / start.elapsed().as_secs_f64();
    pairs.sort();
    releases.sort();
    Sequential {
        pair_p50: pairs[pairs.len() / 2],
        release_p50: releases[releases.len() / 2],
        rate,
    }
}

/// This process's CPU time (user + system) in clock ticks (1/100 s on Linux).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses).
    let rest = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    field(11) + field(12)
}

/// Pairs per second with `tasks` tasks on distinct resources for `secs`,
/// and the client CPU time per pair in microseconds.
pub async fn concurrent(lib: &Lib, tasks: usize, secs: Duration) -> (f64, f64) {
    let done = Arc::new(AtomicU64::new(0));
    let cpu_start = cpu_ticks();
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (lib, done) = (lib.clone(), Arc::clone(&done));
            tokio::spawn(async move {
                let resource = fresh("tp");
                while start.elapsed() < secs {
                    lib.pair(&resource).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for h in handles {
        h.await.expect("task");
    }
    let pairs = done.load(Ordering::Relaxed) as f64;
    let cpu_us = (cpu_ticks() - cpu_start) as f64 * 10_000.0;
    (pairs / start.elapsed().as_secs_f64(), cpu_us / pairs)
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
