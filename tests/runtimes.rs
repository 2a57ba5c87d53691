//! A `Redlock` outliving the tokio runtime it was first used on (a shared
//! static in `#[tokio::test]`s, a sync wrapper that builds a runtime per
//! call) works on the next runtime as on the first; one used from several
//! runtimes at once (a runtime per thread, some of them idle) works on
//! each.
#![cfg(feature = "testkit")]

mod common;

use std::time::Duration;

use common::*;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn the_first_lock_on_a_second_runtime_is_granted_by_every_node() {
    let cluster = cluster(5);
    let redlock = redlock(&cluster.urls(), fast_config().with_retries(0));
    runtime().block_on(async {
        let guard = redlock
            .try_lock(&unique("first"), Duration::from_secs(5))
            .await
            .unwrap();
        guard.release().await.unwrap();
    });
    let resource = unique("second");
    runtime().block_on(async {
        let guard = redlock.try_lock(&resource, Duration::from_secs(5)).await;
        let guard = guard.unwrap_or_else(|e| panic!("first call on the new runtime: {e}"));
        let direct = cluster.direct_urls();
        let everywhere = settles_on(&direct, &key(&resource), guard.value(), 5).await;
        assert!(everywhere, "not every node granted the lock");
        guard.release().await.unwrap();
        redlock.shutdown().await;
    });
}

#[test]
fn a_guard_taken_on_one_runtime_is_released_from_the_next() {
    let cluster = cluster(5);
    let redlock = redlock(&cluster.urls(), fast_config());
    let resource = unique("carried");
    let guard = runtime().block_on(async {
        redlock
            .lock(&resource, Duration::from_secs(30))
            .await
            .unwrap()
    });
    runtime().block_on(async {
        let released = guard.release().await;
        assert!(released.is_ok(), "{released:?}");
        redlock.shutdown().await;
    });
    assert_eq!(holders_any(&cluster.direct_urls(), &key(&resource)), 0);
}

#[test]
fn a_guard_taken_on_an_idle_runtime_that_lives_on_is_released_from_another() {
    // A sync wrapper that keeps one current-thread runtime per thread: the
    // first runtime is still alive but nothing drives it while the second
    // one releases.
    let cluster = cluster(5);
    let redlock = redlock(&cluster.urls(), fast_config().with_retries(0));
    let resource = unique("idle-first");
    let first = runtime();
    let guard = first.block_on(async {
        redlock
            .try_lock(&resource, Duration::from_secs(30))
            .await
            .unwrap()
    });
    let second = runtime();
    second.block_on(async {
        let released = guard.release().await;
        assert!(
            released.is_ok(),
            "release from the second runtime: {released:?}"
        );
        let again = redlock
            .try_lock(&unique("idle-second"), Duration::from_secs(5))
            .await;
        let again = again.unwrap_or_else(|e| panic!("lock on the second runtime: {e}"));
        again.release().await.unwrap();
        redlock.shutdown().await;
    });
    assert_eq!(holders_any(&cluster.direct_urls(), &key(&resource)), 0);
    drop(first);
}
