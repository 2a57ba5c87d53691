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
    let config = Config::default().with_node_timeout(TIMEOUT).with_retries(0);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_of_the_same_lock_is_not_refused_by_the_failed_attempts_own_keys() {
    // Every node's vote is needed; nodes 1 and 2 answer 40 ms after a
    // call, so the clean-up's delete there waits for the attempt's SET to
    // be answered before it is sent. The retry comes 15 ms after the
    // failure, before that, and must follow the delete, not overtake it.
    let cluster = cluster(3);
    let config = Config::default()
        .with_quorum(3)
        .with_retries(1)
        .with_retry_delay(Duration::from_millis(15))
        .with_retry_jitter(Duration::ZERO)
        .with_release_notifications(false)
        .with_node_timeout(TIMEOUT);
    let redlock = redlock(&cluster.urls(), config);
    warm_up(&redlock).await;
    let direct = cluster.direct_urls();
    for i in [1, 2] {
        cluster.set_proxy(
            i,
            redquorum::testkit::ProxyMode::Delay(Duration::from_millis(20)),
        );
    }
    for round in 0..3 {
        let resource = unique(&format!("again-{round}"));
        // Node 0 refuses the first attempt (lost at once, nodes 1 and 2
        // still granting) and is free again for the retry.
        set(
            &direct[0],
            &key(&resource),
            "another-owner",
            Duration::from_millis(10),
        );
        match redlock.lock(&resource, TTL).await {
            Ok(guard) => guard.release().await.unwrap(),
            Err(e) => {
                panic!("round {round}: the retry was refused by the failed attempt's own keys: {e}")
            }
        }
    }
    redlock.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_follows_a_clean_up_whose_node_had_forgotten_its_scripts() {
    // As above, with nodes whose script cache was just emptied (a restart,
    // SCRIPT FLUSH) and a lock of two resources, which is a script: the
    // attempt's call there is answered NOSCRIPT and sent again; the
    // clean-up's delete that follows must not need a second trip of its
    // own, which the retry, sent once the delete was handed over, would
    // overtake.
    let cluster = cluster(3);
    let config = Config::default()
        .with_quorum(3)
        .with_retries(1)
        .with_retry_delay(Duration::from_millis(15))
        .with_retry_jitter(Duration::ZERO)
        .with_release_notifications(false)
        .with_node_timeout(TIMEOUT);
    let redlock = redlock(&cluster.urls(), config);
    warm_up(&redlock).await;
    let direct = cluster.direct_urls();
    for i in [1, 2] {
        cluster.set_proxy(
            i,
            redquorum::testkit::ProxyMode::Delay(Duration::from_millis(20)),
        );
    }
    for round in 0..3 {
        for url in &direct {
            let _: () = query(url, redis::cmd("SCRIPT").arg("FLUSH")).unwrap();
        }
        let (a, b) = (
            unique(&format!("forgot-a-{round}")),
            unique(&format!("forgot-b-{round}")),
        );
        set(
            &direct[0],
            &key(&a),
            "another-owner",
            Duration::from_millis(10),
        );
        match redlock.lock(&[&a, &b], TTL).await {
            Ok(guard) => guard.release().await.unwrap(),
            Err(e) => {
                panic!("round {round}: the retry was refused by the failed attempt's own keys: {e}")
            }
        }
    }
    redlock.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_taken_again_right_after_its_release_lands_on_a_slow_node_too() {
    // Node 4 answers 40 ms after a call: each lock is decided by the four
    // others, and its release's delete to node 4 waits behind the SET still
    // on its way. The next lock's SET there must follow that delete, or
    // our own old key refuses it and node 4 ends up holding nothing.
    let cluster = cluster(5);
    let config = Config::default()
        .with_quorum(4)
        .with_retries(0)
        .with_node_timeout(TIMEOUT);
    let redlock = redlock(&cluster.urls(), config);
    warm_up(&redlock).await;
    cluster.set_proxy(
        4,
        redquorum::testkit::ProxyMode::Delay(Duration::from_millis(20)),
    );
    let node4 = [cluster.direct_url(4)];
    for round in 0..3 {
        let resource = unique(&format!("again-after-release-{round}"));
        let first = redlock.try_lock(&resource, TTL).await.unwrap();
        first.release().await.unwrap();
        let second = redlock.try_lock(&resource, TTL).await.unwrap();
        let landed = settles_on(&node4, &key(&resource), second.value(), 1).await;
        assert!(landed, "round {round}: node 4 never got the second lock");
        second.release().await.unwrap();
    }
    redlock.shutdown().await;
}
