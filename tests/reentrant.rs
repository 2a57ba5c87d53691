//! Reentrant holds against real nodes: the same owner nests, others wait
//! for the last release, plain and reentrant locks exclude each other, and
//! a minority of dead nodes changes nothing.
#![cfg(feature = "testkit")]

mod common;

use std::time::Duration;

use common::*;
use redquorum::testkit::LocalCluster;
use redquorum::{Error, LockOptions, Redlock};

const TTL: Duration = Duration::from_secs(10);

/// A reentrant hold for `owner`, with the config's retries.
fn held_by(owner: &str) -> LockOptions {
    LockOptions::new().owner(owner)
}

/// One attempt at a reentrant hold for `owner`.
fn once_by(owner: &str) -> LockOptions {
    held_by(owner).wait(redquorum::Wait::No)
}

/// `n` local nodes with `appendonly yes` and `appendfsync always`: a
/// restart keeps every acknowledged write.
fn aof_cluster(n: usize) -> LocalCluster {
    let cluster = cluster(n);
    for i in 0..n {
        cluster
            .enable_aof(i)
            .unwrap_or_else(|e| panic!("AOF on node {i}: {e}"));
    }
    cluster
}

/// The hold count of the reentrant lock of `resource` on the node at `url`.
fn count(url: &str, resource: &str) -> Option<String> {
    query(url, redis::cmd("HGET").arg(key(resource)).arg("count"))
        .unwrap_or_else(|e| panic!("HGET on {url}: {e}"))
}

fn refused(result: redquorum::Result<redquorum::LockGuard>, what: &str) {
    match result {
        // Contended; or, with nodes dead, unavailable when their errors
        // decided the attempt before enough holders had refused.
        Err(Error::NotAcquired(why)) => assert!(
            why.reason() == redquorum::Reason::Contended
                || why.reason() == redquorum::Reason::Unavailable
                    && why
                        .nodes()
                        .iter()
                        .filter(|n| *n.outcome() == redquorum::NodeOutcome::Refused)
                        .count()
                        > 0,
            "{what}: {why}"
        ),
        other => panic!("{what}: expected a refusal, got {other:?}"),
    }
}

/// Three holds by `owner`, three releases; `other` and a plain lock are
/// refused until the last release.
async fn nest_three_deep(redlock: &Redlock, urls: &[String], live: &[usize]) {
    let resource = unique("nested");
    let mut guards = Vec::new();
    for depth in 1..=3 {
        let guard = redlock
            .lock_with(&resource, TTL, &held_by("owner-a"))
            .await
            .unwrap_or_else(|e| panic!("hold {depth}: {e}"));
        guards.push(guard);
        let counts = eventually(Duration::from_secs(5), || {
            live.iter()
                .all(|&i| count(&urls[i], &resource) == Some(depth.to_string()))
        })
        .await;
        assert!(counts, "count not {depth} on every live node");
    }
    while let Some(guard) = guards.pop() {
        refused(
            redlock.lock_with(&resource, TTL, &once_by("owner-b")).await,
            "another owner while held",
        );
        refused(
            redlock.try_lock(&resource, TTL).await,
            "a plain lock while held",
        );
        guard
            .release()
            .await
            .unwrap_or_else(|e| panic!("release at depth {}: {e}", guards.len() + 1));
    }
    let freed = eventually(Duration::from_secs(5), || {
        live.iter()
            .all(|&i| get_type(&urls[i], &key(&resource)) == "none")
    })
    .await;
    assert!(freed, "the lock key survived the last release");
    let other = redlock
        .lock_with(&resource, TTL, &once_by("owner-b"))
        .await
        .unwrap_or_else(|e| panic!("owner-b after the last release: {e}"));
    other
        .release()
        .await
        .unwrap_or_else(|e| panic!("release: {e}"));
}

fn get_type(url: &str, key: &str) -> String {
    query(url, redis::cmd("TYPE").arg(key)).unwrap_or_else(|e| panic!("TYPE on {url}: {e}"))
}

