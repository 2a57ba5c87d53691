//! Extensions of many locks due together reach each node in one call per
//! batch, and a batch extends exactly the locks that are ours: a lock
//! another owner took over in the meantime is reported gone and its key
//! left untouched, a key a node lost is put back only with re-seeding on,
//! and with the restart guard on the batch announces the quarantine.
#![cfg(feature = "testkit")]

mod common;

use std::time::Duration;

use common::*;
use futures::StreamExt;
use redquorum::testkit::LocalCluster;
use redquorum::{Config, Error, LockGuard, Redlock};
use tokio::time::Instant;

/// One node's `EVALSHA` calls and the `PEXPIRE` calls its scripts made
/// since its last `CONFIG RESETSTAT`: an extension to a TTL longer than
/// what is left raises each key's with one `PEXPIRE`, so the second
/// counts locks extended there.
fn calls(url: &str) -> (u64, u64) {
    let info: redis::InfoDict = match query(url, redis::cmd("INFO").arg("commandstats")) {
        Ok(info) => info,
        Err(e) => panic!("INFO commandstats: {e}"),
    };
    let count = |command: &str| -> u64 {
        let line: String = info.get(&format!("cmdstat_{command}")).unwrap_or_default();
        line.split(',')
            .find_map(|part| part.strip_prefix("calls="))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (count("evalsha"), count("pexpire"))
}

fn reset_stats(urls: &[String]) {
    for url in urls {
        if let Err(e) = query::<()>(url, redis::cmd("CONFIG").arg("RESETSTAT")) {
            panic!("CONFIG RESETSTAT: {e}");
        }
    }
}

fn pttl(url: &str, key: &str) -> i64 {
    query(url, redis::cmd("PTTL").arg(key)).unwrap_or(-3)
}

async fn take(redlock: &Redlock, resource: &str, ttl: Duration) -> LockGuard {
    match redlock.try_lock(resource, ttl).await {
        Ok(guard) => guard,
        Err(e) => panic!("{resource}: {e}"),
    }
}

async fn release(guards: impl IntoIterator<Item = LockGuard>) {
    for guard in guards {
        let _ = guard.release().await;
    }
}

/// Three locks of 10 s on five nodes, with the client `redlock`.
async fn three(redlock: &Redlock) -> [LockGuard; 3] {
    let prefix = unique("batched");
    let ttl = Duration::from_secs(10);
    [
        take(redlock, &format!("{prefix}:a"), ttl).await,
        take(redlock, &format!("{prefix}:b"), ttl).await,
        take(redlock, &format!("{prefix}:c"), ttl).await,
    ]
}

/// Extends the three locks to a minute at the same instant: one batch
/// per node (once each node's call of the locks' last round is over,
/// which the pause first waits for). Returns each extension's result.
async fn extend_together(guards: &mut [LockGuard; 3]) -> [redquorum::Result<()>; 3] {
    let minute = Duration::from_secs(60);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let [a, b, c] = guards;
    let (a, b, c) = futures::join!(a.extend(minute), b.extend(minute), c.extend(minute));
    [a, b, c]
}

/// The three extensions of `extend_together`, on a plain client or one
/// with the restart guard: the foreign lock is refused, its key unchanged,
/// the others extended, all in one call per node.
async fn a_batch_extends_only_the_locks_that_are_ours(cluster: &LocalCluster, redlock: Redlock) {
    let urls = cluster.direct_urls();
    let mut guards = three(&redlock).await;
    // The nodes learn the batched script (a first batch: NOSCRIPT, then
    // sent again), so that what is counted next is one batch alone.
    for result in extend_together(&mut guards).await {
        assert!(result.is_ok(), "{result:?}");
    }
    // Another owner took the middle lock over on every node.
    let taken_over = key(guards[1].resource());
    for url in &urls {
        set(url, &taken_over, "someone else", Duration::from_secs(5));
    }
    reset_stats(&urls);
    let [a, b, c] = extend_together(&mut guards).await;
    assert!(a.is_ok() && c.is_ok(), "{a:?} {c:?}");
    assert!(matches!(b, Err(Error::Expired)), "{b:?}");
    for url in &urls {
        let (evalsha, raised) = calls(url);
        assert_eq!(
            (evalsha, raised),
            (1, 2),
            "{url}: one call carried both of ours"
        );
        assert_eq!(get(url, &taken_over).as_deref(), Some("someone else"));
        assert!(
            pttl(url, &taken_over) <= 5_000,
            "the foreign lock was extended"
        );
        for ours in [&guards[0], &guards[2]] {
            assert!(
                pttl(url, &key(ours.resource())) > 50_000,
                "{url}: not extended"
            );
        }
    }
    release(guards).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extensions_at_the_same_instant_share_one_call_per_node_and_spare_a_foreign_lock() {
    let cluster = cluster(5);
    let redlock = redlock(&cluster.direct_urls(), fast_config());
    warm_up(&redlock).await;
    a_batch_extends_only_the_locks_that_are_ours(&cluster, redlock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_behind_the_restart_guard_extends_the_same_way() {
    let cluster = cluster(5);
    let redlock = guarded(&cluster, fast_config()).await;
    warm_up(&redlock).await;
    a_batch_extends_only_the_locks_that_are_ours(&cluster, redlock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_puts_a_lost_key_back_only_with_re_seeding_on() {
    let cluster = cluster(5);
    let urls = cluster.direct_urls();
    for reseed in [false, true] {
        let config = fast_config().with_reseed_restarted_nodes(reseed);
        let redlock = redlock(&urls, config);
        warm_up(&redlock).await;
        let mut guards = three(&redlock).await;
        for result in extend_together(&mut guards).await {
            assert!(result.is_ok(), "reseed {reseed}, first batch: {result:?}");
        }
        // Node 0 lost the first lock's key (as a restarted node would).
        let lost = key(guards[0].resource());
        let _: i64 = query(&urls[0], redis::cmd("DEL").arg(&lost)).unwrap_or(0);
        reset_stats(&urls);
        for result in extend_together(&mut guards).await {
            assert!(result.is_ok(), "reseed {reseed}: {result:?}");
        }
        assert_eq!(calls(&urls[1]).0, 1, "one call per node");
        // A round re-seeds the nodes whose "missing" came before its
        // decision: node 0 may answer after the quorum did, so a few
        // rounds more.
        let is_back =
            |guards: &[LockGuard; 3]| get(&urls[0], &lost).as_deref() == Some(guards[0].value());
        let mut back = is_back(&guards);
        for _ in 0..10 {
            if back {
                break;
            }
            for result in extend_together(&mut guards).await {
                assert!(result.is_ok(), "reseed {reseed}: {result:?}");
            }
            back = is_back(&guards);
        }
        assert_eq!(back, reseed, "re-seeding {reseed}");
        release(guards).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_extended_locks_due_together_are_extended_in_batches() {
    // A node timeout of a second: a debug build on a loaded machine.
    let config = Config::default().with_node_timeout(Duration::from_secs(1));
    let cluster = cluster(5);
    let urls = cluster.direct_urls();
    let redlock = redlock(&urls, config);
    warm_up(&redlock).await;
    let (count, ttl) = (300, Duration::from_secs(3));
    let prefix = unique("batched-auto");
    let guards: Vec<LockGuard> = futures::stream::iter(0..count)
        .map(|i| {
            let (redlock, resource) = (redlock.clone(), format!("{prefix}:{i}"));
            async move {
                let mut guard = take(&redlock, &resource, ttl).await;
                guard.auto_extend();
                guard
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    reset_stats(&urls);
    // Each watchdog extends with a third of the TTL left; a lock valid
    // past this instant + TTL was extended since the counts were reset
    // (the drift allowance keeps an extension begun before below it).
    let reset = Instant::now();
    let extended = eventually(Duration::from_secs(10), || {
        guards.iter().all(|g| g.valid_until() > reset + ttl)
    })
    .await;
    assert!(extended, "every lock extended");
    let (evalsha, raised) = calls(&urls[0]);
    assert!(raised >= count, "{raised} extensions on node 0");
    // One call per lock before batching; the grid's step here is 10 ms.
    assert!(
        evalsha * 4 <= raised,
        "{evalsha} calls carried {raised} extensions"
    );
    release(guards).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_whose_acl_predates_batches_still_extend_each_lock_on_its_own() {
    // The documented user as it was before batches: no MGET.
    let cluster = cluster(5);
    let all: Vec<usize> = (0..cluster.len()).collect();
    let before: Vec<String> = (common::acl::documented("core").into_iter())
        .filter(|arg| arg != "+mget")
        .collect();
    common::acl::setuser(&cluster, &all, &before);
    let urls = common::acl::locker_urls(&cluster);
    let redlock = redlock(&urls, fast_config());
    let mut guards = three(&redlock).await;
    for result in extend_together(&mut guards).await {
        assert!(result.is_ok(), "{result:?}");
    }
    // Every node raises each TTL, the slowest after the round's quorum.
    let direct = cluster.direct_urls();
    let raised = eventually(Duration::from_secs(5), || {
        (guards.iter()).all(|g| {
            direct
                .iter()
                .all(|url| pttl(url, &key(g.resource())) > 50_000)
        })
    })
    .await;
    assert!(raised, "a node kept a lock's old TTL");
    release(guards).await;
}
