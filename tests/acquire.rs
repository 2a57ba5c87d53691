//! Acquisition against real nodes: quorum arithmetic over every pattern of
//! pre-held nodes, dead, paused and slow nodes.
#![cfg(feature = "testkit")]

mod common;

use std::time::Duration;

use common::*;
use redquorum::testkit::ProxyMode;
use redquorum::{Error, NodeOutcome};
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn try_lock_succeeds_exactly_when_a_quorum_of_nodes_is_free_for_all_32_subsets() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    assert_eq!(urls.len(), 5, "this test needs five nodes");
    let redlock = redlock(&nodes.urls(), fast_config());
    for mask in 0u32..32 {
        let resource = unique("subset");
        let key = key(&resource);
        for (i, url) in urls.iter().enumerate() {
            if mask & (1 << i) != 0 {
                set(url, &key, "another-owner", TTL);
            }
        }
        let free = 5 - mask.count_ones() as usize;
        let result = redlock.try_lock(&resource, TTL).await;
        match (&result, free >= 3) {
            (Ok(guard), true) => {
                let on_free_nodes = settles_on(&urls, &key, guard.value(), free).await;
                assert!(on_free_nodes, "mask {mask:05b}");
            }
            (Err(Error::NotAcquired(attempts)), false) => {
                assert!(
                    attempts.reason() == redquorum::Reason::Contended,
                    "mask {mask:05b}: {attempts}"
                );
                // Decided as soon as 3 refusals made a quorum impossible.
                let held = attempts
                    .nodes()
                    .iter()
                    .filter(|n| *n.outcome() == redquorum::NodeOutcome::Refused)
                    .count();
                assert!(
                    (3..=5 - free).contains(&held),
                    "mask {mask:05b}: {attempts}"
                );
                // The failed attempt released what it took (in the
                // background, which shutdown() waits for): only the other
                // owner's keys remain, untouched.
                redlock.shutdown().await;
                for (i, url) in urls.iter().enumerate() {
                    let expect = (mask & (1 << i) != 0).then_some("another-owner");
                    assert_eq!(
                        get(url, &key).as_deref(),
                        expect,
                        "mask {mask:05b} node {i}"
                    );
                }
            }
            (other, expect) => panic!("mask {mask:05b}: expected success={expect}, got {other:?}"),
        }
        if let Ok(guard) = result {
            guard
                .release()
                .await
                .unwrap_or_else(|e| panic!("release: {e}"));
        }
        // The other owner's keys survive our release, and ours are gone
        // (release returns at quorum; the last deletes may land just after).
        for (i, url) in urls.iter().enumerate() {
            let expect = (mask & (1 << i) != 0).then_some("another-owner");
            let settled = eventually(Duration::from_secs(5), || {
                get(url, &key).as_deref() == expect
            })
            .await;
            assert!(
                settled,
                "after release, mask {mask:05b} node {i}: {:?}",
                get(url, &key)
            );
        }
    }
}

#[tokio::test]
async fn lock_survives_two_dead_nodes_and_reports_three_dead_nodes_by_name() {
    let cluster = cluster(5);
    let urls = cluster.urls();
    let redlock = redlock(&urls, fast_config());
    cluster.kill(1).unwrap();
    cluster.kill(3).unwrap();
    let guard = redlock
        .lock("two-dead", TTL)
        .await
        .expect("2 of 5 dead still leaves a quorum");
    assert!(
        settles_on(
            &[
                cluster.direct_url(0),
                cluster.direct_url(2),
                cluster.direct_url(4)
            ],
            &key("two-dead"),
            guard.value(),
            3
        )
        .await
    );
    guard.release().await.expect("release with a live quorum");

    cluster.kill(4).unwrap();
    let started = Instant::now();
    let err = redlock
        .lock("three-dead", TTL)
        .await
        .expect_err("3 of 5 dead leaves no quorum");
    let elapsed = started.elapsed();
    let Error::NotAcquired(attempts) = err else {
        panic!("expected NotAcquired, got {err:?}")
    };
    assert_eq!(
        attempts.attempts(),
        4,
        "first attempt plus 3 retries: {attempts}"
    );
    assert!(
        attempts.reason() == redquorum::Reason::Unavailable,
        "{attempts}"
    );
    assert!(
        attempts.reason() != redquorum::Reason::Contended,
        "{attempts}"
    );
    for dead in [1, 3, 4] {
        let report = &attempts.nodes()[dead];
        assert!(
            matches!(
                report.outcome(),
                NodeOutcome::Failed(_) | NodeOutcome::TimedOut
            ),
            "node {dead}: {report}"
        );
        assert!(
            urls[dead].contains(report.node()),
            "{} names {}",
            urls[dead],
            report.node()
        );
    }
    // Bounded by the retry budget: 4 attempts of at most 2 node timeouts
    // each, 3 pauses of at most 30 ms. A generous bound: this guards
    // against a hang, not a slow machine.
    assert!(elapsed < Duration::from_secs(10), "lock took {elapsed:?}");
}

