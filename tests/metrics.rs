//! Metrics (feature `metrics`): each family moves as it should, read with
//! `metrics-util`'s debugging recorder. Each test installs its recorder
//! on its own thread (a current-thread runtime runs every task there), so
//! tests running side by side do not see each other's metrics.
#![cfg(all(feature = "testkit", feature = "metrics"))]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redquorum::metrics::*;
use redquorum::testkit::ProxyMode;

const TTL: Duration = Duration::from_secs(10);

/// Installs a debugging recorder for the rest of the calling block, on
/// this thread only, and binds its snapshotter to `$snapshotter`.
macro_rules! record_into {
    ($snapshotter:ident) => {
        let recorder = DebuggingRecorder::new();
        let $snapshotter = recorder.snapshotter();
        let _local = metrics::set_default_local_recorder(&recorder);
    };
}

/// One metric series from a snapshot: name, labels, and what changed.
#[derive(Debug)]
struct Series {
    name: String,
    labels: BTreeMap<String, String>,
    value: DebugValue,
}

/// What changed since the last call (counters and histograms are drained).
fn take(snapshotter: &Snapshotter) -> Vec<Series> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| Series {
            name: key.key().name().to_owned(),
            labels: key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect(),
            value,
        })
        .collect()
}

fn matching<'a>(
    series: &'a [Series],
    name: &'a str,
    labels: &'a [(&str, &str)],
) -> impl Iterator<Item = &'a Series> {
    series.iter().filter(move |s| {
        s.name == name
            && labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
    })
}

/// The sum of the counters `name` with `labels` (among others).
fn count(series: &[Series], name: &str, labels: &[(&str, &str)]) -> u64 {
    matching(series, name, labels)
        .map(|s| match &s.value {
            DebugValue::Counter(n) => *n,
            other => panic!("{name} is no counter: {other:?}"),
        })
        .sum()
}

