//! Resident memory over many acquire + release cycles: it must stay flat.
//!
//! Runs `CYCLES` (default 200,000) `try_lock` + `release` pairs on five local
//! nodes (or `REDQUORUM_NODES`), 8 tasks on distinct resources, and prints the
//! resident set size read from `/proc/self/statm` after a warm-up and at the
//! end.
//!
//! ```text
//! cargo run --release --features testkit --example memory
//! CYCLES=50000 cargo run --release --features testkit --example memory
//! ```

mod support;

use std::time::Duration;

use redquorum::Redlock;
use redquorum::testkit::Nodes;

const TASKS: u64 = 8;
const WARM_UP: u64 = 2_000;

async fn cycles(redlock: Redlock, task: u64, count: u64) -> Result<(), redquorum::Error> {
    let resource = format!("memory:{}:{task}", std::process::id());
    for _ in 0..count {
        let guard = redlock.try_lock(&resource, Duration::from_secs(10)).await?;
        guard.release().await?;
    }
    Ok(())
}

async fn run(redlock: &Redlock, total: u64) -> Result<(), Box<dyn std::error::Error>> {
    let per_task = total / TASKS;
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| tokio::spawn(cycles(redlock.clone(), task, per_task)))
        .collect();
    for task in tasks {
        task.await??;
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let total: u64 = std::env::var("CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    // Local nodes are used straight, without the fault proxies.
    let nodes = Nodes::from_env(5)?;
    let urls = nodes.direct_urls();
    let redlock = Redlock::new(urls.iter().map(String::as_str))?;

    run(&redlock, WARM_UP).await?;
    let start_rss = support::rss_bytes();
    let started = std::time::Instant::now();
    run(&redlock, total).await?;
    let elapsed = started.elapsed();
    let end_rss = support::rss_bytes();
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!("cycles: {total} in {elapsed:.1?} ({TASKS} tasks)");
    println!("rss start: {:.2} MiB", mib(start_rss));
    println!("rss end:   {:.2} MiB", mib(end_rss));
    println!("rss growth: {:+.2} MiB", mib(end_rss) - mib(start_rss));
    redlock.shutdown().await;
    Ok(())
}
