//! Auto-extension: `with_lock` keeps a lock for many TTLs, cancels the job
//! when the lock is lost, stops with the guard, obeys the extension limits
//! and (when asked) re-seeds restarted nodes. Needs local nodes (faults).
#![cfg(feature = "testkit")]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use redquorum::testkit::{LocalCluster, Oracle, ProxyMode};
use redquorum::{Error, LockGuard, Redlock};
use tokio::time::{Instant, sleep, timeout};

/// Generous bound that only catches hangs.
const HANG: Duration = Duration::from_secs(20);

/// The TTL of most tests: long enough that a loaded machine still extends
/// in time, short enough to hold it for several TTLs in a few seconds.
const TTL: Duration = Duration::from_secs(1);

/// Share of the TTL left when the watchdog extends, in these tests: half
/// the TTL to retry in.
const EXTEND_AT: f64 = 0.5;

/// The time between two extensions.
fn extension_period(ttl: Duration) -> Duration {
    ttl.mul_f64(1.0 - EXTEND_AT)
}

/// The config of these tests.
fn config() -> redquorum::Config {
    fast_config().with_extend_at(EXTEND_AT)
}

/// Forwarded bytes per node (requests that reached each redis-server).
fn forwarded(cluster: &LocalCluster) -> Vec<u64> {
    (0..cluster.len())
        .map(|i| cluster.proxy_forwarded_bytes(i))
        .collect()
}

