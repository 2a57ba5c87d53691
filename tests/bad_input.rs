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
fn the_same_server_on_another_database_is_the_same_node() {
    // One server, two votes: with the only other server down, a "quorum"
    // of 2 of 3 would be one process.
    let why = config_error(Redlock::new([
        "redis://127.0.0.1:7001/0",
        "redis://127.0.0.1:7001/1",
        "redis://127.0.0.1:7002/",
    ]));
    assert!(
        why.contains("nodes 0 and 1") && why.contains("127.0.0.1:7001"),
        "{why}"
    );
    let why = config_error(Redlock::new([
        "redis+unix:///tmp/redis.sock?db=1",
        "redis+unix:///tmp/redis.sock?db=2",
    ]));
    assert!(why.contains("nodes 0 and 1"), "{why}");
}

/// The config error for `config`, which must name `setting`.
fn rejects(config: Config, setting: &str) {
    let why = config_error(Redlock::with_config(NODES, config));
    assert!(why.contains(setting), "{setting}: {why}");
}

#[test]
fn a_drift_padding_beyond_its_bound_is_a_config_error() {
    rejects(
        Config::default().with_drift(redquorum::DEFAULT_DRIFT_FACTOR, Duration::MAX),
        "drift padding",
    );
}

#[test]
fn a_min_validity_beyond_its_bound_is_a_config_error() {
    rejects(
        Config::default().with_min_validity(Duration::MAX),
        "min validity",
    );
}

#[test]
fn a_retry_delay_beyond_its_bound_is_a_config_error() {
    rejects(
        Config::default().with_retry_delay(Duration::MAX),
        "retry delay",
    );
}

#[test]
fn a_retry_jitter_beyond_its_bound_is_a_config_error() {
    rejects(
        Config::default().with_retry_jitter(Duration::MAX),
        "retry jitter",
    );
}

#[test]
fn an_acquire_timeout_beyond_its_bound_is_a_config_error() {
    rejects(
        Config::default().with_wait(Duration::MAX),
        "acquire timeout",
    );
}

#[test]
fn a_node_timeout_beyond_its_bound_is_a_config_error() {
    rejects(
        Config::default().with_node_timeout(Duration::MAX),
        "node timeout",
    );
}

#[test]
fn a_max_hold_beyond_its_bound_is_a_config_error() {
    rejects(Config::default().with_max_hold(Duration::MAX), "max hold");
}

#[tokio::test]
async fn the_largest_accepted_durations_lock_extend_and_release_without_panic_or_hang() {
    let nodes = nodes();
    let hour = Duration::from_secs(3600);
    let config = Config::default()
        .with_retry_delay(hour)
        .with_retry_jitter(hour)
        .with_node_timeout(Duration::from_secs(5))
        .with_wait(MAX_TTL)
        .with_max_hold(MAX_TTL);
    let redlock = redlock(&nodes.urls(), config);
    let resource = unique("largest");
    let done = tokio::time::timeout(Duration::from_secs(30), async {
        let mut guard = redlock.lock(&resource, Duration::from_secs(5)).await?;
        guard.extend(Duration::from_secs(5)).await?;
        guard.release().await?;
        redlock
            .with_lock(&resource, Duration::from_millis(300), async |_| {
                tokio::time::sleep(Duration::from_millis(700)).await;
            })
            .await
    })
    .await
    .expect("hung");
    assert!(done.is_ok(), "{done:?}");
}

#[test]
fn key_prefixes_that_could_make_one_kind_of_key_equal_another_are_config_errors() {
    // Prefix "X:fence:" would make the lock key of "jobs" the fence counter
    // of prefix "X:", resource "lock:jobs".
    for prefix in ["X:fence:", "a:lock:", "lock:", "b:released:", "released:x"] {
        rejects(Config::default().with_key_prefix(prefix), "key prefix");
    }
}

