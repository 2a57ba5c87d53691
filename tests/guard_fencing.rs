#![cfg(feature = "testkit")]
//! The restart guard with fencing: after clean restarts (AOF `always`,
//! counters intact) of more nodes than a quorum can spare, a resource not
//! fenced between the restarts cannot issue a token until its counters are
//! vouched for; `lock()` says so at once instead of retrying.

mod common;

use std::time::Duration;

use redquorum::testkit::LocalCluster;
use redquorum::{Config, Error, LockOptions, Redlock};

const MAX_TTL: Duration = Duration::from_millis(300);

fn config() -> Config {
    common::fast_config()
        .with_retries(5)
        .with_restart_guard(MAX_TTL)
}

/// Three nodes with AOF `always`, one fenced lock of `resource` taken and
/// released (token 1), then nodes 0 and 1 restarted with their data and
/// their quarantines waited out.
async fn fenced_then_two_clean_restarts(resource: &str) -> (LocalCluster, Redlock) {
    let cluster = common::cluster(3);
    for i in 0..3 {
        cluster.enable_aof(i).expect("AOF always");
    }
    let redlock = common::guarded(&cluster, config()).await;
    let fenced = LockOptions::new().fencing(true);
    let first = redlock
        .lock_with(resource, MAX_TTL, &fenced)
        .await
        .expect("fenced lock");
    assert_eq!(first.fencing_token(), Some(1));
    first.release().await.expect("release");
    redlock.shutdown().await;
    for i in [0, 1] {
        cluster.restart_with_aof(i).expect("clean restart");
    }
    let redlock = common::redlock(&cluster.urls(), config());
    // A plain vote starts both quarantines; then they are waited out.
    let _ = redlock.try_lock(&common::unique("start"), MAX_TTL).await;
    let quarantine = config().quarantine().expect("guard on");
    tokio::time::sleep(quarantine * 3).await;
    let plain = redlock
        .lock(&common::unique("plain"), MAX_TTL)
        .await
        .expect("plain locks work again");
    plain.release().await.expect("release");
    (cluster, redlock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_lock_whose_counters_a_quorum_cannot_vouch_for_stops_at_once_and_says_why() {
    let resource = common::unique("guard-fence-out");
    let (_cluster, redlock) = fenced_then_two_clean_restarts(&resource).await;
    let fenced = LockOptions::new().fencing(true);
    match redlock.lock_with(&resource, MAX_TTL, &fenced).await {
        Err(Error::NotAcquired(why)) => {
            assert_eq!(why.attempts(), 1, "retried: {why}");
            assert!(why.reason() == redquorum::Reason::Misconfigured, "{why}");
            assert!(why.reason() != redquorum::Reason::Unavailable, "{why}");
            assert!(why.to_string().contains("vouch"), "{why}");
        }
        other => panic!("expected the counters not known intact, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vouching_for_the_counters_lets_the_next_token_follow_the_last() {
    let resource = common::unique("guard-fence-vouch");
    let (_cluster, redlock) = fenced_then_two_clean_restarts(&resource).await;
    let reports = redlock
        .vouch_fence_counters(redquorum::FenceCounters::Of(&[&resource]))
        .await
        .expect("guard on");
    assert!(
        reports
            .iter()
            .all(|r| *r.outcome() == redquorum::NodeOutcome::Granted),
        "{reports:?}"
    );
    let fenced = LockOptions::new().fencing(true);
    let next = redlock
        .lock_with(&resource, MAX_TTL, &fenced)
        .await
        .expect("fenced lock");
    assert_eq!(next.fencing_token(), Some(2));
    next.release().await.expect("release");
    // Another resource's counters were not vouched for.
    let other = common::unique("guard-fence-other");
    assert!(matches!(
        redlock.lock_with(&other, MAX_TTL, &fenced).await,
        Err(Error::NotAcquired(why)) if why.reason() == redquorum::Reason::Misconfigured
    ));

    let off = common::redlock(&_cluster.urls(), common::fast_config());
    assert!(matches!(
        off.vouch_fence_counters(redquorum::FenceCounters::Of(&[&resource]))
            .await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        redlock
            .vouch_fence_counters(redquorum::FenceCounters::Of(&[]))
            .await,
        Err(Error::InvalidArgument(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vouching_for_all_counters_covers_resources_never_fenced() {
    let resource = common::unique("guard-fence-all");
    let (_cluster, redlock) = fenced_then_two_clean_restarts(&resource).await;
    let reports = redlock
        .vouch_fence_counters(redquorum::FenceCounters::All)
        .await
        .expect("guard on");
    assert!(
        reports
            .iter()
            .all(|r| *r.outcome() == redquorum::NodeOutcome::Granted),
        "{reports:?}"
    );
    let fenced = LockOptions::new().fencing(true);
    let next = redlock
        .lock_with(&resource, MAX_TTL, &fenced)
        .await
        .expect("fenced lock");
    assert_eq!(next.fencing_token(), Some(2));
    next.release().await.expect("release");
    let new = common::unique("guard-fence-new");
    let first = redlock
        .lock_with(&new, MAX_TTL, &fenced)
        .await
        .expect("a resource never fenced");
    assert_eq!(first.fencing_token(), Some(1));
    first.release().await.expect("release");
}
