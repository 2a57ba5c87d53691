#![cfg(feature = "testkit")]
//! ACL users on real nodes: the least-privilege users of
//! docs/deployment.md run their features, and a refusal is a typed
//! misconfiguration naming the command, never retried as an outage.

mod common;

use std::time::{Duration, Instant};

use common::acl::{locker_urls, setuser, user};
use redquorum::{Error, FailureKind, LockOptions, NodeOutcome, NodeProblem};

const TTL: Duration = Duration::from_secs(10);

fn failures(err: &Error) -> Vec<FailureKind> {
    match err {
        Error::NotAcquired(why) => why
            .nodes()
            .iter()
            .filter_map(|r| match r.outcome() {
                NodeOutcome::Failed(f) => Some(f.kind().clone()),
                _ => None,
            })
            .collect(),
        other => panic!("expected NotAcquired, got {other:?}"),
    }
}

fn denied(command: &str) -> FailureKind {
    FailureKind::NoPermission {
        command: Some(command.to_owned()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_least_privilege_user_runs_every_feature() {
    let cluster = common::cluster(3);
    user(
        &cluster,
        &[
            "core",
            "fencing",
            "reentrant",
            "notifications",
            "checks",
            "inspect",
        ],
    );
    let redlock = common::redlock(&locker_urls(&cluster), common::fast_config());
    redlock.check().await.expect("check as the documented user");

    let resource = common::unique("acl-core");
    let mut guard = redlock.lock(&resource, TTL).await.expect("lock");
    guard.extend(TTL).await.expect("extend");
    guard.release().await.expect("release");

    let many = [common::unique("acl-a"), common::unique("acl-b")];
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let guard = redlock.lock(&many, TTL).await.expect("lock_many");
    guard.release().await.expect("release many");

    let fenced = LockOptions::new().fencing(true);
    let guard = redlock
        .lock_with(&resource, TTL, &fenced)
        .await
        .expect("fenced lock");
    assert!(guard.fencing_token().is_some());
    guard.release().await.expect("fenced release");

    let outer = redlock
        .lock_with(&resource, TTL, &redquorum::LockOptions::new().owner("job"))
        .await
        .expect("reentrant");
    let mut inner = redlock
        .lock_with(&resource, TTL, &redquorum::LockOptions::new().owner("job"))
        .await
        .expect("reentrant again");
    inner.extend(TTL).await.expect("reentrant extend");
    let seen = redlock.inspect(&resource).await.expect("inspect");
    assert!(seen.holder().is_some(), "{seen:?}");
    inner.release().await.expect("inner release");
    outer.release().await.expect("outer release");
    redlock.shutdown().await;
}

#[tokio::test]
async fn the_core_user_alone_locks_and_the_checks_name_what_they_could_not_check() {
    let cluster = common::cluster(3);
    user(&cluster, &["core"]);
    let redlock = common::redlock(&locker_urls(&cluster), common::fast_config());
    let resource = common::unique("acl-core-only");
    let mut guard = redlock.lock(&resource, TTL).await.expect("lock");
    guard.extend(TTL).await.expect("extend");
    guard.release().await.expect("release");

    let err = redlock
        .lock_with(
            &resource,
            TTL,
            &redquorum::LockOptions::new()
                .owner("job")
                .wait(redquorum::Wait::No),
        )
        .await
        .expect_err("reentrant needs its own commands");
    let kinds = failures(&err);
    assert!(kinds.len() >= 2, "{err}");
    assert!(kinds.iter().all(|k| *k == denied("time")), "{kinds:?}");

    // The checks degrade: each refused probe is a warning naming what
    // to allow, and the check passes.
    redlock.check().await.expect("refused probes are warnings");
    for row in redlock.check_report().await {
        let role = row
            .problems()
            .iter()
            .find(|p| matches!(p, NodeProblem::Unchecked { command, .. } if command == "role"))
            .unwrap_or_else(|| panic!("{:?}", row.problems()));
        assert!(
            role.is_warning() && role.to_string().contains("+role"),
            "{role}"
        );
    }
    let rows = redlock.check_report().await;
    assert!(
        rows.iter().all(|r| r.reachable()),
        "an ACL refusal is an answer"
    );
}

#[tokio::test]
async fn nodes_whose_acl_refuses_set_are_misconfigured_and_lock_does_not_retry() {
    let cluster = common::cluster(3);
    user(&cluster, &["core"]);
    setuser(&cluster, &[0, 1], &["locker".to_owned(), "-set".to_owned()]);
    let config = common::fast_config()
        .with_retries(50)
        .with_retry_delay(Duration::from_millis(200));
    let redlock = common::redlock(&locker_urls(&cluster), config);
    let started = Instant::now();
    let err = redlock
        .lock(&common::unique("acl-set"), TTL)
        .await
        .expect_err("two of three nodes refuse SET");
    let Error::NotAcquired(why) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(why.attempts(), 1, "retried a misconfiguration: {why}");
    assert!(
        why.reason() == redquorum::Reason::Misconfigured
            && why.reason() != redquorum::Reason::Unavailable,
        "{why}"
    );
    assert_eq!(failures(&err), [denied("set"), denied("set")]);
    // 50 retries of 200 ms would take 10 s.
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_script_the_acl_refuses_is_reported_with_the_command_it_lacks() {
    let cluster = common::cluster(3);
    user(&cluster, &["core"]);
    let redlock = common::redlock(&locker_urls(&cluster), common::fast_config());
    let mut guard = redlock
        .lock(&common::unique("acl-pexpire"), TTL)
        .await
        .expect("lock");
    setuser(
        &cluster,
        &[0, 1, 2],
        &["locker".to_owned(), "-pexpire".to_owned()],
    );
    let err = guard.extend(TTL).await.expect_err("PEXPIRE is refused");
    // Decided once two of three refused: the third may still be pending.
    let kinds = failures(&err);
    assert!(kinds.len() >= 2, "{err}");
    assert!(kinds.iter().all(|k| *k == denied("pexpire")), "{err}");
    assert!(err.to_string().contains("pexpire"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_restart_guard_user_locks_with_the_guard_on() {
    let cluster = common::cluster(3);
    user(&cluster, &["core", "fencing", "reentrant", "restart-guard"]);
    let config = common::fast_config().with_restart_guard(TTL);
    let redlock = common::redlock(&locker_urls(&cluster), config);
    let marked = redlock.init_nodes().await;
    assert!(
        marked
            .iter()
            .all(|r| *r.outcome() == redquorum::NodeOutcome::Granted),
        "{marked:?}"
    );
    let resource = common::unique("acl-guard");
    let mut guard = redlock.lock(&resource, TTL).await.expect("guarded lock");
    guard.extend(TTL).await.expect("extend");
    guard.release().await.expect("release");
    let fenced = LockOptions::new().fencing(true);
    let guard = redlock
        .lock_with(&resource, TTL, &fenced)
        .await
        .expect("guarded fenced lock");
    assert!(guard.fencing_token().is_some());
    guard.release().await.expect("fenced release");
    let hold = redlock
        .lock_with(&resource, TTL, &redquorum::LockOptions::new().owner("job"))
        .await
        .expect("guarded reentrant lock");
    hold.release().await.expect("reentrant release");
}

#[tokio::test]
async fn with_the_restart_guard_a_user_without_info_gets_no_vote_and_the_error_names_info() {
    let cluster = common::cluster(3);
    user(&cluster, &["core", "restart-guard"]);
    setuser(
        &cluster,
        &[0, 1, 2],
        &["locker".to_owned(), "-info".to_owned()],
    );
    let config = common::fast_config().with_restart_guard(TTL);
    let redlock = common::redlock(&locker_urls(&cluster), config);
    let err = redlock
        .lock(&common::unique("acl-info"), TTL)
        .await
        .expect_err("INFO is refused");
    let kinds = failures(&err);
    assert!(kinds.len() >= 2, "{err}");
    assert!(kinds.iter().all(|k| *k == denied("info")), "{err}");
    let Error::NotAcquired(why) = &err else {
        panic!("{err:?}");
    };
    assert!(why.reason() == redquorum::Reason::Misconfigured, "{why}");
}

#[tokio::test]
async fn a_read_only_replica_is_a_misconfiguration_not_an_outage() {
    let cluster = common::cluster(3);
    let port = common::port_of(&cluster.direct_url(0));
    for i in [1, 2] {
        let cmd = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(&port).clone();
        common::query::<()>(&cluster.direct_url(i), &cmd).expect("REPLICAOF");
    }
    let config = common::fast_config().with_retries(50);
    let redlock = common::redlock(&cluster.urls(), config);
    let err = redlock
        .lock(&common::unique("acl-readonly"), TTL)
        .await
        .expect_err("two replicas refuse writes");
    let Error::NotAcquired(why) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(why.attempts(), 1, "{why}");
    assert!(why.reason() == redquorum::Reason::Misconfigured, "{why}");
    assert_eq!(
        failures(&err),
        [FailureKind::ReadOnly, FailureKind::ReadOnly]
    );
}
