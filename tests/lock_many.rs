//! Multi-resource locks against real nodes: all or nothing, no overlap on
//! any resource, no deadlock, one fencing token per resource.
#![cfg(feature = "testkit")]

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use redquorum::Error;
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_tasks_locking_overlapping_sets_never_overlap_on_any_resource_and_all_progress() {
    let nodes = nodes();
    let config = fast_config()
        .with_fencing(true)
        .with_retries(10_000)
        .with_retry_delay(Duration::from_millis(4))
        .with_retry_jitter(Duration::from_millis(4));
    let redlock = redlock(&nodes.urls(), config);
    let oracle = redquorum::testkit::Oracle::new(nodes.direct_urls(), redlock.quorum());
    let base = unique("many");
    let resources: Vec<String> = (0..5).map(|i| format!("{base}-{i}")).collect();
    let histories: Arc<HashMap<String, History>> = Arc::new(
        resources
            .iter()
            .map(|r| (r.clone(), History::default()))
            .collect(),
    );
    let tokens: Arc<Mutex<HashMap<String, Vec<u64>>>> = Arc::default();
    let run_until = Instant::now() + Duration::from_secs(3);
    let mut tasks = Vec::new();
    for worker in 0..8 {
        let oracle = oracle.clone();
        let (redlock, resources, histories, tokens) = (
            redlock.clone(),
            resources.clone(),
            Arc::clone(&histories),
            Arc::clone(&tokens),
        );
        tasks.push(tokio::spawn(async move {
            let mut held = 0u32;
            while Instant::now() < run_until {
                // Two or three resources, in a random order: callers that
                // lock overlapping sets in opposite orders must not deadlock.
                let first = rand::random_range(0..5usize);
                let count = rand::random_range(2..=3usize);
                let mut set: Vec<&str> = (0..count)
                    .map(|k| resources[(first + k * 2) % 5].as_str())
                    .collect();
                if rand::random::<bool>() {
                    set.reverse();
                }
                let guard = match redlock.lock(&set, Duration::from_millis(500)).await {
                    Ok(guard) => guard,
                    Err(e) => panic!("worker {worker}: {e}"),
                };
                let start = Instant::now();
                if let Err(violation) = oracle.check(&redlock, &guard).await {
                    panic!("worker {worker}: {violation}");
                }
                let got = guard.fencing_tokens().expect("fencing is on").to_vec();
                assert_eq!(got.len(), set.len());
                assert_eq!(guard.resources(), set.as_slice());
                {
                    let mut tokens = tokens.lock().unwrap_or_else(|p| p.into_inner());
                    for (resource, token) in set.iter().zip(got) {
                        tokens
                            .entry((*resource).to_owned())
                            .or_default()
                            .push(token);
                    }
                }
                tokio::time::sleep(Duration::from_millis(rand::random_range(0..3))).await;
                let valid_until = guard.valid_until();
                let released_at = Instant::now();
                let released = guard.release().await;
                assert!(released.is_ok(), "worker {worker}: {released:?}");
                for resource in &set {
                    histories[*resource].record(worker, start, valid_until, released_at);
                }
                held += 1;
            }
            held
        }));
    }
    let mut per_worker = Vec::new();
    for task in tasks {
        let done = tokio::time::timeout(Duration::from_secs(30), task).await;
        let held = done
            .unwrap_or_else(|_| panic!("a worker is stuck: deadlock?"))
            .unwrap_or_else(|e| panic!("worker: {e}"));
        per_worker.push(held);
    }
    println!("acquisitions per worker: {per_worker:?}");
    assert!(
        per_worker.iter().all(|&n| n > 0),
        "a worker starved: {per_worker:?}"
    );
    for (resource, history) in histories.iter() {
        let overlaps = history.overlaps();
        assert!(overlaps.is_empty(), "{resource}: {overlaps:?}");
    }
    // Each resource's tokens, in the order its holds happened, increase.
    for (resource, tokens) in tokens.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "{resource}: {tokens:?}"
        );
    }
    let urls = nodes.direct_urls();
    let clean = eventually(Duration::from_secs(5), || {
        resources
            .iter()
            .all(|r| urls.iter().all(|u| get(u, &key(r)).is_none()))
    })
    .await;
    assert!(clean, "lock keys left behind");
}

