//! Every bad input gets a typed error that says what to fix; none panics.
#![cfg(feature = "testkit")]

mod common;

use std::time::Duration;

use common::*;
use redquorum::{Config, Error, MAX_TTL, Redlock};

const NODES: [&str; 5] = [
    "redis://127.0.0.1:7001/",
    "redis://127.0.0.1:7002/",
    "redis://127.0.0.1:7003/",
    "redis://127.0.0.1:7004/",
    "redis://127.0.0.1:7005/",
];

fn config_error(result: redquorum::Result<Redlock>) -> String {
    match result {
        Err(Error::Config(why)) => why,
        other => panic!("expected Error::Config, got {other:?}"),
    }
}

#[test]
fn zero_nodes_is_a_config_error() {
    let why = config_error(Redlock::new(Vec::<String>::new()));
    assert!(why.contains("no nodes"), "{why}");
}

#[test]
fn an_invalid_url_is_a_config_error_naming_the_node() {
    let why = config_error(Redlock::new(["redis://127.0.0.1:7001/", "not a url"]));
    assert!(why.contains("node 1"), "{why}");
    let why = config_error(Redlock::new(["redis://127.0.0.1:notaport/"]));
    assert!(why.contains("node 0"), "{why}");
}

#[test]
fn the_same_node_twice_is_a_config_error_naming_both() {
    let why = config_error(Redlock::new([
        "redis://127.0.0.1:7001/",
        "redis://127.0.0.1:7002/",
        "redis://:pw@127.0.0.1:7001/",
    ]));
    assert!(
        why.contains("nodes 0 and 2") && why.contains("127.0.0.1:7001"),
        "{why}"
    );
}

#[test]
fn the_same_server_on_another_database_is_a_distinct_node() {
    let redlock = Redlock::new([
        "redis://127.0.0.1:7001/0",
        "redis://127.0.0.1:7001/1",
        "redis://127.0.0.1:7002/",
    ]);
    assert_eq!(redlock.map(|r| r.node_count()).ok(), Some(3));
}

#[test]
fn quorum_of_half_or_less_or_above_the_node_count_is_a_config_error() {
    for bad in [0, 1, 2, 6] {
        let why = config_error(Redlock::with_config(
            NODES,
            Config::default().with_quorum(bad),
        ));
        assert!(why.contains(&format!("quorum {bad}")), "{why}");
    }
    for good in [3, 4, 5] {
        assert!(Redlock::with_config(NODES, Config::default().with_quorum(good)).is_ok());
    }
}

#[test]
fn drift_factor_nan_negative_or_not_below_one_is_a_config_error() {
    for bad in [f64::NAN, -0.01, 1.0, f64::INFINITY] {
        let why = config_error(Redlock::with_config(
            NODES,
            Config::default().with_drift_factor(bad),
        ));
        assert!(why.contains("drift factor"), "{why}");
    }
}

#[test]
fn construction_does_no_io_so_unreachable_nodes_are_accepted() {
    // Nothing listens on these ports; construction must not care.
    let redlock = Redlock::new([
        "redis://127.0.0.1:1/",
        "redis://127.0.0.1:2/",
        "redis://127.0.0.1:3/",
    ]);
    assert!(redlock.is_ok());
}

fn invalid_argument(result: redquorum::Result<redquorum::LockGuard>) -> String {
    match result {
        Err(Error::InvalidArgument(why)) => why,
        other => panic!("expected Error::InvalidArgument, got {other:?}"),
    }
}