/// Runs a job that never ends on its own inside `with_lock`, applies
/// `fault` once the job has run for `ttl` (so the watchdog has extended at
/// least once), and returns the result, the final deadline the job saw,
/// and when `with_lock` returned.
async fn endless_job_with_fault(
    redlock: &Redlock,
    resource: &str,
    ttl: Duration,
    fault: impl FnOnce(),
) -> (redquorum::Result<()>, Instant, Instant, bool) {
    let deadline = Arc::new(Mutex::new(Instant::now()));
    let finished = Arc::new(AtomicBool::new(false));
    let seen = Arc::clone(&deadline);
    let done = Arc::clone(&finished);
    let job = redlock.with_lock(resource, ttl, async move |guard: &LockGuard| {
        let fault_at = Instant::now() + ttl;
        let mut fault = Some(fault);
        while Instant::now() < fault_at + HANG {
            *seen.lock().unwrap() = guard.valid_until();
            if Instant::now() >= fault_at
                && let Some(fault) = fault.take()
            {
                fault();
            }
            sleep(Duration::from_millis(5)).await;
        }
        done.store(true, Ordering::SeqCst);
    });
    let result = timeout(HANG * 2, job).await.expect("with_lock hung");
    let returned_at = Instant::now();
    let deadline = *deadline.lock().unwrap();
    (
        result,
        deadline,
        returned_at,
        finished.load(Ordering::SeqCst),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_running_five_ttls_inside_with_lock_keeps_the_lock_and_every_competitor_fails() {
    let cluster = cluster(5);
    let direct = cluster.direct_urls();
    let redlock = redlock(&cluster.urls(), config());
    let competitor = common::redlock(&cluster.urls(), config());
    let resource = unique("long-job");
    let ttl = TTL;
    let tries = redlock
        .with_lock(&resource, ttl, async |guard| {
            let start = Instant::now();
            let mut tries = 0u32;
            while start.elapsed() < ttl * 5 {
                let stolen = competitor.try_lock(&resource, ttl).await;
                assert!(
                    matches!(stolen, Err(Error::NotAcquired(ref a)) if a.reason() == redquorum::Reason::Contended),
                    "competitor after {:?}: {stolen:?}",
                    start.elapsed()
                );
                assert!(!guard.remaining().is_zero(), "lost after {:?}", start.elapsed());
                assert!(holders(&direct, &key(&resource), guard.value()) >= 3);
                tries += 1;
                sleep(Duration::from_millis(40)).await;
            }
            tries
        })
        .await
        .unwrap();
    assert!(tries >= 10, "only {tries} competing attempts");
    // Released at the end.
    assert!(
        eventually(Duration::from_secs(5), || holders_any(
            &direct,
            &key(&resource)
        ) == 0)
        .await
    );
}

/// How many of `urls` hold `key` at all.
/// The job was cancelled with `Error::Lost`, no earlier than the deadline
/// and no later than one extension period after it.
fn assert_cancelled_with_lost_in_time(
    result: &redquorum::Result<()>,
    deadline: Instant,
    returned_at: Instant,
    finished: bool,
    ttl: Duration,
) {
    assert!(matches!(result, Err(Error::Lost)), "{result:?}");
    assert!(!finished, "the job must be cancelled, not finish");
    assert!(returned_at >= deadline, "lost before the deadline");
    eprintln!(
        "Error::Lost returned {:?} after the deadline",
        returned_at - deadline
    );
    assert!(
        returned_at <= deadline + extension_period(ttl),
        "lost {:?} after the deadline",
        returned_at - deadline
    );
}

/// Once the lost lock's TTL has run out, another client takes it.
async fn competitor_gets_the_lock_after_the_ttl(
    cluster: &LocalCluster,
    resource: &str,
    deadline: Instant,
    ttl: Duration,
) {
    tokio::time::sleep_until(deadline + ttl).await;
    let competitor = common::redlock(&cluster.urls(), config());
    let guard = competitor.lock(resource, ttl).await.unwrap();
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_three_of_five_nodes_cancels_the_job_with_lost_and_a_competitor_gets_the_lock_later()
 {
    let cluster = cluster(5);
    let redlock = redlock(&cluster.urls(), config());
    let resource = unique("kill-majority");
    let ttl = TTL;
    let (result, deadline, returned_at, finished) =
        endless_job_with_fault(&redlock, &resource, ttl, || {
            for i in 0..3 {
                cluster.kill(i).unwrap();
            }
        })
        .await;
    assert_cancelled_with_lost_in_time(&result, deadline, returned_at, finished, ttl);
    for i in 0..3 {
        tokio::task::block_in_place(|| cluster.restart(i)).unwrap();
    }
    competitor_gets_the_lock_after_the_ttl(&cluster, &resource, deadline, ttl).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackholing_a_majority_cancels_the_job_with_lost_and_a_competitor_gets_the_lock_after_the_ttl()
 {
    let cluster = cluster(5);
    let redlock = redlock(&cluster.urls(), config());
    let resource = unique("blackhole-majority");
    let ttl = TTL;
    let (result, deadline, returned_at, finished) =
        endless_job_with_fault(&redlock, &resource, ttl, || {
            for i in 0..3 {
                cluster.set_proxy(i, ProxyMode::Blackhole);
            }
        })
        .await;
    assert_cancelled_with_lost_in_time(&result, deadline, returned_at, finished, ttl);
    for i in 0..3 {
        cluster.set_proxy(i, ProxyMode::Pass);
    }
    competitor_gets_the_lock_after_the_ttl(&cluster, &resource, deadline, ttl).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_paused_node_during_the_job_does_not_cost_the_lock() {
    let cluster = cluster(5);
    let redlock = redlock(&cluster.urls(), config());
    let resource = unique("pause-one");
    let ttl = TTL;
    let result = redlock
        .with_lock(&resource, ttl, async |guard| {
            cluster.pause(0).unwrap();
            sleep(ttl * 3).await;
            cluster.resume(0).unwrap();
            guard.remaining().is_zero()
        })
        .await;
    assert!(matches!(result, Ok(false)), "{result:?}");
}

/// Waits until no node holds `resource` any more, then checks that no byte
/// reaches any node for two TTLs: nothing is extending the lock.
async fn assert_nodes_stay_silent_once_released(
    cluster: &LocalCluster,
    direct: &[String],
    resource: &str,
    ttl: Duration,
) {
    // Every delete has landed (late ones included) before counting.
    let released = eventually(Duration::from_secs(5), || {
        holders_any(direct, &key(resource)) == 0
    })
    .await;
    assert!(released, "the lock was never released");
    sleep(Duration::from_millis(100)).await;
    let settled = forwarded(cluster);
    sleep(ttl * 2).await;
    assert_eq!(forwarded(cluster), settled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_the_guard_stops_the_watchdog_so_nothing_reaches_any_node_afterwards() {
    let cluster = cluster(5);
    let redlock = redlock(&cluster.urls(), config());
    let ttl = TTL;
    let resource = unique("release-stops");
    let direct = cluster.direct_urls();
    let mut guard = redlock.lock(&resource, ttl).await.unwrap();
    guard.auto_extend();
    let before = forwarded(&cluster);
    sleep(ttl * 3 / 2).await;
    // Positive control: the watchdog did talk to every node meanwhile.
    let during = forwarded(&cluster);
    assert!(!guard.remaining().is_zero());
    assert!(
        before.iter().zip(&during).all(|(b, d)| d > b),
        "{before:?} {during:?}"
    );
    guard.release().await.unwrap();
    assert_nodes_stay_silent_once_released(&cluster, &direct, &resource, ttl).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_guard_stops_the_watchdog_so_nothing_reaches_any_node_afterwards() {
    let cluster = cluster(5);
    let direct = cluster.direct_urls();
    let redlock = redlock(&cluster.urls(), config());
    let ttl = TTL;
    let resource = unique("drop-stops");
    let mut guard = redlock.lock(&resource, ttl).await.unwrap();
    guard.auto_extend();
    sleep(ttl * 3 / 2).await;
    assert!(
        !guard.remaining().is_zero(),
        "the watchdog must have kept the lock past its TTL"
    );
    drop(guard);
    assert_nodes_stay_silent_once_released(&cluster, &direct, &resource, ttl).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_max_two_extensions_the_lock_is_lost_after_about_three_ttls_and_lost_resolves() {
    let cluster = cluster(5);
    let direct = cluster.direct_urls();
    let redlock = redlock(&cluster.urls(), config().with_max_extensions(2));
    let ttl = TTL;
    let resource = unique("max-extensions");
    let start = Instant::now();
    let mut guard = redlock.lock(&resource, ttl).await.unwrap();
    guard.auto_extend();
    timeout(ttl * 10, guard.lost())
        .await
        .expect("lost() never resolved");
    let held_for = start.elapsed();
    assert!(guard.remaining().is_zero());
    // Lost at about TTL + 2 extension periods; one extension only would
    // have lost it at TTL + 1 period.
    assert!(
        held_for >= ttl + extension_period(ttl) * 3 / 2,
        "lost after only {held_for:?}"
    );
    assert!(
        eventually(Duration::from_secs(5), || holders_any(
            &direct,
            &key(&resource)
        ) == 0)
        .await
    );
    assert!(matches!(guard.release().await, Err(Error::Expired)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_max_hold_time_with_lock_returns_lost_once_it_is_used_up() {
    let cluster = cluster(5);
    let redlock = redlock(
        &cluster.urls(),
        config().with_max_hold(Duration::from_millis(2500)),
    );
    let ttl = TTL;
    let start = Instant::now();
    let result = redlock
        .with_lock(&unique("max-hold"), ttl, async |_| sleep(HANG).await)
        .await;
    assert!(matches!(result, Err(Error::Lost)), "{result:?}");
    // Extended twice at least (else lost by TTL + one period), never
    // carried past the limit (else never lost).
    assert!(
        start.elapsed() >= ttl + extension_period(ttl) * 3 / 2,
        "lost after {:?}",
        start.elapsed()
    );
    assert!(start.elapsed() < HANG);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_reseeding_on_a_node_restarted_empty_gets_the_key_back_at_the_next_extension() {
    let cluster = cluster(5);
    let redlock = redlock(&cluster.urls(), config().with_reseed_restarted_nodes(true));
    let ttl = TTL;
    let resource = unique("reseed-on");
    let mut guard = redlock.lock(&resource, ttl).await.unwrap();
    guard.auto_extend();
    // Node 0 comes back empty; node 1 comes back empty too, and someone
    // else takes the key there: that one must never be overwritten.
    tokio::task::block_in_place(|| cluster.restart(0)).unwrap();
    tokio::task::block_in_place(|| cluster.restart(1)).unwrap();
    set(
        &cluster.direct_url(1),
        &key(&resource),
        "someone-else",
        Duration::from_secs(30),
    );
    assert_eq!(get(&cluster.direct_url(0), &key(&resource)), None);
    let back = eventually(Duration::from_secs(5), || {
        get(&cluster.direct_url(0), &key(&resource)).as_deref() == Some(guard.value())
    })
    .await;
    assert!(back, "the key did not come back on the restarted node");
    assert!(!guard.remaining().is_zero());
    let oracle = Oracle::new(cluster.direct_urls(), redlock.quorum());
    oracle.check(&redlock, &guard).await.unwrap();
    sleep(extension_period(ttl)).await; // one more extension
    oracle.check(&redlock, &guard).await.unwrap();
    assert_eq!(
        get(&cluster.direct_url(1), &key(&resource)).as_deref(),
        Some("someone-else")
    );
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_reseeding_a_node_restarted_empty_stays_without_the_key() {
    let cluster = cluster(5);
    let direct = cluster.direct_urls();
    let redlock = redlock(&cluster.urls(), config());
    let ttl = TTL;
    let resource = unique("reseed-off");
    let mut guard = redlock.lock(&resource, ttl).await.unwrap();
    guard.auto_extend();
    tokio::task::block_in_place(|| cluster.restart(0)).unwrap();
    sleep(ttl * 2).await; // two extensions or more
    assert!(!guard.remaining().is_zero());
    assert_eq!(get(&direct[0], &key(&resource)), None);
    // Still held on a quorum of the other nodes.
    assert!(holders(&direct[1..], &key(&resource), guard.value()) >= 3);
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_reports_a_held_lock_as_not_acquired_and_never_runs_the_job() {
    let nodes = nodes();
    let redlock = redlock(&nodes.urls(), config().with_retries(1));
    let resource = unique("held");
    let holder = redlock
        .try_lock(&resource, Duration::from_secs(5))
        .await
        .unwrap();
    let ran = AtomicBool::new(false);
    let result = redlock
        .with_lock(&resource, Duration::from_secs(5), async |_| {
            ran.store(true, Ordering::SeqCst)
        })
        .await;
    assert!(
        matches!(result, Err(Error::NotAcquired(ref a)) if a.reason() == redquorum::Reason::Contended),
        "{result:?}"
    );
    assert!(!ran.load(Ordering::SeqCst));
    holder.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_job_releases_the_lock_and_the_panic_goes_on() {
    let nodes = nodes();
    let direct = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), config());
    let resource = unique("panic");
    let task = {
        let (redlock, resource) = (redlock.clone(), resource.clone());
        tokio::spawn(async move {
            redlock
                .with_lock(&resource, Duration::from_secs(10), async |_| {
                    sleep(Duration::from_millis(20)).await;
                    panic!("job failed");
                })
                .await
        })
    };
    let joined = task.await;
    assert!(joined.is_err_and(|e| e.is_panic()));
    assert!(
        eventually(Duration::from_secs(5), || holders_any(
            &direct,
            &key(&resource)
        ) == 0)
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_with_lock_releases_the_lock_and_stops_extending() {
    let nodes = nodes();
    let direct = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), config());
    let resource = unique("cancelled");
    let job = redlock.with_lock(&resource, Duration::from_secs(10), async |_| {
        sleep(HANG).await
    });
    assert!(timeout(Duration::from_millis(200), job).await.is_err());
    assert!(
        eventually(Duration::from_secs(5), || holders_any(
            &direct,
            &key(&resource)
        ) == 0)
        .await
    );
    // Free again at once, well before the 10 s TTL.
    let guard = redlock
        .try_lock(&resource, Duration::from_secs(1))
        .await
        .unwrap();
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_returns_the_value_of_a_short_job_and_works_from_a_spawned_task() {
    let nodes = nodes();
    let redlock = redlock(&nodes.urls(), config());
    let resource = unique("value");
    let value = tokio::spawn(async move {
        redlock
            .with_lock(&resource, Duration::from_secs(5), async |guard| {
                guard.resource().len()
            })
            .await
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(value, "value-".len() + 16);
}