#[tokio::test]
async fn paused_node_does_not_block_try_lock_and_release_cleans_it_after_resume() {
    let cluster = cluster(5);
    let config = fast_config().with_node_timeout(Duration::from_secs(2));
    let redlock = redlock(&cluster.urls(), config);
    // Open every connection first, so the paused node is paused mid-session.
    warm_up(&redlock).await;
    cluster.pause(2).unwrap();
    let started = Instant::now();
    let guard = redlock
        .try_lock("paused", TTL)
        .await
        .expect("4 of 5 answer");
    let took = started.elapsed();
    // Early decision: the paused node's 2 s timeout is not waited for.
    assert!(
        took < Duration::from_secs(1),
        "try_lock took {took:?} with one node paused"
    );
    let value = guard.value().to_owned();
    let released = guard.release().await;
    assert!(released.is_ok(), "{released:?}");
    cluster.resume(2).unwrap();
    // The SET queued on the paused node runs on resume; so does the release
    // queued after it on the same connection.
    let direct = cluster.direct_url(2);
    let clean = eventually(Duration::from_secs(5), || {
        get(&direct, &key("paused")).is_none()
    })
    .await;
    assert!(clean, "key {value} left on the resumed node");
}

#[tokio::test]
async fn slow_node_is_not_waited_for_and_its_late_set_is_cleaned_up_by_release() {
    let cluster = cluster(5);
    let redlock = redlock(
        &cluster.urls(),
        fast_config().with_node_timeout(Duration::from_secs(2)),
    );
    warm_up(&redlock).await;
    let delay = Duration::from_millis(300);
    cluster.set_proxy(4, ProxyMode::Delay(delay));
    let guard = redlock
        .try_lock("slow", TTL)
        .await
        .expect("4 fast nodes grant");
    let direct = cluster.direct_url(4);
    // The slow node has not even seen the SET yet: try_lock returned first.
    assert_eq!(
        get(&direct, &key("slow")),
        None,
        "try_lock waited for the slow node"
    );
    let value = guard.value().to_owned();
    assert!(
        eventually(Duration::from_secs(5), || get(&direct, &key("slow"))
            .as_deref()
            == Some(&value))
        .await,
        "the late SET never reached the slow node"
    );
    guard.release().await.expect("release");
    assert!(
        eventually(Duration::from_secs(5), || get(&direct, &key("slow"))
            .is_none())
        .await,
        "release left the late key on the slow node"
    );
}

#[tokio::test]
async fn a_node_down_at_start_is_a_failing_vote_and_is_used_once_it_comes_back() {
    let cluster = cluster(5);
    cluster.kill(0).unwrap();
    let redlock = redlock(&cluster.urls(), fast_config());
    let guard = redlock.try_lock("late-node", TTL).await.expect("4 of 5 up");
    guard.release().await.expect("release");
    cluster.restart(0).unwrap();
    let direct = cluster.direct_url(0);
    // The node's connection reopens by itself: within a few attempts the
    // lock lands on it again.
    let mut landed = false;
    for _ in 0..50 {
        let guard = redlock.try_lock("late-node", TTL).await.expect("all up");
        let value = guard.value().to_owned();
        landed = eventually(Duration::from_millis(300), || {
            get(&direct, &key("late-node")).as_deref() == Some(value.as_str())
        })
        .await;
        guard.release().await.expect("release");
        if landed {
            break;
        }
    }
    assert!(landed, "the restarted node never took part again");
}
