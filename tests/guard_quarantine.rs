#![cfg(feature = "testkit")]
//! The restart guard's quarantine with clients that do not agree on it:
//! a client whose `max_ttl` differs from the one the nodes keep must never
//! share a lock with a holder, even after a majority of the nodes restarted
//! empty.

mod common;

use std::time::Duration;

use redquorum::testkit::{LocalCluster, ProxyMode};
use redquorum::{Config, Error, NodeOutcome, NodeProblem, Redlock};
use tokio::time::Instant;

/// The longer `max_ttl`, used by the holder.
const LONG: Duration = Duration::from_secs(20);
/// The shorter `max_ttl` of the misconfigured client.
const SHORT: Duration = Duration::from_millis(300);

fn guarded(max_ttl: Duration) -> Config {
    common::fast_config()
        .with_retries(0)
        .with_restart_guard(max_ttl)
}

fn fresh(cluster: &LocalCluster, config: Config) -> Redlock {
    common::redlock(&cluster.urls(), config)
}

/// Tries `redlock` on `resource` every 50 ms for `wait`; the error of the
/// last attempt, or a panic naming `who` (and the nodes of `urls` that
/// granted it) if it ever got the lock.
async fn never_granted(
    (redlock, who): (&Redlock, &str),
    resource: &str,
    wait: Duration,
    urls: &[String],
) -> Error {
    let give_up = Instant::now() + wait;
    loop {
        match redlock.try_lock(resource, Duration::from_millis(200)).await {
            Ok(guard) => panic!(
                "{who} got the lock, on nodes {:?}",
                common::holding(urls, &common::key(resource), guard.value())
            ),
            Err(e) if Instant::now() >= give_up => return e,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// The scenario: a holder with `max_ttl` 20 s holds nodes 0 and 1
/// (node 2 was down when it locked); nodes 2 and 1 restart empty; a client
/// with `max_ttl` 300 ms, and then a fresh one, try the lock for well past
/// their own quarantine. Neither may get it while the first still holds
/// it. With one `max_ttl` everywhere the same faults are refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_a_shorter_max_ttl_never_shares_a_lock_after_a_majority_restarted_empty() {
    let cluster = common::cluster(3);
    let resource = common::unique("guard-mix");
    let holder = common::guarded(&cluster, guarded(LONG)).await;
    cluster.kill(2).expect("kill node 2");
    let held = holder
        .try_lock(&resource, LONG)
        .await
        .expect("lock on 0 and 1");
    let urls = cluster.direct_urls();
    let key = common::key(&resource);
    assert_eq!(common::holding(&urls[..2], &key, held.value()), [0, 1]);

    cluster.restart_empty(2).expect("restart node 2");
    cluster.restart_empty(1).expect("restart node 1");

    let short = fresh(&cluster, guarded(SHORT));
    let wait = SHORT * 5;
    let _ = never_granted((&short, "the 300 ms client"), &resource, wait, &urls).await;
    // 440 ms and more after the restarts: a client that never met the
    // nodes before.
    let late = fresh(&cluster, guarded(SHORT));
    let _ = never_granted((&late, "a fresh 300 ms client"), &resource, wait, &urls).await;
    let same = fresh(&cluster, guarded(LONG));
    let _ = never_granted((&same, "a 20 s client"), &resource, SHORT * 2, &urls).await;

    assert!(
        held.remaining() > Duration::from_secs(5),
        "{:?}",
        held.remaining()
    );

    // The mismatch is a typed misconfiguration that names both values,
    // not retried, and check() fails on it.
    let (long_q, short_q) = (quarantine(LONG), quarantine(SHORT));
    let retried = fresh(&cluster, guarded(SHORT).with_retries(10));
    match retried.lock(&resource, SHORT).await {
        Err(Error::NotAcquired(why)) => {
            assert_eq!(why.attempts(), 1, "{why}");
            assert!(
                why.reason() == redquorum::Reason::Misconfigured
                    && why.reason() != redquorum::Reason::Unavailable,
                "{why}"
            );
            let mismatch = NodeOutcome::QuarantineMismatch {
                kept: long_q,
                ours: short_q,
            };
            let outcomes: Vec<&NodeOutcome> = why.nodes().iter().map(|r| r.outcome()).collect();
            assert!(
                outcomes.iter().filter(|o| ***o == mismatch).count() >= 2
                    && outcomes
                        .iter()
                        .all(|o| **o == mismatch || **o == NodeOutcome::Pending),
                "{why}"
            );
            let text = why.to_string();
            assert!(text.contains("20.202s") && text.contains("305ms"), "{text}");
        }
        other => panic!("expected a quarantine mismatch, got {other:?}"),
    }
    match retried.check().await {
        Err(Error::Misconfigured(problems)) => assert!(
            problems.iter().any(
                |p| matches!(p, NodeProblem::QuarantineMismatch { kept, ours, .. }
                    if *kept == long_q && *ours == short_q)
            ),
            "{problems:?}"
        ),
        other => panic!("expected check() to fail on the mismatch, got {other:?}"),
    }
    fresh(&cluster, guarded(LONG))
        .check()
        .await
        .expect("with the holder's value: quarantines, which are warnings");
    drop(held.release().await);
}

fn quarantine(max_ttl: Duration) -> Duration {
    guarded(max_ttl).quarantine().expect("guard on")
}

/// Extensions announce the quarantine too: a holder's extension that
/// meets nodes restarted empty gives them its quarantine (it also finds its
/// lock gone there), so a client with a shorter one gets no vote from them
/// afterwards, even with the one node that still remembers the longer value
/// out of its reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holders_extension_gives_restarted_nodes_its_quarantine() {
    let cluster = common::cluster(3);
    let resource = common::unique("guard-extend");
    let holder = common::guarded(&cluster, guarded(LONG)).await;
    cluster.kill(2).expect("kill node 2");
    let mut held = holder
        .try_lock(&resource, LONG)
        .await
        .expect("lock on 0 and 1");
    cluster.restart_empty(2).expect("restart node 2");
    cluster.restart_empty(1).expect("restart node 1");
    // The first call on a connection the restart broke may fail unsent:
    // extend until the nodes have answered that the key is gone.
    let mut gone = false;
    for _ in 0..5 {
        match held.extend(LONG).await {
            Err(Error::Expired) => {
                gone = true;
                break;
            }
            Err(Error::NotAcquired(_)) => {}
            other => panic!("the key is gone from nodes 1 and 2, yet: {other:?}"),
        }
    }
    assert!(gone, "the extension never found the key gone");
    cluster.set_proxy(0, ProxyMode::Blackhole);

    let urls = cluster.direct_urls();
    let other = common::unique("guard-extend-other");
    let short = fresh(&cluster, guarded(SHORT));
    let _ = never_granted((&short, "the 300 ms client"), &other, SHORT * 5, &urls).await;
    cluster.set_proxy(0, ProxyMode::Pass);
    drop(held.release().await);
}

/// The library's side of `redquorum set-quarantine`: every node keeps this
/// client's quarantine afterwards, and it needs the guard on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_node_quarantine_makes_every_node_keep_this_clients_quarantine() {
    let cluster = common::cluster(3);
    drop(common::guarded(&cluster, guarded(LONG)).await);
    let short = fresh(&cluster, guarded(SHORT));
    assert!(matches!(short.check().await, Err(Error::Misconfigured(_))));
    let reports = short.set_node_quarantine().await.expect("guard on");
    assert!(
        reports
            .iter()
            .all(|r| *r.outcome() == redquorum::NodeOutcome::Granted),
        "{reports:?}"
    );
    short
        .check()
        .await
        .expect("every node keeps the short quarantine");
    let resource = common::unique("guard-set");
    let held = short.try_lock(&resource, SHORT).await.expect("lock");
    held.release().await.expect("release");

    let off = fresh(&cluster, common::fast_config());
    match off.set_node_quarantine().await {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("restart guard"), "{why}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}
