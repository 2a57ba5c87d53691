//! What a failed operation reports when nodes are down: an outage is an
//! outage, never "someone else holds it". Needs local nodes (kills and
//! fault proxies).
#![cfg(feature = "testkit")]

mod common;

use std::time::Duration;

use common::*;
use redquorum::testkit::{LocalCluster, ProxyMode};
use redquorum::{Error, Reason};

const TTL: Duration = Duration::from_secs(30);

/// Five nodes, every connection open; then nodes 0 and 1 dead, nodes 2
/// and 3 hung, and node 4 holding a stale key of another owner for
/// `resource`: four of five nodes are out.
async fn four_nodes_out(resource: &str) -> (LocalCluster, redquorum::Redlock) {
    let cluster = cluster(5);
    let config = fast_config().with_retries(0);
    let redlock = redlock(&cluster.urls(), config);
    warm_up(&redlock).await;
    cluster.kill(0).unwrap();
    cluster.kill(1).unwrap();
    cluster.set_proxy(2, ProxyMode::Blackhole);
    cluster.set_proxy(3, ProxyMode::Blackhole);
    set(&cluster.direct_url(4), &key(resource), "stale-owner", TTL);
    (cluster, redlock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_with_lock_with_four_of_five_nodes_out_is_an_error_not_a_skip() {
    let resource = unique("four-out");
    let (_cluster, redlock) = four_nodes_out(&resource).await;
    let ran = std::sync::atomic::AtomicBool::new(false);
    let result = redlock
        .try_with_lock(&resource, TTL, async |_| {
            ran.store(true, std::sync::atomic::Ordering::SeqCst)
        })
        .await;
    assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
    // One refusal, two dead nodes and two that had not answered when the
    // attempt was decided: a majority is down, nobody is known to hold it.
    match result {
        Err(Error::NotAcquired(why)) => {
            assert_eq!(why.reason(), Reason::Unavailable, "{why}");
            assert!(why.reason() == redquorum::Reason::Unavailable, "{why}");
            assert!(why.reason() != redquorum::Reason::Contended, "{why}");
        }
        other => panic!("four of five nodes out reported as {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_with_four_of_five_nodes_out_is_unavailable_only() {
    let resource = unique("four-out-report");
    let (_cluster, redlock) = four_nodes_out(&resource).await;
    let Err(Error::NotAcquired(why)) = redlock.try_lock(&resource, TTL).await else {
        panic!("acquired with four of five nodes out");
    };
    assert_eq!(
        why.nodes()
            .iter()
            .filter(|n| *n.outcome() == redquorum::NodeOutcome::Refused)
            .count(),
        1,
        "{why}"
    );
    assert_eq!(why.reason(), Reason::Unavailable, "{why}");
    assert!(why.to_string().contains("nodes unavailable"), "{why}");
    assert!(why.reason() == redquorum::Reason::Unavailable, "{why}");
    assert!(why.reason() != redquorum::Reason::Contended, "{why}");
    assert!(why.reason() != redquorum::Reason::Misconfigured, "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_no_quorum_could_confirm_is_not_reported_as_expired() {
    let cluster = cluster(5);
    let redlock = redlock(&cluster.urls(), fast_config().with_retries(0));
    warm_up(&redlock).await;
    let resource = unique("unconfirmed");
    let guard = redlock.try_lock(&resource, TTL).await.unwrap();
    for i in [1, 2, 4] {
        cluster.set_proxy(i, ProxyMode::Blackhole);
    }
    // 30 s of validity left: the lock has not expired, three of five
    // nodes just cannot say whether they deleted it.
    assert!(guard.remaining() > TTL / 2);
    let released = guard.release().await;
    let Err(error) = released else {
        panic!("a release with 3 of 5 nodes hung was confirmed");
    };
    assert!(!matches!(error, Error::Expired), "{error}");
    let Error::ReleaseUnconfirmed(why) = &error else {
        panic!("expected ReleaseUnconfirmed, got {error:?}");
    };
    assert_eq!(why.reason(), redquorum::Reason::Unavailable, "{why}");
    assert_eq!(
        (
            why.nodes()
                .iter()
                .filter(|n| *n.outcome() == redquorum::NodeOutcome::Granted)
                .count(),
            why.nodes()
                .iter()
                .filter(|n| n.outcome().is_unavailable())
                .count()
        ),
        (2, 3),
        "{why}"
    );
    let text = error.to_string();
    for i in [1, 2, 4] {
        let url = cluster.url(i);
        let name = url.trim_start_matches("redis://").trim_end_matches('/');
        assert!(text.contains(name), "node {i} ({name}) not named: {text}");
    }
}
