//! Rounds chained behind a slow node's previous call: the deletes of a
//! release or of a failed attempt's clean-up are sent once that call is
//! over, and nothing of ours is left once `shutdown()` returned and the
//! slow node has caught up. Needs local nodes (fault proxies).
//!
//! The tests run on a current-thread runtime and block it for a moment
//! right after the round started (as a busy runtime does): the previous
//! call's deadline and the new round's own deadline have then both passed
//! when the runtime looks again, so the new round meets its deadline the
//! moment the node's previous call is over. A delete chained behind it
//! must still be sent.
#![cfg(feature = "testkit")]

mod common;

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use common::*;
use redquorum::testkit::{LocalCluster, ProxyMode};
use redquorum::{Config, Redlock};

/// A key lives this long: far longer than any wait below, so a key still
/// there at the end was left behind, not about to expire.
const TTL: Duration = Duration::from_secs(30);
/// The node timeout.
const TIMEOUT: Duration = Duration::from_millis(200);
/// Node 0's delay each way: its SET lands after the node timeout.
const LATE: Duration = Duration::from_millis(300);

/// Five nodes, node 0 slow: its SET lands 300 ms after it is sent, past
/// the node timeout, so every round is decided by the other four and
/// node 0's call is finished in the background until the round's
/// deadline.
async fn slow_node_zero() -> (LocalCluster, Redlock) {
    let (cluster, redlock) = five_nodes().await;
    cluster.set_proxy(0, ProxyMode::Delay(LATE));
    (cluster, redlock)
}

/// Five nodes, connections open, no retries, the node timeout above.
async fn five_nodes() -> (LocalCluster, Redlock) {
    let cluster = cluster(5);
    let config = Config::default().with_node_timeout(TIMEOUT).with_retries(0);
    let redlock = redlock(&cluster.urls(), config);
    warm_up(&redlock).await;
    (cluster, redlock)
}

/// Takes `name`'s lock for `round`, recording its resource in
/// `resources` (for [`nothing_left`]).
async fn lock_for_round(
    redlock: &Redlock,
    name: &str,
    round: usize,
    resources: &mut Vec<String>,
) -> redquorum::LockGuard {
    let resource = unique(&format!("{name}-{round}"));
    let guard = redlock.try_lock(&resource, TTL).await;
    let guard = guard.unwrap_or_else(|e| panic!("round {round}: {e}"));
    resources.push(resource);
    guard
}

/// Releases `guard` with the runtime busy past the round's deadline
/// right after the round started.
async fn release_with_a_busy_runtime(guard: redquorum::LockGuard, round: usize) {
    let mut release = pin!(guard.release());
    if poll_once(release.as_mut()).await.is_ready() {
        panic!("round {round}: the release did not wait for any node");
    }
    block_the_runtime();
    let _ = release.await;
}

/// Polls `future` once.
async fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    let mut future = Some(future);
    std::future::poll_fn(|cx| {
        let poll = future
            .as_mut()
            .map_or(Poll::Pending, |f| f.as_mut().poll(cx));
        Poll::Ready(poll)
    })
    .await
}

/// Blocks this runtime's only thread past both deadlines.
fn block_the_runtime() {
    std::thread::sleep(TIMEOUT * 2);
}

/// Waits until no node holds any of `resources`' keys; panics naming
/// what is left (keys live for 30 s: a key left now was left behind).
async fn nothing_left(cluster: &LocalCluster, resources: &[String]) {
    let direct = cluster.direct_urls();
    let left = || {
        resources
            .iter()
            .map(|r| (r, holding_any(&direct, &key(r))))
            .filter(|(_, nodes)| !nodes.is_empty())
            .collect::<Vec<_>>()
    };
    // Each delete lands on node 0 about 300 ms after it was sent.
    let clean = eventually(Duration::from_secs(5), || left().is_empty()).await;
    assert!(
        clean,
        "keys left after shutdown(), by resource and nodes: {:?}",
        left()
    );
}

/// The indices of `urls` that hold `key` with any value.
fn holding_any(urls: &[String], key: &str) -> Vec<usize> {
    (0..urls.len())
        .filter(|&i| get(&urls[i], key).is_some())
        .collect()
}

#[tokio::test]
async fn a_release_chained_behind_a_late_set_is_sent_and_deletes_it() {
    let (cluster, redlock) = slow_node_zero().await;
    let mut resources = Vec::new();
    for round in 0..3 {
        let guard = lock_for_round(&redlock, "chained-release", round, &mut resources).await;
        // The release's round starts (node 0's delete waits behind the
        // late SET); then the runtime is busy past both deadlines.
        release_with_a_busy_runtime(guard, round).await;
    }
    redlock.shutdown().await;
    nothing_left(&cluster, &resources).await;
}

#[tokio::test]
async fn a_release_whose_noscript_answer_comes_after_its_deadline_is_sent_again() {
    let (cluster, redlock) = five_nodes().await;
    let direct = cluster.direct_urls();
    let mut resources = Vec::new();
    for round in 0..3 {
        let guard = lock_for_round(&redlock, "late-noscript", round, &mut resources).await;
        // Every node forgets its scripts (as after a restart that kept
        // its keys): the release's EVALSHA is answered NOSCRIPT, and that
        // answer is read only once the round's deadline has passed.
        for url in &direct {
            let _: () = query(url, redis::cmd("SCRIPT").arg("FLUSH")).unwrap();
        }
        release_with_a_busy_runtime(guard, round).await;
        // The deletes sent again are done before the next round makes the
        // nodes forget their scripts once more.
        redlock.shutdown().await;
    }
    nothing_left(&cluster, &resources).await;
}

#[tokio::test]
async fn a_failed_attempts_clean_up_chained_behind_a_late_set_is_sent_and_deletes_it() {
    let (cluster, redlock) = slow_node_zero().await;
    let direct = cluster.direct_urls();
    let mut resources = Vec::new();
    for round in 0..3 {
        let resource = unique(&format!("chained-clean-up-{round}"));
        // Nodes 1-3 refuse: the attempt is lost at once, node 4 granted
        // and node 0's SET is on its way; the clean-up follows at once.
        for url in &direct[1..4] {
            set(url, &key(&resource), "another-owner", TTL);
        }
        {
            let mut attempt = pin!(redlock.try_lock(&resource, TTL));
            tokio::select! {
                result = attempt.as_mut() => {
                    assert!(result.is_err(), "round {round}: acquired a held lock");
                }
                () = tokio::time::sleep(TIMEOUT / 4) => {
                    // Decided by now: the clean-up round is under way.
                    block_the_runtime();
                    assert!(attempt.await.is_err(), "round {round}: acquired a held lock");
                }
            }
        }
        block_the_runtime();
        // Only the other owner's keys may remain: remove them.
        for url in &direct[1..4] {
            let value = get(url, &key(&resource));
            assert_eq!(value.as_deref(), Some("another-owner"), "round {round}");
            let _: i64 = query(url, redis::cmd("DEL").arg(key(&resource))).unwrap();
        }
        resources.push(resource);
    }
    redlock.shutdown().await;
    nothing_left(&cluster, &resources).await;
}
