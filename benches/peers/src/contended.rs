//! Contended: 16 workers take turns on one resource, each looping
//! {lock (waiting until acquired), hold 1 ms, release}.
//!
//! The hold is 1 ms of blocking work (`std::thread::sleep` on the blocking
//! pool), so that it lasts about what it says: a `tokio::time::sleep` of
//! 1 ms lasts about 2 ms, the timer having millisecond ticks, and would
//! leave the hand-off a small part of each turn. The hold as measured is
//! reported with the results.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redquorum::Redlock;
use rslock::LockManager;

use crate::libs::{Lib, TTL, base_config, fresh};

pub const WORKERS: usize = 16;
const HOLD: Duration = Duration::from_millis(1);

/// redquorum waiting in `lock()`: retries without limit, 5 ms +- 3 ms
/// between attempts (woken earlier by release notifications, on by
/// default).
pub fn ours(urls: &[String]) -> Lib {
    let config = base_config()
        .with_retries(u32::MAX)
        .with_retry_delay(Duration::from_millis(5))
        .with_retry_jitter(Duration::from_millis(3));
    Lib::Ours(Redlock::with_config(urls.iter().map(String::as_str), config).expect("redquorum"))
}

/// rslock's retrying `lock()`: retries without limit, a random pause in
/// 0..10 ms between attempts (mean 5 ms, as ours).
pub fn peer(urls: &[String]) -> Lib {
    let mut manager = LockManager::new(urls.to_vec());
    manager.set_retry(u32::MAX, Duration::from_millis(10));
    Lib::Peer(Arc::new(manager))
}

/// What one contended run saw.
pub struct Contended {
    pub per_sec: f64,
    /// Fewest acquisitions of one worker / most of one worker.
    pub fairness: f64,
    /// Calls of the waiting `lock()` that returned an error (the worker
    /// then called it again).
    pub give_ups: u64,
    /// Mean time from acquired to release called, in microseconds.
    pub hold_us: f64,
    /// Median hand-off: from a release called to the next worker's lock
    /// acquired, in microseconds.
    pub handoff_us: f64,
}

/// Holds for [`HOLD`] on the blocking pool; returns how long it took.
async fn hold() -> Duration {
    let start = Instant::now();
    tokio::task::spawn_blocking(|| std::thread::sleep(HOLD))
        .await
        .expect("hold");
    start.elapsed()
}

/// Waits for the lock; `None` if the waiting call gave up.
async fn lock(lib: &Lib, resource: &str) -> Option<Held> {
    match lib {
        Lib::Ours(r) => r.lock(resource, TTL).await.ok().map(Held::Ours),
        Lib::Peer(m) => m.lock(resource, TTL).await.ok().map(Held::Peer),
        Lib::Floor(_) | Lib::Raw(_) => panic!("the floors have no waiting lock"),
    }
}

enum Held {
    Ours(redquorum::LockGuard),
    Peer(rslock::Lock),
}

async fn release(lib: &Lib, held: Held) {
    match (lib, held) {
        (_, Held::Ours(guard)) => guard.release().await.expect("redquorum release"),
        (Lib::Peer(m), Held::Peer(lock)) => m.unlock(&lock).await,
        (_, Held::Peer(_)) => unreachable!("an rslock lock from another library"),
    }
}

/// 16 workers on one fresh resource for `secs`. Acquisitions made after
/// the deadline are released and not counted.
pub async fn contended(lib: &Lib, secs: Duration) -> Contended {
    let resource = fresh("contended");
    let epoch = Instant::now();
    let deadline = epoch + secs;
    // When the last holder called release, in ns from `epoch` (0: taken).
    let released_at = Arc::new(AtomicU64::new(0));
    let ns = move || u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (lib, resource) = (lib.clone(), resource.clone());
            let released_at = Arc::clone(&released_at);
            tokio::spawn(async move {
                let (mut count, mut give_ups, mut hold_time) = (0u64, 0u64, Duration::ZERO);
                let mut gaps = Vec::new();
                while Instant::now() < deadline {
                    let Some(held) = lock(&lib, &resource).await else {
                        give_ups += 1;
                        continue;
                    };
                    let last = released_at.swap(0, Ordering::Relaxed);
                    if last != 0 {
                        gaps.push(ns().saturating_sub(last));
                    }
                    let late = Instant::now() >= deadline;
                    if !late {
                        count += 1;
                        hold_time += hold().await;
                    }
                    released_at.store(ns(), Ordering::Relaxed);
                    release(&lib, held).await;
                }
                (count, give_ups, hold_time, gaps)
            })
        })
        .collect();
    let (mut counts, mut give_ups, mut held) = (Vec::new(), 0, Duration::ZERO);
    let mut gaps = Vec::new();
    for w in workers {
        let (count, gave_up, hold, mut worker_gaps) = w.await.expect("worker");
        counts.push(count);
        give_ups += gave_up;
        held += hold;
        gaps.append(&mut worker_gaps);
    }
    gaps.sort_unstable();
    let handoff_us = gaps.get(gaps.len() / 2).map_or(0.0, |&g| g as f64 / 1e3);
    let total: u64 = counts.iter().sum();
    let min = counts.iter().copied().min().unwrap_or(0);
    let max = counts.iter().copied().max().unwrap_or(0);
    Contended {
        per_sec: total as f64 / secs.as_secs_f64(),
        fairness: min as f64 / max.max(1) as f64,
        give_ups,
        hold_us: held.as_secs_f64() * 1e6 / total.max(1) as f64,
        handoff_us,
    }
}
