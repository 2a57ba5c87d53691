//! Contended hand-off: 16 workers take turns on one resource, each holding
//! it for 1 ms. Prints the hand-off gap (release called -> next holder
//! acquired: median, p90, max), the hold as measured, and fairness
//! (acquisitions per worker, min / max).
//!
//! ```text
//! cargo run --release --features testkit --example handoff
//! SECS=10 RETRY_MS=5 JITTER_MS=3 cargo run --release --features testkit --example handoff
//! NOTIFY=0 RETRY_MS=200 JITTER_MS=100 cargo run --release --features testkit --example handoff
//! ```
//!
//! `NOTIFY=0` turns release notifications off (waiters only sleep their
//! retry delay).
//!
//! The hold is 1 ms of blocking work (`std::thread::sleep` on the blocking
//! pool, `HOLD_US` to change it), so that it lasts what it says: a tokio
//! sleep of 1 ms lasts about 2 ms, its timer having millisecond ticks.
//! `HOLD=tokio` holds with `tokio::time::sleep` instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redquorum::testkit::Nodes;
use redquorum::{Config, Redlock};
use tokio::time::Instant;

const WORKERS: usize = 16;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let secs = env_u64("SECS", 10);
    let retry = Duration::from_millis(env_u64("RETRY_MS", 5));
    let jitter = Duration::from_millis(env_u64("JITTER_MS", 3));
    let hold = Duration::from_micros(env_u64("HOLD_US", 1000));
    let tokio_hold = std::env::var("HOLD").is_ok_and(|h| h == "tokio");
    // Local nodes are used straight, without the fault proxies.
    let nodes = Nodes::from_env(5)?;
    let urls = nodes.direct_urls();
    let notify = env_u64("NOTIFY", 1) != 0;
    let config = Config::default()
        .with_retries(u32::MAX)
        .with_retry_delay(retry)
        .with_retry_jitter(jitter)
        .with_release_notifications(notify);
    let redlock = Redlock::with_config(urls.iter().map(String::as_str), config)?;
    let resource = format!("handoff:{}", std::process::id());
    // Connect first.
    redlock
        .try_lock(&resource, Duration::from_secs(5))
        .await?
        .release()
        .await?;

    let epoch = Instant::now();
    let ns = move || u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
    // When the last holder called release (0: nobody yet).
    let released_at = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let gaps = Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
    let held_ns = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        let (redlock, resource) = (redlock.clone(), resource.clone());
        let (released_at, stop, gaps, held_ns) = (
            Arc::clone(&released_at),
            Arc::clone(&stop),
            Arc::clone(&gaps),
            Arc::clone(&held_ns),
        );
        workers.push(tokio::spawn(async move {
            let mut count = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let guard = redlock.lock(&resource, Duration::from_secs(5)).await?;
                let now = ns();
                let last = released_at.swap(0, Ordering::Relaxed);
                if last != 0
                    && let Ok(mut gaps) = gaps.lock()
                {
                    gaps.push(now.saturating_sub(last));
                }
                count += 1;
                if tokio_hold {
                    tokio::time::sleep(hold).await;
                } else if tokio::task::spawn_blocking(move || std::thread::sleep(hold))
                    .await
                    .is_err()
                {
                    eprintln!("hold: the blocking task failed");
                }
                let released = ns();
                held_ns.fetch_add(released.saturating_sub(now), Ordering::Relaxed);
                released_at.store(released, Ordering::Relaxed);
                if let Err(e) = guard.release().await {
                    eprintln!("release: {e}");
                }
            }
            Ok::<u64, redquorum::Error>(count)
        }));
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut counts = Vec::new();
    for worker in workers {
        counts.push(worker.await??);
    }
    let mut gaps = gaps.lock().map(|g| g.clone()).unwrap_or_default();
    gaps.sort_unstable();
    let pct = |p: f64| {
        gaps.get(((gaps.len() as f64 - 1.0) * p) as usize)
            .map_or(0.0, |&g| g as f64 / 1e3)
    };
    let (min, max) = (
        counts.iter().copied().min().unwrap_or(0),
        counts.iter().copied().max().unwrap_or(0),
    );
    let total: u64 = counts.iter().sum();
    println!(
        "{WORKERS} workers, one resource, hold {hold:?} ({}), {secs} s, retry {retry:?} +- \
         {jitter:?}, release notifications {}",
        if tokio_hold {
            "tokio sleep"
        } else {
            "blocking"
        },
        notify
    );
    println!(
        "acquisitions: {total} ({:.0}/s), hold as measured: mean {:.0} us",
        total as f64 / secs as f64,
        held_ns.load(Ordering::Relaxed) as f64 / total.max(1) as f64 / 1e3
    );
    println!("hand-offs: {}", gaps.len());
    println!(
        "gap (release called -> next acquired): median {:.0} us, p90 {:.0} us, max {:.0} us",
        pct(0.5),
        pct(0.9),
        pct(1.0)
    );
    println!(
        "acquisitions per worker: min {min}, max {max}, min/max {:.2}",
        min as f64 / max.max(1) as f64
    );
    redlock.shutdown().await;
    Ok(())
}
