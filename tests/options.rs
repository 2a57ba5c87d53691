#![cfg(feature = "testkit")]
//! Per-call options on one `Redlock`: the wait, fencing and the retry
//! pause change per call, and `try_with_lock` skips a job only when the
//! lock is taken.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redquorum::{Error, LockOptions};
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_outlasts_the_config_retry_count_and_no_wait_makes_one_attempt() {
    let nodes = common::nodes();
    // The config alone would make one attempt.
    let config = common::fast_config()
        .with_retries(0)
        .with_release_notifications(false);
    let redlock = common::redlock(&nodes.urls(), config);
    let resource = common::unique("options-wait");
    let holder = redlock.lock(&resource, TTL).await.expect("holder");

    let once = redlock
        .lock_with(
            &resource,
            TTL,
            &LockOptions::new().wait(redquorum::Wait::No),
        )
        .await
        .expect_err("held");
    assert!(
        matches!(&once, Error::NotAcquired(why) if why.attempts() == 1),
        "{once}"
    );

    let waiter = {
        let (redlock, resource) = (redlock.clone(), resource.clone());
        tokio::spawn(async move {
            let options = LockOptions::new()
                .wait(redquorum::Wait::For(Duration::from_secs(20)))
                .retry_delay(Duration::from_millis(30))
                .retry_jitter(Duration::ZERO);
            redlock.lock_with(&resource, TTL, &options).await
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    holder.release().await.expect("release");
    let guard = waiter
        .await
        .expect("task")
        .expect("the wait outlasts the holder");
    guard.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_gives_up_at_its_deadline_counting_every_attempt() {
    let nodes = common::nodes();
    let config = common::fast_config().with_release_notifications(false);
    let redlock = common::redlock(&nodes.urls(), config);
    let resource = common::unique("options-deadline");
    let holder = redlock.lock(&resource, TTL).await.expect("holder");
    let options = LockOptions::new()
        .wait(redquorum::Wait::For(Duration::from_millis(600)))
        .retry_delay(Duration::from_millis(20))
        .retry_jitter(Duration::ZERO);
    let started = Instant::now();
    let err = redlock
        .lock_with(&resource, TTL, &options)
        .await
        .expect_err("held for longer than the wait");
    let Error::NotAcquired(why) = &err else {
        panic!("{err:?}");
    };
    assert!(
        started.elapsed() >= Duration::from_millis(550),
        "gave up early"
    );
    // Far more than the config's 3 retries: the deadline bounds the wait.
    assert!(why.attempts() > 4, "{why}");
    holder.release().await.expect("release");
}

#[tokio::test]
async fn fencing_is_chosen_per_call_on_one_redlock() {
    let nodes = common::nodes();
    let redlock = common::redlock(&nodes.urls(), common::fast_config());
    let resource = common::unique("options-fencing");
    let plain = redlock.lock(&resource, TTL).await.expect("plain");
    assert_eq!(plain.fencing_token(), None);
    plain.release().await.expect("release");
    let fenced = LockOptions::new().fencing(true);
    let first = redlock
        .lock_with(&resource, TTL, &fenced)
        .await
        .expect("fenced");
    let t1 = first.fencing_token().expect("a token");
    first.release().await.expect("release");
    let many = redlock
        .lock_with(&[resource.as_str()], TTL, &fenced)
        .await
        .expect("fenced many");
    let t2 = many.fencing_tokens().expect("tokens")[0];
    assert!(t2 > t1, "{t2} after {t1}");
    many.release().await.expect("release");
}

#[tokio::test]
async fn bad_options_are_argument_errors_before_any_io() {
    let nodes = common::nodes();
    let redlock = common::redlock(&nodes.urls(), common::fast_config());
    let resource = common::unique("options-bad");
    for options in [
        LockOptions::new().wait(redquorum::Wait::For(Duration::ZERO)),
        LockOptions::new().retry_delay(Duration::from_secs(24 * 3600)),
    ] {
        let err = redlock.lock_with(&resource, TTL, &options).await;
        assert!(matches!(err, Err(Error::InvalidArgument(_))), "{err:?}");
    }
    assert_eq!(
        common::holders_any(&nodes.urls(), &common::key(&resource)),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_with_lock_skips_a_taken_lock_and_runs_a_free_one() {
    let nodes = common::nodes();
    let redlock = common::redlock(&nodes.urls(), common::fast_config());
    let resource = common::unique("options-cron");
    let holder = redlock.lock(&resource, TTL).await.expect("holder");
    let ran = Arc::new(AtomicBool::new(false));
    let skipped = redlock
        .try_with_lock(&resource, TTL, async |_| ran.store(true, Ordering::SeqCst))
        .await
        .expect("a taken lock is no error");
    assert_eq!(skipped, None);
    assert!(
        !ran.load(Ordering::SeqCst),
        "the job ran under another's lock"
    );
    holder.release().await.expect("release");

    let done = redlock
        .try_with_lock(&resource, TTL, async |guard| {
            assert!(!guard.remaining().is_zero());
            7
        })
        .await
        .expect("free");
    assert_eq!(done, Some(7));
    assert_eq!(
        common::holders_any(&nodes.urls(), &common::key(&resource)),
        0
    );
}

#[tokio::test]
async fn try_with_lock_reports_an_outage_instead_of_skipping() {
    let cluster = common::cluster(5);
    for i in 0..3 {
        cluster.kill(i).expect("kill");
    }
    let redlock = common::redlock(&cluster.urls(), common::fast_config());
    let result = redlock
        .try_with_lock(&common::unique("options-outage"), TTL, async |_| ())
        .await;
    match result {
        Err(Error::NotAcquired(why)) => {
            assert!(why.reason() == redquorum::Reason::Unavailable, "{why}")
        }
        other => panic!("an outage was taken for a lost race: {other:?}"),
    }
}

#[tokio::test]
async fn a_job_run_under_a_lock_taken_with_options_gets_them_and_releases_after() {
    let nodes = common::nodes();
    let redlock = common::redlock(&nodes.urls(), common::fast_config());
    let resource = common::unique("options-run");
    let fenced = LockOptions::new().fencing(true).wait(redquorum::Wait::No);
    let token = redlock
        .lock_with(&resource, TTL, &fenced)
        .await
        .expect("fenced")
        .run(async |guard| guard.fencing_token())
        .await
        .expect("the job ran");
    assert!(token.is_some(), "the job saw no fencing token");
    // Released after the job: free at once for another caller.
    let next = redlock
        .try_lock(&resource, TTL)
        .await
        .expect("free after run");
    next.release().await.expect("release");
}