#[tokio::test]
async fn empty_resource_and_bad_ttls_are_invalid_arguments_without_touching_the_nodes() {
    // Unreachable nodes: an argument error must come before any I/O.
    let redlock = Redlock::new([
        "redis://127.0.0.1:1/",
        "redis://127.0.0.1:2/",
        "redis://127.0.0.1:3/",
    ])
    .unwrap();
    let second = Duration::from_secs(1);
    assert!(invalid_argument(redlock.try_lock("", second).await).contains("empty"));
    assert!(invalid_argument(redlock.lock("", second).await).contains("empty"));
    assert!(invalid_argument(redlock.lock_many(&[], second).await).contains("no resource"));
    assert!(invalid_argument(redlock.lock_many(&["a", ""], second).await).contains("empty"));
    assert!(invalid_argument(redlock.try_lock("r", Duration::ZERO).await).contains("below 1 ms"));
    assert!(
        invalid_argument(redlock.try_lock("r", Duration::from_millis(2)).await).contains("drift")
    );
    assert!(invalid_argument(redlock.try_lock("r", MAX_TTL + second).await).contains("longer"));
    assert!(invalid_argument(redlock.try_lock("r", Duration::MAX).await).contains("longer"));
}

#[tokio::test]
async fn nodes_unreachable_at_acquire_are_reported_by_name_and_reason() {
    let redlock = Redlock::with_config(
        [
            "redis://127.0.0.1:1/",
            "redis://127.0.0.1:2/",
            "redis://127.0.0.1:3/",
        ],
        Config::default()
            .with_retry_count(1)
            .with_retry_delay(Duration::from_millis(1)),
    )
    .unwrap();
    let err = redlock
        .lock("r", Duration::from_secs(1))
        .await
        .expect_err("no node is up");
    let Error::NotAcquired(attempts) = &err else {
        panic!("{err:?}")
    };
    assert!(attempts.is_unavailable());
    assert_eq!(attempts.attempts(), 2);
    let text = err.to_string();
    assert!(
        text.contains("127.0.0.1:1") && text.contains("error"),
        "{text}"
    );
}

#[tokio::test]
async fn extending_with_a_bad_ttl_is_an_invalid_argument_and_keeps_the_lock() {
    let nodes = nodes();
    let redlock = redlock(&nodes.urls(), fast_config());
    let resource = unique("bad-extend");
    let mut guard = redlock
        .try_lock(&resource, Duration::from_secs(10))
        .await
        .unwrap();
    let why = match guard.extend(Duration::ZERO).await {
        Err(Error::InvalidArgument(why)) => why,
        other => panic!("{other:?}"),
    };
    assert!(why.contains("TTL"), "{why}");
    assert!(!guard.is_expired());
    guard.release().await.expect("still held");
}

#[tokio::test]
async fn a_replica_and_a_node_that_needs_a_password_are_failed_votes_with_the_server_text() {
    let cluster = cluster(5);
    let direct = cluster.direct_urls();
    let redlock = redlock(&cluster.urls(), fast_config().with_retry_count(0));
    // Node 0 becomes a replica of node 1 (READONLY), node 2 demands a password.
    let port1 = direct[1]
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    query::<()>(
        &direct[0],
        redis::cmd("REPLICAOF").arg("127.0.0.1").arg(&port1),
    )
    .unwrap();
    query::<()>(
        &direct[2],
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("requirepass")
            .arg("s3cret"),
    )
    .unwrap();
    // Three good nodes of five: still a quorum, each bad node a failed vote.
    let guard = redlock
        .try_lock("misconfigured", Duration::from_secs(10))
        .await
        .expect("3 good nodes");
    guard.release().await.expect("release");
    // With a quorum of 4 the two bad nodes sink it, and the report says why.
    let strict = redlock_with_quorum(&cluster.urls(), 4);
    let err = strict
        .try_lock("misconfigured-2", Duration::from_secs(10))
        .await
        .expect_err("only 3 good nodes");
    let Error::NotAcquired(attempts) = &err else {
        panic!("{err:?}")
    };
    let text0 = attempts.nodes()[0].outcome().to_string();
    let text2 = attempts.nodes()[2].outcome().to_string();
    assert!(text0.contains("read only replica"), "{text0}");
    assert!(text2.to_lowercase().contains("auth"), "{text2}");
    assert!(attempts.is_unavailable(), "{attempts}");
}

fn redlock_with_quorum(urls: &[String], quorum: usize) -> Redlock {
    redlock(urls, fast_config().with_retry_count(0).with_quorum(quorum))
}
