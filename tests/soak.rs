#![cfg(feature = "testkit")]
//! Soak: the full nemesis against a contended workload. Runs for
//! `REDQUORUM_SOAK_SECS` seconds (default 5), then asserts no overlap and no
//! lost update. Replay a failure with `REDQUORUM_SEED=<seed>`.
//!
//! `REDQUORUM_SOAK_SECS=600 cargo test --release --all-features --test soak -- --nocapture`

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::workload::{Params, Run};
use redquorum::testkit::{Nemesis, ProxyMode};
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soak_under_the_full_nemesis_keeps_mutual_exclusion_and_loses_no_update() {
    let secs: u64 = std::env::var("REDQUORUM_SOAK_SECS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(5);
    let cluster = Arc::new(common::cluster(5));
    let ttl = Duration::from_millis(300);
    let seed = Nemesis::seed_from_env();
    eprintln!("soak: {secs} s, seed {seed} (replay with REDQUORUM_SEED={seed})");
    let params = Params::new(ttl);
    let run = Run::new();
    let until = Instant::now() + Duration::from_secs(secs);
    let nemesis = Nemesis::new(Arc::clone(&cluster), seed, ttl);
    let urls = cluster.urls();
    let (report, ()) = tokio::join!(
        nemesis.run(Duration::from_secs(secs)),
        run.drive(&urls, &params, until)
    );
    let report = match report {
        Ok(r) => r,
        Err(e) => panic!("seed {seed}: nemesis failed: {e}"),
    };
    for i in 0..cluster.len() {
        cluster.set_proxy(i, ProxyMode::Pass);
    }
    eprintln!("{}", report.log.join("\n"));
    eprintln!("seed {seed}: {}", run.summary("soak", report.faults()));
    assert!(run.acquisitions() > 0, "seed {seed}: nothing was acquired");
    assert_eq!(run.failures("hang"), 0, "seed {seed}: a lock() call hung");
    assert_eq!(run.empty_validity(), 0, "seed {seed}: Ok with no validity");
    assert_eq!(
        run.history.overlaps(),
        vec![],
        "seed {seed}: two holders overlapped"
    );
    assert_eq!(run.counter.lost_updates(), 0, "seed {seed}: lost updates");
}
