//! A failed attempt answers at its decision: the clean-up of what it set
//! goes on in the background, `shutdown()` waits for it, and a hung node
//! that answers later is cleaned all the same. Needs local nodes (pause).
#![cfg(feature = "testkit")]

mod common;

use std::time::Duration;

use common::*;
use redquorum::Config;
use redquorum::testkit::LocalCluster;
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(30);
/// The node timeout: large, so that a wait for a hung node cannot hide in
/// the noise of a loaded machine.
const TIMEOUT: Duration = Duration::from_secs(1);

/// Five warmed-up nodes; `held` of them hold `resource` for another owner,
/// and node 4 is then stopped (SIGSTOP): it reads nothing, answers
/// nothing, and runs what it was sent once resumed.
async fn hung_node_four(resource: &str, held: &[usize]) -> (LocalCluster, redquorum::Redlock) {
    let cluster = cluster(5);
    let config = Config::default()
        .with_node_timeout(TIMEOUT)
        .with_retry_count(0);
    let redlock = redlock(&cluster.urls(), config);
    warm_up(&redlock).await;
    for &i in held {
        set(&cluster.direct_url(i), &key(resource), "another-owner", TTL);
    }
    cluster.pause(4).unwrap();
    (cluster, redlock)
}

/// Resumes node 4, waits for the background clean-up, and checks that no
/// node holds `resource` but for the other owner on `held`.
async fn resume_and_check(
    cluster: &LocalCluster,
    redlock: &redquorum::Redlock,
    resource: &str,
    held: &[usize],
) {
    cluster.resume(4).unwrap();
    redlock.shutdown().await;
    let direct = cluster.direct_urls();
    let settled = eventually(Duration::from_secs(5), || {
        (0..5).all(|i| {
            let expect = held.contains(&i).then_some("another-owner");
            get(&direct[i], &key(resource)).as_deref() == expect
        })
    })
    .await;
    let left: Vec<_> = (0..5).map(|i| get(&direct[i], &key(resource))).collect();
    assert!(settled, "after shutdown(), by node: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attempt_decided_at_the_timeout_answers_then_not_after_its_clean_up() {
    let resource = unique("decided-at-timeout");
    // Two refusals, two grants, node 4 hung: decided at the node timeout,
    // when node 4 counts as timed out.
    let held = [0, 1];
    let (cluster, redlock) = hung_node_four(&resource, &held).await;
    let started = Instant::now();
    let result = redlock.try_lock(&resource, TTL).await;
    let took = started.elapsed();
    assert!(result.is_err(), "acquired a held lock");
    // The clean-up's delete to node 4 waits another node timeout: the
    // answer must not.
    assert!(
        took < TIMEOUT + TIMEOUT / 2,
        "answered after {took:?}, node timeout {TIMEOUT:?}"
    );
    // Once node 4 runs again it applies the SET, then the delete that
    // was sent behind it.
    resume_and_check(&cluster, &redlock, &resource, &held).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attempt_lost_at_once_answers_at_once_with_a_node_hung() {
    let resource = unique("lost-at-once");
    // Three refusals: lost at once; node 3 granted, node 4 hung.
    let held = [0, 1, 2];
    let (cluster, redlock) = hung_node_four(&resource, &held).await;
    let started = Instant::now();
    let result = redlock.try_lock(&resource, TTL).await;
    let took = started.elapsed();
    assert!(result.is_err(), "acquired a held lock");
    assert!(
        took < TIMEOUT / 2,
        "answered after {took:?}, node timeout {TIMEOUT:?}"
    );
    resume_and_check(&cluster, &redlock, &resource, &held).await;
}