/// Every value recorded in the histograms `name` with `labels`.
fn values(series: &[Series], name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    matching(series, name, labels)
        .flat_map(|s| match &s.value {
            DebugValue::Histogram(v) => v.iter().map(|x| x.into_inner()).collect::<Vec<_>>(),
            other => panic!("{name} is no histogram: {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn acquisitions_are_timed_and_counted_by_outcome() {
    record_into!(snapshotter);
    let cluster = cluster(5);
    let config = fast_config().with_retries(2);
    let redlock = redlock(&cluster.urls(), config.with_release_notifications(false));
    let resource = unique("metrics-acquire");

    let guard = redlock.try_lock(&resource, TTL).await.unwrap();
    let m = take(&snapshotter);
    let acquired = [("outcome", "acquired")];
    assert_eq!(values(&m, ACQUIRE_DURATION, &acquired).len(), 1, "{m:#?}");
    assert_eq!(values(&m, WAIT_DURATION, &acquired).len(), 1);
    assert_eq!(values(&m, ACQUIRE_ATTEMPTS, &acquired), [1.0]);
    // No resource label unless asked for.
    assert!(
        m.iter()
            .all(|s| !s.labels.contains_key("redquorum.resource"))
    );

    // Held: lock() makes three contended attempts and gives up.
    let refused = redlock.lock(&resource, TTL).await;
    assert!(refused.is_err());
    let m = take(&snapshotter);
    let contended = [("outcome", "contended")];
    assert_eq!(values(&m, ACQUIRE_DURATION, &contended).len(), 3, "{m:#?}");
    assert_eq!(values(&m, ACQUIRE_ATTEMPTS, &contended), [3.0]);
    let waited = values(&m, WAIT_DURATION, &contended);
    // Two retry pauses of at least 10 ms each.
    assert!(waited.len() == 1 && waited[0] >= 0.02, "{waited:?}");
    guard.release().await.unwrap();

    // Slow nodes use up a TTL that must leave 97 of its 101 ms.
    let strict = common::redlock(
        &cluster.urls(),
        fast_config().with_min_validity(Duration::from_millis(97)),
    );
    for i in 0..5 {
        cluster.set_proxy(i, ProxyMode::Delay(Duration::from_millis(5)));
    }
    let exhausted = strict
        .try_lock(&unique("metrics-slow"), Duration::from_millis(101))
        .await;
    assert!(exhausted.is_err());
    for i in 0..5 {
        cluster.set_proxy(i, ProxyMode::Pass);
    }
    let m = take(&snapshotter);
    let outcome = [("outcome", "validity_exhausted")];
    assert_eq!(values(&m, ACQUIRE_DURATION, &outcome).len(), 1, "{m:#?}");

    // A majority down: unavailable.
    for i in 0..3 {
        cluster.kill(i).unwrap();
    }
    assert!(
        redlock
            .try_lock(&unique("metrics-down"), TTL)
            .await
            .is_err()
    );
    let m = take(&snapshotter);
    let outcome = [("outcome", "unavailable")];
    assert_eq!(values(&m, ACQUIRE_DURATION, &outcome).len(), 1, "{m:#?}");
    assert_eq!(values(&m, WAIT_DURATION, &outcome).len(), 1);
    redlock.shutdown().await;
}

#[tokio::test]
async fn holds_are_timed_by_how_they_end() {
    record_into!(snapshotter);
    let nodes = nodes();
    let redlock = redlock(&nodes.urls(), fast_config());

    let guard = redlock
        .try_lock(&unique("metrics-hold"), TTL)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    guard.release().await.unwrap();
    let short = redlock
        .try_lock(&unique("metrics-hold"), Duration::from_millis(50))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert!(short.release().await.is_err());
    drop(
        redlock
            .try_lock(&unique("metrics-hold"), TTL)
            .await
            .unwrap(),
    );
    redlock.shutdown().await;

    let m = take(&snapshotter);
    let released = values(&m, HOLD_DURATION, &[("outcome", "released")]);
    assert!(released.len() == 1 && released[0] >= 0.03, "{m:#?}");
    let expired = values(&m, HOLD_DURATION, &[("outcome", "expired")]);
    assert!(expired.len() == 1 && expired[0] >= 0.08, "{expired:?}");
    assert_eq!(
        values(&m, HOLD_DURATION, &[("outcome", "dropped")]).len(),
        1
    );
}

#[tokio::test]
async fn extensions_count_ok_and_failed_and_record_the_margin_left() {
    record_into!(snapshotter);
    let cluster = cluster(5);
    let config = fast_config().with_node_timeout(Duration::from_millis(200));
    let redlock = redlock(&cluster.urls(), config);
    let mut guard = redlock
        .try_lock(&unique("metrics-extend"), TTL)
        .await
        .unwrap();

    guard.extend(TTL).await.unwrap();
    let m = take(&snapshotter);
    assert_eq!(count(&m, EXTENSIONS, &[("outcome", "ok")]), 1, "{m:#?}");
    let margin = values(&m, EXTENSION_MARGIN, &[]);
    // Extended right away: nearly the whole TTL was left.
    assert!(
        margin.len() == 1 && margin[0] > 5.0 && margin[0] <= 10.0,
        "{margin:?}"
    );

    for i in 0..3 {
        cluster.set_proxy(i, ProxyMode::Blackhole);
    }
    assert!(guard.extend(TTL).await.is_err());
    let m = take(&snapshotter);
    assert_eq!(count(&m, EXTENSIONS, &[("outcome", "failed")]), 1, "{m:#?}");
    assert_eq!(count(&m, EXTENSIONS, &[("outcome", "ok")]), 0);
    assert!(values(&m, EXTENSION_MARGIN, &[]).is_empty());
    drop(guard);
    for i in 0..3 {
        cluster.set_proxy(i, ProxyMode::Pass);
    }
    redlock.shutdown().await;
}

#[tokio::test]
async fn a_killed_majority_counts_one_lost_lock() {
    record_into!(snapshotter);
    let cluster = cluster(5);
    let config = fast_config().with_node_timeout(Duration::from_millis(100));
    let redlock = redlock(&cluster.urls(), config);
    let ttl = Duration::from_millis(600);
    let mut guard = redlock
        .try_lock(&unique("metrics-lost"), ttl)
        .await
        .unwrap();
    guard.auto_extend();
    for i in 0..3 {
        cluster.kill(i).unwrap();
    }
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .unwrap();
    // Give the watchdog time for its last word.
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(guard);
    redlock.shutdown().await;
    let m = take(&snapshotter);
    assert_eq!(count(&m, LOST, &[]), 1, "{m:#?}");
}

#[tokio::test]
async fn a_lock_gone_from_a_majority_counts_once_though_two_find_it() {
    record_into!(snapshotter);
    let cluster = cluster(5);
    let redlock = redlock(&cluster.urls(), fast_config());
    let resource = unique("metrics-gone");
    let ttl = Duration::from_millis(900);
    let mut guard = redlock.try_lock(&resource, ttl).await.unwrap();
    // try_lock returns at quorum: wait until every node has the key, so
    // that it can be taken from three of them.
    let everywhere = eventually(Duration::from_secs(5), || {
        holders(&cluster.direct_urls(), &key(&resource), guard.value()) == 5
    })
    .await;
    assert!(everywhere, "the key never reached every node");
    guard.auto_extend();
    for i in 0..3 {
        assert!(cluster.expire_now(i, &key(&resource)).unwrap());
    }
    // The watchdog's next extension finds it gone and says so (one
    // count); then it declares the loss too, which must not count again.
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(guard.extend(ttl).await.is_err());
    drop(guard);
    redlock.shutdown().await;
    let m = take(&snapshotter);
    assert_eq!(count(&m, LOST, &[]), 1, "{m:#?}");
    assert!(count(&m, EXTENSIONS, &[("outcome", "failed")]) >= 1);
}

#[tokio::test]
async fn node_votes_and_latency_are_labelled_by_node_and_operation() {
    record_into!(snapshotter);
    let cluster = cluster(5);
    let redlock = redlock(&cluster.urls(), fast_config());
    let resource = unique("metrics-votes");
    let guard = redlock.try_lock(&resource, TTL).await.unwrap();
    assert!(redlock.try_lock(&resource, TTL).await.is_err());
    guard.release().await.unwrap();
    // The release returned at a quorum: wait for its last delete before
    // the kill, which could otherwise fail it.
    redlock.shutdown().await;
    cluster.kill(4).unwrap();
    let other = redlock
        .try_lock(&unique("metrics-votes"), TTL)
        .await
        .unwrap();
    other.release().await.unwrap();
    redlock.shutdown().await;

    let m = take(&snapshotter);
    let acquire = ("db.operation.name", "acquire");
    // Every answer counts, those after a round's decision too: five
    // grants, five refusals, then four grants and the dead node's failure.
    assert_eq!(
        count(&m, NODE_VOTES, &[acquire, ("outcome", "granted")]),
        5 + 4,
        "{m:#?}"
    );
    assert_eq!(count(&m, NODE_VOTES, &[acquire, ("outcome", "refused")]), 5);
    let killed = cluster.url(4);
    let port = killed.trim_end_matches('/').rsplit(':').next().unwrap();
    for op in ["acquire", "release"] {
        let dead = [
            ("server.port", port),
            ("db.operation.name", op),
            ("outcome", "failed"),
        ];
        assert_eq!(count(&m, NODE_VOTES, &dead), 1, "{op}: {m:#?}");
    }
    // Releases: five and four grants; the failed attempt's clean-up
    // found nothing of its own on any node.
    let release = ("db.operation.name", "release");
    assert_eq!(
        count(&m, NODE_VOTES, &[release, ("outcome", "granted")]),
        5 + 4
    );
    assert_eq!(count(&m, NODE_VOTES, &[release, ("outcome", "refused")]), 5);
    for series in matching(&m, NODE_VOTES, &[]) {
        assert_eq!(
            series.labels.get("server.address").map(String::as_str),
            Some("127.0.0.1")
        );
        assert!(series.labels.contains_key("server.port"), "{series:?}");
    }
    let latencies = values(&m, NODE_CALL_DURATION, &[acquire]);
    assert!(latencies.len() >= 5, "{latencies:?}");
    assert!(
        latencies.iter().all(|s| (0.0..1.0).contains(s)),
        "{latencies:?}"
    );
}

#[tokio::test]
async fn a_node_that_answers_after_the_round_was_decided_still_shows_in_the_votes() {
    record_into!(snapshotter);
    let cluster = cluster(5);
    let config = fast_config().with_node_timeout(Duration::from_millis(200));
    let redlock = redlock(&cluster.urls(), config);
    // Connections open first: a connection opened through the hung
    // proxy would fail on its own connect timeout instead.
    warm_up(&redlock).await;
    redlock.shutdown().await;
    take(&snapshotter);
    // One node hangs: the other four decide each round long before it
    // times out, so its every answer comes after the decision.
    cluster.set_proxy(4, ProxyMode::Blackhole);
    for _ in 0..3 {
        let guard = redlock
            .try_lock(&unique("metrics-late"), TTL)
            .await
            .unwrap();
        guard.release().await.unwrap();
    }
    redlock.shutdown().await;
    cluster.set_proxy(4, ProxyMode::Pass);

    let m = take(&snapshotter);
    let hung = port_of(&cluster.url(4));
    for op in ["acquire", "release"] {
        let timed_out = [
            ("server.port", hung.as_str()),
            ("db.operation.name", op),
            ("outcome", "timed_out"),
        ];
        assert_eq!(count(&m, NODE_VOTES, &timed_out), 3, "{op}: {m:#?}");
    }
    // The healthy nodes' answers are all there too, the decided rounds'
    // and the late ones alike: four per round and operation.
    for op in ["acquire", "release"] {
        let granted = [("db.operation.name", op), ("outcome", "granted")];
        assert_eq!(count(&m, NODE_VOTES, &granted), 4 * 3, "{op}: {m:#?}");
    }
}

#[tokio::test]
async fn a_misconfigured_node_shows_in_its_gauge() {
    record_into!(snapshotter);
    let cluster = cluster(3);
    let mut conn = cluster.connection(1).unwrap();
    let set: redis::RedisResult<()> = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("allkeys-lru")
        .query(&mut conn);
    set.unwrap();
    let redlock = redlock(&cluster.urls(), fast_config());
    assert!(redlock.check().await.is_err());
    let m = take(&snapshotter);
    let gauge = |i: usize| {
        let url = cluster.url(i);
        let port = url
            .trim_end_matches('/')
            .rsplit(':')
            .next()
            .unwrap()
            .to_owned();
        let labels = [("server.port", port.as_str())];
        let series: Vec<_> = matching(&m, NODE_MISCONFIGURED, &labels).collect();
        match series.as_slice() {
            [s] => match &s.value {
                DebugValue::Gauge(v) => v.into_inner(),
                other => panic!("{other:?}"),
            },
            other => panic!("node {i}: {other:#?}"),
        }
    };
    assert_eq!((gauge(0), gauge(1), gauge(2)), (0.0, 1.0, 0.0));
}

#[tokio::test]
async fn the_resource_label_is_there_only_when_asked_for() {
    record_into!(snapshotter);
    let nodes = nodes();
    let config = fast_config().with_metrics_resource_label(true);
    let redlock = redlock(&nodes.urls(), config);
    let resource = unique("metrics-label");
    let mut guard = redlock.try_lock(&resource, TTL).await.unwrap();
    guard.extend(TTL).await.unwrap();
    guard.release().await.unwrap();
    redlock.shutdown().await;
    let m = take(&snapshotter);
    let labelled = [("redquorum.resource", resource.as_str())];
    for name in [
        ACQUIRE_DURATION,
        WAIT_DURATION,
        ACQUIRE_ATTEMPTS,
        HOLD_DURATION,
        EXTENSION_MARGIN,
    ] {
        assert_eq!(values(&m, name, &labelled).len(), 1, "{name}: {m:#?}");
    }
    assert_eq!(count(&m, EXTENSIONS, &labelled), 1);
    // Node metrics never carry it.
    assert!(matching(&m, NODE_VOTES, &[]).all(|s| !s.labels.contains_key("redquorum.resource")));
}

#[test]
fn the_readme_and_the_module_docs_list_every_metric() {
    let readme = include_str!("../README.md");
    let names = [
        ACQUIRE_DURATION,
        WAIT_DURATION,
        ACQUIRE_ATTEMPTS,
        HOLD_DURATION,
        EXTENSIONS,
        EXTENSION_MARGIN,
        LOST,
        NODE_VOTES,
        NODE_CALL_DURATION,
        NODE_MISCONFIGURED,
        NODE_UP,
    ];
    for name in names {
        assert!(
            readme.contains(&format!("| `{name}` |")),
            "{name} missing from README.md"
        );
    }
    let rows = readme
        .lines()
        .filter(|l| l.starts_with("| `redquorum."))
        .count();
    assert_eq!(
        rows,
        names.len(),
        "README.md's metric table and the constants differ"
    );
}

#[tokio::test]
async fn a_quarantined_vote_is_counted_as_quarantined_and_the_attempt_as_unavailable() {
    record_into!(snapshotter);
    let cluster = cluster(3);
    // Nodes never marked trusted: each starts its quarantine at first contact.
    let config = fast_config()
        .with_retries(0)
        .with_quorum(3)
        .with_restart_guard(Duration::from_secs(600));
    let redlock = redlock(&cluster.urls(), config);
    let refused = redlock.try_lock(&unique("metrics-guard"), TTL / 20).await;
    assert!(refused.is_err());
    let m = take(&snapshotter);
    let quarantined = [("outcome", "quarantined")];
    assert!(count(&m, NODE_VOTES, &quarantined) >= 1, "{m:#?}");
    let unavailable = [("outcome", "unavailable")];
    assert_eq!(
        values(&m, ACQUIRE_DURATION, &unavailable).len(),
        1,
        "{m:#?}"
    );
    redlock.shutdown().await;
}