#[tokio::test]
async fn a_fence_counter_never_blocks_a_lock_of_another_prefix() {
    let nodes = nodes();
    let resource = unique("jobs");
    let fenced = redlock(
        &nodes.urls(),
        fast_config().with_key_prefix("X:").with_fencing(true),
    );
    fenced
        .try_lock(&format!("lock:{resource}"), Duration::from_secs(5))
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    // Either refused at construction, or its lock is free to take.
    match Redlock::with_config(nodes.urls(), fast_config().with_key_prefix("X:fence:")) {
        Err(Error::Config(why)) => assert!(why.contains("key prefix"), "{why}"),
        Ok(other) => {
            let guard = other.try_lock(&resource, Duration::from_secs(5)).await;
            assert!(guard.is_ok(), "{guard:?}");
        }
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn lock_many_with_a_hundred_thousand_names_does_no_quadratic_work() {
    // Unreachable nodes: the attempt fails at once, so the time is the
    // library's own (2.9 s for 20,000 names when de-duplicating in O(n^2);
    // 100,000 would take over a minute).
    let redlock = Redlock::with_config(
        [
            "redis://127.0.0.1:1/",
            "redis://127.0.0.1:2/",
            "redis://127.0.0.1:3/",
        ],
        Config::default().with_retries(0),
    )
    .unwrap();
    let names: Vec<String> = (0..100_000).map(|i| format!("r{}", i % 60_000)).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let started = std::time::Instant::now();
    let result = redlock.lock(&names, Duration::from_secs(5)).await;
    let took = started.elapsed();
    assert!(matches!(result, Err(Error::NotAcquired(_))), "{result:?}");
    // Only catches quadratic work: linear work takes a fraction of this.
    assert!(took < Duration::from_secs(20), "lock_many took {took:?}");
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
            Config::default().with_drift(bad, redquorum::DEFAULT_DRIFT_PADDING),
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
    assert!(invalid_argument(redlock.lock(&[] as &[&str], second).await).contains("no resource"));
    assert!(invalid_argument(redlock.lock(&["a", ""], second).await).contains("empty"));
    assert!(invalid_argument(redlock.try_lock("r", Duration::ZERO).await).contains("below 1 ms"));
    assert!(
        invalid_argument(redlock.try_lock("r", Duration::from_millis(2)).await).contains("drift")
    );
    assert!(invalid_argument(redlock.try_lock("r", MAX_TTL + second).await).contains("longer"));
    assert!(invalid_argument(redlock.try_lock("r", Duration::MAX).await).contains("longer"));
    let owner = redquorum::LockOptions::new().owner("job-1");
    let several = redlock.lock_with(&["a", "b"], second, &owner).await;
    assert!(invalid_argument(several).contains("one resource"));
    let nobody = redquorum::LockOptions::new().owner("");
    assert!(invalid_argument(redlock.lock_with("a", second, &nobody).await).contains("owner"));
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
            .with_retries(1)
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
    assert!(attempts.reason() == redquorum::Reason::Unavailable);
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
    assert!(!guard.remaining().is_zero());
    guard.release().await.expect("still held");
}

#[tokio::test]
async fn a_replica_and_a_node_that_needs_a_password_are_misconfigured_votes_with_the_server_text() {
    let cluster = cluster(5);
    let direct = cluster.direct_urls();
    let redlock = redlock(&cluster.urls(), fast_config().with_retries(0));
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
    // Waiting does not mend either: a misconfiguration, not an outage.
    assert!(
        attempts.reason() == redquorum::Reason::Misconfigured,
        "{attempts}"
    );
    assert!(
        attempts.reason() != redquorum::Reason::Unavailable,
        "{attempts}"
    );
    let kinds: Vec<_> = [0, 2]
        .map(|i| match attempts.nodes()[i].outcome() {
            redquorum::NodeOutcome::Failed(f) => f.kind().clone(),
            other => panic!("{other:?}"),
        })
        .into();
    assert_eq!(
        kinds,
        [
            redquorum::FailureKind::ReadOnly,
            redquorum::FailureKind::Auth
        ]
    );
}

fn redlock_with_quorum(urls: &[String], quorum: usize) -> Redlock {
    redlock(urls, fast_config().with_retries(0).with_quorum(quorum))
}
