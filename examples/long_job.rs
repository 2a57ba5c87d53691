//! A job that holds a lock for many TTLs with `with_lock`, then the same job
//! losing its lock when three of five nodes die: the job is cancelled at
//! once and `Error::Lost` says so.
//!
//! ```text
//! cargo run --example long_job --features testkit
//! RUST_LOG=redquorum=info cargo run --example long_job --features testkit   # lifecycle events
//! ```

use std::time::Duration;

use redquorum::testkit::LocalCluster;
use redquorum::{Config, Error, Redlock};
use tokio::time::{Instant, sleep};

const TTL: Duration = Duration::from_millis(500);
const STEP: Duration = Duration::from_millis(100);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "redquorum=warn".into()),
        )
        .init();
    let cluster = LocalCluster::start(5)?;
    let redlock = Redlock::with_config(
        cluster.urls(),
        Config::default().with_node_timeout(Duration::from_millis(100)),
    )?;

    println!(
        "1. a job of 30 steps ({:?}) under a {TTL:?} lock",
        STEP * 30
    );
    let start = Instant::now();
    let steps = redlock
        .with_lock("reports:monthly", TTL, async |guard| {
            for step in 1..=30 {
                sleep(STEP).await; // one unit of work
                if step % 10 == 0 {
                    println!(
                        "   step {step:2}: {:?} elapsed, lock valid for {:?} more",
                        start.elapsed(),
                        guard.remaining()
                    );
                }
            }
            30
        })
        .await?;
    println!(
        "   done: {steps} steps in {:?} (about {} TTLs), lock kept throughout\n",
        start.elapsed(),
        start.elapsed().as_millis() / TTL.as_millis()
    );

    println!("2. the same job; three of five nodes die at step 10");
    let start = Instant::now();
    let mut last_step = 0;
    let outcome = redlock
        .with_lock("reports:monthly", TTL, async |guard| {
            for step in 1..=30 {
                sleep(STEP).await;
                last_step = step;
                if step == 10 {
                    for node in 0..3 {
                        cluster.kill(node).ok();
                    }
                    println!(
                        "   step 10: killed nodes 0, 1, 2; lock valid for {:?} more",
                        guard.remaining()
                    );
                }
            }
        })
        .await;
    match outcome {
        Err(Error::Lost) => println!(
            "   Error::Lost after {:?}: the job was cancelled after step {last_step}, \
             before any step ran without the lock",
            start.elapsed()
        ),
        other => println!("   unexpected outcome: {other:?}"),
    }
    redlock.shutdown().await;
    Ok(())
}