#[tokio::test]
async fn the_same_owner_nests_three_holds_and_others_wait_for_the_third_release() {
    let nodes = nodes();
    let redlock = redlock(&nodes.urls(), fast_config().with_retries(2));
    nest_three_deep(&redlock, &nodes.direct_urls(), &[0, 1, 2, 3, 4]).await;
}

#[tokio::test]
async fn reentrant_holds_work_with_two_of_five_nodes_dead() {
    let cluster = cluster(5);
    cluster.kill(1).unwrap_or_else(|e| panic!("kill: {e}"));
    cluster.kill(3).unwrap_or_else(|e| panic!("kill: {e}"));
    let redlock = redlock(&cluster.urls(), fast_config().with_retries(2));
    nest_three_deep(&redlock, &cluster.direct_urls(), &[0, 2, 4]).await;
}

#[tokio::test]
async fn a_plain_lock_keeps_reentrant_owners_out_and_is_not_touched_by_them() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), fast_config().with_retries(0));
    let resource = unique("plain-first");
    let plain = redlock
        .try_lock(&resource, TTL)
        .await
        .unwrap_or_else(|e| panic!("lock: {e}"));
    refused(
        redlock.lock_with(&resource, TTL, &once_by("owner-a")).await,
        "reentrant while a plain lock is held",
    );
    // The acquire returns at a quorum; the last SETs may land just after.
    let all = eventually(Duration::from_secs(5), || {
        holders(&urls, &key(&resource), plain.value()) == 5
    })
    .await;
    assert!(all, "not held on all 5 nodes");
    plain
        .release()
        .await
        .unwrap_or_else(|e| panic!("release: {e}"));
}

#[tokio::test]
async fn an_empty_owner_is_an_invalid_argument() {
    let redlock = redlock(&["redis://127.0.0.1:1/".to_owned()], fast_config());
    match redlock.lock_with("resource", TTL, &held_by("")).await {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("owner"), "{why}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    match redlock.lock_with("", TTL, &once_by("owner")).await {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("resource"), "{why}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

#[tokio::test]
async fn a_hold_a_node_never_saw_is_not_taken_from_it_on_release() {
    // Counts differ between nodes after a partial failure: the node that
    // missed the inner hold must keep the outer one when the inner is released.
    let cluster = aof_cluster(5);
    let urls = cluster.direct_urls();
    let redlock = redlock(&cluster.urls(), fast_config().with_retries(2));
    let resource = unique("diverged");
    let outer = redlock
        .lock_with(&resource, TTL, &held_by("owner-a"))
        .await
        .unwrap_or_else(|e| panic!("outer: {e}"));
    let all_one = eventually(Duration::from_secs(5), || {
        urls.iter()
            .all(|u| count(u, &resource).as_deref() == Some("1"))
    })
    .await;
    assert!(all_one);
    cluster.kill(4).unwrap_or_else(|e| panic!("kill: {e}"));
    let inner = redlock
        .lock_with(&resource, TTL, &held_by("owner-a"))
        .await
        .unwrap_or_else(|e| panic!("inner: {e}"));
    // Back with its data (AOF): the outer hold only.
    cluster
        .restart_with_aof(4)
        .unwrap_or_else(|e| panic!("restart: {e}"));
    assert_eq!(count(&urls[4], &resource).as_deref(), Some("1"));
    assert_eq!(count(&urls[0], &resource).as_deref(), Some("2"));
    inner
        .release()
        .await
        .unwrap_or_else(|e| panic!("inner release: {e}"));
    let settled = eventually(Duration::from_secs(5), || {
        urls.iter()
            .all(|u| count(u, &resource).as_deref() == Some("1"))
    })
    .await;
    assert!(
        settled,
        "counts after the inner release: {:?}",
        urls.iter().map(|u| count(u, &resource)).collect::<Vec<_>>()
    );
    outer
        .release()
        .await
        .unwrap_or_else(|e| panic!("outer release: {e}"));
    let freed = eventually(Duration::from_secs(5), || {
        urls.iter().all(|u| get_type(u, &key(&resource)) == "none")
    })
    .await;
    assert!(freed);
}

#[tokio::test]
async fn an_inner_hold_with_a_short_ttl_does_not_shorten_the_outer_one() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), fast_config());
    let resource = unique("ttl");
    let outer = redlock
        .lock_with(&resource, TTL, &held_by("owner-a"))
        .await
        .unwrap_or_else(|e| panic!("outer: {e}"));
    let mut inner = redlock
        .lock_with(&resource, Duration::from_millis(1500), &held_by("owner-a"))
        .await
        .unwrap_or_else(|e| panic!("inner: {e}"));
    // Short against the outer TTL, yet long enough to keep validity on a
    // loaded machine.
    inner
        .extend(Duration::from_millis(1000))
        .await
        .unwrap_or_else(|e| panic!("extend: {e}"));
    let pttl = |url: &String| -> i64 {
        query(url, redis::cmd("PTTL").arg(key(&resource))).unwrap_or_else(|e| panic!("PTTL: {e}"))
    };
    // Calls still in flight at the early decision land within moments.
    let long = eventually(Duration::from_secs(5), || {
        urls.iter().all(|u| pttl(u) > 5_000)
    })
    .await;
    assert!(long, "{:?}", urls.iter().map(pttl).collect::<Vec<_>>());
    inner
        .release()
        .await
        .unwrap_or_else(|e| panic!("inner: {e}"));
    assert!(outer.remaining() > Duration::from_secs(5));
    outer
        .release()
        .await
        .unwrap_or_else(|e| panic!("outer: {e}"));
}

