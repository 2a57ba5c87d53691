//! `Redlock::shutdown`: a program that drops a guard or cancels a `lock()`
//! just before its runtime ends leaves no key behind once it awaited
//! `shutdown()`. Needs local nodes (fault proxies).
#![cfg(feature = "testkit")]

mod common;

use std::time::Duration;

use common::*;
use redquorum::testkit::{LocalCluster, ProxyMode};
use redquorum::{Config, Redlock};

/// How many nodes hold `resource`'s key right now (direct reads).
fn holders(cluster: &LocalCluster, resource: &str) -> usize {
    holders_any(&cluster.direct_urls(), &key(resource))
}

/// Runs `body` on a runtime of its own that ends right after it, as the
/// end of `#[tokio::main]` or a sync wrapper's `block_on` does.
fn on_a_runtime_that_then_ends<F: Future<Output = ()>>(body: F) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(body);
}

/// Locks `resource`, drops the guard, and (with `shutdown`) awaits
/// `shutdown()`, all on a runtime that ends right after.
fn drop_a_guard_as_the_runtime_ends(redlock: &Redlock, resource: &str, shutdown: bool) {
    on_a_runtime_that_then_ends(async {
        let guard = redlock
            .lock(resource, Duration::from_secs(60))
            .await
            .unwrap();
        drop(guard);
        if shutdown {
            redlock.shutdown().await;
        }
    });
}

fn slow_cluster() -> (LocalCluster, Redlock) {
    let cluster = cluster(5);
    let redlock = redlock(&cluster.urls(), fast_config());
    (cluster, redlock)
}

#[test]
fn a_guard_dropped_just_before_the_runtime_ends_leaves_no_key_once_shutdown_returns() {
    let (cluster, redlock) = slow_cluster();
    let resource = unique("drop-then-exit");
    drop_a_guard_as_the_runtime_ends(&redlock, &resource, true);
    assert_eq!(holders(&cluster, &resource), 0);
}

#[test]
fn without_shutdown_a_guard_dropped_as_the_runtime_ends_leaves_its_keys() {
    // Control: the case shutdown() exists for is real, and the check above
    // can see keys that were left.
    let (cluster, redlock) = slow_cluster();
    for i in 0..5 {
        cluster.set_proxy(i, ProxyMode::Delay(Duration::from_millis(20)));
    }
    let resource = unique("drop-no-shutdown");
    drop_a_guard_as_the_runtime_ends(&redlock, &resource, false);
    assert!(holders(&cluster, &resource) >= 3);
}

#[test]
fn a_lock_cancelled_just_before_the_runtime_ends_leaves_no_key_once_shutdown_returns() {
    let (cluster, redlock) = slow_cluster();
    // Every SET lands about 50 ms after it is sent; the call is cancelled
    // while they are on their way.
    for i in 0..5 {
        cluster.set_proxy(i, ProxyMode::Delay(Duration::from_millis(50)));
    }
    let resource = unique("cancel-then-exit");
    on_a_runtime_that_then_ends(async {
        let attempt = redlock.lock(&resource, Duration::from_secs(60));
        let cancelled = tokio::time::timeout(Duration::from_millis(30), attempt).await;
        assert!(cancelled.is_err(), "the lock was not cancelled in flight");
        redlock.shutdown().await;
    });
    for i in 0..5 {
        cluster.set_proxy(i, ProxyMode::Pass);
    }
    assert_eq!(holders(&cluster, &resource), 0);
}

#[test]
fn shutdown_waits_for_a_hung_node_at_most_about_its_timeout_and_the_redlock_stays_usable() {
    let cluster = cluster(5);
    let timeout = Duration::from_millis(200);
    let redlock =
        Redlock::with_config(cluster.urls(), Config::default().with_node_timeout(timeout)).unwrap();
    let resource = unique("hung-shutdown");
    on_a_runtime_that_then_ends(async {
        let guard = redlock
            .lock(&resource, Duration::from_secs(60))
            .await
            .unwrap();
        cluster.set_proxy(4, ProxyMode::Blackhole);
        drop(guard);
        let started = tokio::time::Instant::now();
        redlock.shutdown().await;
        // Bounded by the node timeout (twice it when chained): this only
        // catches a shutdown that waits for the hung node for good.
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        let again = redlock
            .try_lock(&resource, Duration::from_secs(5))
            .await
            .unwrap();
        again.release().await.unwrap();
        redlock.shutdown().await;
    });
    assert_eq!(holders_any(&cluster.direct_urls()[..4], &key(&resource)), 0);
}

/// The README's Usage shape: the work in a function of its own whose `?`
/// may return early with the guard still held, `shutdown()` after it in
/// the caller, on every path.
async fn work_that_returns_early(redlock: &Redlock, resource: &str) -> Result<(), String> {
    let guard = redlock
        .lock(resource, Duration::from_secs(60))
        .await
        .map_err(|e| e.to_string())?;
    let failing_step: Result<(), String> = Err("the job's own step failed".into());
    failing_step?;
    guard.release().await.map_err(|e| e.to_string())
}

#[test]
fn an_early_return_in_the_readme_shape_leaves_no_key_once_the_runtime_ends() {
    let (cluster, redlock) = slow_cluster();
    let resource = unique("readme-early-return");
    on_a_runtime_that_then_ends(async {
        let done = work_that_returns_early(&redlock, &resource).await;
        redlock.shutdown().await;
        assert_eq!(done, Err("the job's own step failed".to_owned()));
    });
    assert_eq!(holders(&cluster, &resource), 0);
}
