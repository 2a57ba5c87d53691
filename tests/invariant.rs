//! The central invariant, checked from outside by `testkit::Oracle`: a live
//! guard never claims more validity than a quorum of nodes holds its keys
//! for, whatever mix of extension rounds (manual and watchdog) it runs.
//! Needs local nodes (fault proxies).
#![cfg(feature = "testkit")]

mod common;

use std::time::Duration;

use common::*;
use rand::RngExt;
use redquorum::Redlock;
use redquorum::testkit::Oracle;
use tokio::time::{Instant, sleep};

/// How long the race runs.
const RACE: Duration = Duration::from_secs(6);

/// The TTL the watchdog extends to.
const WATCHDOG_TTL: Duration = Duration::from_millis(300);

/// Extends `resource`'s lock by hand with random TTLs while its watchdog
/// extends it too, checking the oracle after every manual extension.
/// Returns the number of checks and the violations seen.
async fn race(redlock: Redlock, oracle: Oracle, resource: String) -> (u32, Vec<String>) {
    let mut guard = redlock.lock(&resource, WATCHDOG_TTL).await.unwrap();
    guard.auto_extend();
    let (mut checks, mut violations) = (0u32, Vec::new());
    let end = Instant::now() + RACE;
    while Instant::now() < end {
        let (ttl, pause) = {
            let mut rng = rand::rng();
            (rng.random_range(300..5_000), rng.random_range(0..3))
        };
        let _ = guard.extend(Duration::from_millis(ttl)).await;
        if let Err(violation) = oracle.check(&redlock, &guard).await {
            violations.push(violation.to_string());
        }
        checks += 1;
        sleep(Duration::from_millis(pause)).await;
    }
    guard.release().await.unwrap();
    (checks, violations)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_extensions_racing_the_watchdog_never_let_the_guard_outlive_the_keys() {
    let cluster = cluster(5);
    // The watchdog extends almost continuously, so that nearly every
    // manual extension meets one of its rounds.
    let redlock = redlock(&cluster.urls(), fast_config().with_extend_at(0.99));
    let oracle = Oracle::new(cluster.direct_urls(), redlock.quorum());
    let races: Vec<_> = (0..4)
        .map(|i| {
            let resource = unique(&format!("race{i}"));
            tokio::spawn(race(redlock.clone(), oracle.clone(), resource))
        })
        .collect();
    let (mut checks, mut violations) = (0, Vec::new());
    for race in races {
        let (c, v) = race.await.unwrap();
        checks += c;
        violations.extend(v);
    }
    println!(
        "[extend race] checks={checks} violations={}",
        violations.len()
    );
    for v in violations.iter().take(3) {
        println!("  {v}");
    }
    assert!(checks > 100, "too few rounds to mean anything: {checks}");
    assert!(violations.is_empty(), "{} violations", violations.len());
}

#[tokio::test]
async fn the_oracle_sees_a_guard_whose_keys_expired_early() {
    // Negative control: force the keys to expire on a quorum and check
    // that the oracle reports the guard that still claims validity.
    let cluster = cluster(5);
    let redlock = redlock(&cluster.urls(), fast_config());
    let oracle = Oracle::new(cluster.direct_urls(), redlock.quorum());
    let resource = unique("early");
    let guard = redlock
        .lock(&resource, Duration::from_secs(30))
        .await
        .unwrap();
    oracle.check(&redlock, &guard).await.unwrap();
    for i in 0..3 {
        cluster.expire_now(i, &redlock.lock_key(&resource)).unwrap();
    }
    let violation = oracle.check(&redlock, &guard).await.unwrap_err();
    println!("[negative: oracle] {violation}");
    assert_eq!(violation.quorum_life, Duration::ZERO);
    assert!(violation.remaining > Duration::from_secs(20));
    drop(guard);
}