#[tokio::test]
async fn a_dropped_reentrant_guard_removes_only_its_own_hold() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), fast_config());
    let resource = unique("drop");
    let outer = redlock
        .lock_with(&resource, TTL, &held_by("owner-a"))
        .await
        .unwrap_or_else(|e| panic!("outer: {e}"));
    let inner = redlock
        .lock_with(&resource, TTL, &held_by("owner-a"))
        .await
        .unwrap_or_else(|e| panic!("inner: {e}"));
    assert!(inner.value().starts_with("r:"));
    drop(inner);
    let one = eventually(Duration::from_secs(5), || {
        urls.iter()
            .all(|u| count(u, &resource).as_deref() == Some("1"))
    })
    .await;
    assert!(one, "the dropped hold was not removed, or more was");
    refused(
        redlock.lock_with(&resource, TTL, &once_by("owner-b")).await,
        "another owner while the outer hold remains",
    );
    outer
        .release()
        .await
        .unwrap_or_else(|e| panic!("outer: {e}"));
}

#[tokio::test]
async fn releasing_an_inner_hold_with_a_longer_ttl_leaves_the_key_with_the_outer_holds_expiry() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), fast_config());
    let resource = unique("inner-long");
    let short = Duration::from_secs(2);
    let outer = redlock
        .lock_with(&resource, short, &held_by("owner-a"))
        .await
        .unwrap_or_else(|e| panic!("outer: {e}"));
    let inner = redlock
        .lock_with(&resource, Duration::from_secs(60), &held_by("owner-a"))
        .await
        .unwrap_or_else(|e| panic!("inner: {e}"));
    inner
        .release()
        .await
        .unwrap_or_else(|e| panic!("inner: {e}"));
    let pttl = |url: &String| -> i64 {
        query(url, redis::cmd("PTTL").arg(key(&resource))).unwrap_or_else(|e| panic!("PTTL: {e}"))
    };
    // Every node (the slower ones a moment after the quorum) is back to
    // the outer hold's expiry: were the outer holder to die now, the lock
    // would be free after about 2 s, not 60 s.
    let refitted = eventually(Duration::from_secs(5), || {
        urls.iter()
            .all(|u| (0..=short.as_millis() as i64).contains(&pttl(u)))
    })
    .await;
    assert!(refitted, "{:?}", urls.iter().map(pttl).collect::<Vec<_>>());
    assert!(outer.remaining() > Duration::ZERO);
    outer
        .release()
        .await
        .unwrap_or_else(|e| panic!("outer: {e}"));
}
