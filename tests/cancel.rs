//! Cancel safety: a dropped `lock()` future and a dropped guard leave no key.
#![cfg(feature = "testkit")]

mod common;

use std::time::Duration;

use common::*;
use redquorum::testkit::ProxyMode;

const TTL: Duration = Duration::from_secs(30);

#[tokio::test]
async fn lock_future_dropped_by_a_tiny_timeout_leaves_no_key() {
    let cluster = cluster(5);
    let urls = cluster.direct_urls();
    let redlock = redlock(
        &cluster.urls(),
        fast_config().with_node_timeout(Duration::from_secs(2)),
    );
    warm_up(&redlock).await;
    // Slow every node so the SETs are in flight when the timeout fires.
    for i in 0..5 {
        cluster.set_proxy(i, ProxyMode::Delay(Duration::from_millis(40)));
    }
    for round in 0..10 {
        let resource = format!("cancelled-{round}");
        let limit = Duration::from_millis(5 + round * 9);
        let outcome = tokio::time::timeout(limit, redlock.lock(&resource, TTL)).await;
        if let Ok(Ok(guard)) = outcome {
            guard.release().await.expect("release");
        }
        let key = key(&resource);
        let clean = eventually(Duration::from_secs(3), || {
            urls.iter().all(|u| get(u, &key).is_none())
        })
        .await;
        assert!(
            clean,
            "round {round}: key left behind: {:?}",
            urls.iter().map(|u| get(u, &key)).collect::<Vec<_>>()
        );
    }
}

#[tokio::test]
async fn dropped_guard_releases_its_keys_shortly_after() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), fast_config());
    let resource = unique("dropped");
    let guard = redlock.try_lock(&resource, TTL).await.unwrap();
    let value = guard.value().to_owned();
    assert!(settles_on(&urls, &key(&resource), &value, urls.len()).await);
    drop(guard);
    let clean = eventually(Duration::from_secs(5), || {
        holders(&urls, &key(&resource), &value) == 0
    })
    .await;
    assert!(clean, "dropped guard left its keys until the TTL");
    // And the lock is free for the next caller right away.
    let next = redlock
        .try_lock(&resource, TTL)
        .await
        .expect("free after drop");
    next.release().await.expect("release");
}

#[tokio::test]
async fn guard_dropped_outside_any_runtime_does_not_panic_and_keys_expire() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), fast_config());
    let resource = unique("no-runtime");
    let guard = redlock
        .try_lock(&resource, Duration::from_millis(300))
        .await
        .unwrap();
    let value = guard.value().to_owned();
    // Drop on a plain thread: no runtime to spawn the release on.
    std::thread::spawn(move || drop(guard))
        .join()
        .expect("drop panicked");
    let expired = eventually(Duration::from_secs(3), || {
        holders(&urls, &key(&resource), &value) == 0
    })
    .await;
    assert!(expired);
}