#[tokio::test]
async fn a_failed_lock_many_leaves_no_key_and_the_other_owners_key_untouched() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    for fencing in [false, true] {
        let redlock = redlock(
            &nodes.urls(),
            fast_config().with_fencing(fencing).with_retries(1),
        );
        let (a, b, c) = (unique("a"), unique("b"), unique("c"));
        // "b" held by someone else on a quorum of nodes.
        for url in &urls[..3] {
            set(url, &key(&b), "another-owner", Duration::from_secs(10));
        }
        let err = redlock
            .lock(&[&a, &b, &c], Duration::from_secs(5))
            .await
            .expect_err("b is held: the whole set must fail");
        assert!(
            matches!(&err, Error::NotAcquired(why) if why.reason() == redquorum::Reason::Contended),
            "{err}"
        );
        // The clean-up runs in the background; shutdown() waits for it.
        redlock.shutdown().await;
        for url in &urls {
            assert_eq!(get(url, &key(&a)), None, "fencing {fencing}: {url}");
            assert_eq!(get(url, &key(&c)), None, "fencing {fencing}: {url}");
            assert_eq!(get(url, &format!("redquorum:fence:{a}")), None);
        }
        for url in &urls[..3] {
            assert_eq!(get(url, &key(&b)).as_deref(), Some("another-owner"));
        }
        // Once "b" is free the same set is taken whole.
        for url in &urls[..3] {
            query::<()>(url, redis::cmd("DEL").arg(key(&b))).unwrap_or_else(|e| panic!("{e}"));
        }
        let guard = redlock
            .lock(&[&a, &b, &c], Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("lock_many: {e}"));
        for resource in [&a, &b, &c] {
            // The acquire returns at a quorum; the last SETs may land just after.
            let all = eventually(Duration::from_secs(5), || {
                holders(&urls, &key(resource), guard.value()) == 5
            })
            .await;
            assert!(all, "not held on all 5 nodes");
        }
        guard
            .release()
            .await
            .unwrap_or_else(|e| panic!("release: {e}"));
    }
}

#[tokio::test]
async fn each_resource_of_a_set_has_its_own_fencing_counter() {
    let nodes = nodes();
    let redlock = redlock(&nodes.urls(), fast_config().with_fencing(true));
    let (x, y) = (unique("x"), unique("y"));
    let take = async |set: &[&str]| {
        let guard = redlock
            .lock(set, Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("lock_many: {e}"));
        let tokens = guard.fencing_tokens().expect("fencing is on").to_vec();
        assert_eq!(guard.fencing_token(), tokens.first().copied());
        guard
            .release()
            .await
            .unwrap_or_else(|e| panic!("release: {e}"));
        tokens
    };
    assert_eq!(take(&[&x, &y]).await, [1, 1]);
    assert_eq!(take(&[&x]).await, [2]);
    assert_eq!(take(&[&x]).await, [3]);
    // Duplicates count once; the order given is the order of the tokens.
    assert_eq!(take(&[&y, &x, &y]).await, [2, 4]);
}

#[tokio::test]
async fn try_lock_many_is_refused_while_one_resource_is_locked_alone() {
    let nodes = nodes();
    let redlock = redlock(&nodes.urls(), fast_config().with_fencing(true));
    let (x, y) = (unique("x"), unique("y"));
    let single = redlock
        .try_lock(&y, Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("lock: {e}"));
    let err = redlock
        .try_lock(&[&x, &y], Duration::from_secs(5))
        .await
        .expect_err("y is held");
    assert!(
        matches!(&err, Error::NotAcquired(why) if why.attempts() == 1),
        "{err}"
    );
    single
        .release()
        .await
        .unwrap_or_else(|e| panic!("release: {e}"));
    let both = redlock
        .try_lock(&[&x, &y], Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("try_lock_many: {e}"));
    assert_eq!(both.fencing_tokens(), Some(&[1, 2][..]));
    both.release()
        .await
        .unwrap_or_else(|e| panic!("release: {e}"));
}
