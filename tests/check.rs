#![cfg(feature = "testkit")]
//! Start-up checks: each misconfiguration is a typed error naming its node.

mod common;

use std::time::Duration;

use redquorum::{Error, NodeProblem};

fn problems(result: redquorum::Result<()>) -> Vec<NodeProblem> {
    match result {
        Err(Error::Misconfigured(p)) => p,
        other => panic!("expected Error::Misconfigured, got {other:?}"),
    }
}

fn config(cluster: &redquorum::testkit::LocalCluster, i: usize, name: &str, value: &str) {
    let url = cluster.direct_url(i);
    if let Err(e) = common::query::<()>(&url, redis::cmd("CONFIG").arg("SET").arg(name).arg(value))
    {
        panic!("CONFIG SET {name} on node {i}: {e}");
    }
}

#[tokio::test]
async fn a_healthy_cluster_passes_and_the_report_has_a_row_per_node() {
    let cluster = common::cluster(3);
    let redlock = common::redlock(&cluster.urls(), common::fast_config());
    assert!(redlock.check().await.is_ok());
    let rows = redlock.check_report().await;
    assert_eq!(rows.len(), 3);
    for row in &rows {
        assert!(row.reachable());
        assert_eq!(row.role(), Some("master"));
        assert_eq!(row.eviction_policy(), Some("noeviction"));
        assert!(row.latency().is_some());
        assert_eq!(row.replicas(), Some(0));
        // The test nodes run without AOF: advice, not a failure.
        assert_eq!(row.persistence(), Some(("no", "always")));
        assert!(
            matches!(row.problems(), [p @ NodeProblem::Persistence { .. }] if p.is_warning()),
            "{:?}",
            row.problems()
        );
    }
}

#[tokio::test]
async fn a_master_with_a_replica_is_warned_about_and_still_passes() {
    let cluster = common::cluster(4);
    let port = common::port_of(&cluster.direct_url(0));
    // The master lists a replica once its first sync is done, which by
    // default waits 5 s for more replicas to share a diskless transfer.
    common::query::<()>(
        &cluster.direct_url(0),
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("repl-diskless-sync-delay")
            .arg(0),
    )
    .expect("CONFIG SET");
    // Node 3 becomes a replica of node 0 and is not one of the voters.
    common::query::<()>(
        &cluster.direct_url(3),
        redis::cmd("REPLICAOF").arg("127.0.0.1").arg(&port),
    )
    .expect("REPLICAOF");
    let urls = cluster.urls()[..3].to_vec();
    let redlock = common::redlock(&urls, common::fast_config());
    let replicas = || async {
        let rows = redlock.check_report().await;
        rows[0].replicas()
    };
    let mut seen = None;
    let give_up = tokio::time::Instant::now() + Duration::from_secs(20);
    while tokio::time::Instant::now() < give_up {
        seen = replicas().await;
        if seen == Some(1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen, Some(1), "the replica never connected");
    let rows = redlock.check_report().await;
    let warning = rows[0]
        .problems()
        .iter()
        .find(|p| matches!(p, NodeProblem::Replicas { replicas: 1, .. }))
        .unwrap_or_else(|| panic!("{:?}", rows[0].problems()));
    assert!(warning.is_warning());
    assert!(warning.to_string().contains("failover"), "{warning}");
    assert!(redlock.check().await.is_ok(), "a warning failed the check");
}

#[tokio::test]
async fn persistence_advice_is_firmer_with_fencing_on_and_gone_with_fsync_always() {
    let cluster = common::cluster(3);
    config(&cluster, 0, "appendonly", "yes");
    config(&cluster, 0, "appendfsync", "always");
    let fenced = common::redlock(&cluster.urls(), common::fast_config().with_fencing(true));
    let rows = fenced.check_report().await;
    assert!(rows[0].problems().is_empty(), "{:?}", rows[0].problems());
    for row in &rows[1..] {
        let text = row
            .problems()
            .iter()
            .map(ToString::to_string)
            .collect::<String>();
        assert!(text.contains("appendonly no"), "{text}");
        assert!(text.contains("fencing"), "{text}");
    }
}

#[tokio::test]
async fn strict_checks_refuse_to_lock_until_the_check_passes() {
    let cluster = common::cluster(3);
    config(&cluster, 2, "maxmemory-policy", "allkeys-lru");
    let strict = common::fast_config().with_strict_checks(true);
    let redlock = common::redlock(&cluster.urls(), strict);
    let resource = common::unique("strict");
    match redlock.try_lock(&resource, Duration::from_secs(5)).await {
        Err(Error::Misconfigured(found)) => assert!(
            matches!(found.as_slice(), [NodeProblem::Eviction { index: 2, .. }]),
            "{found:?}"
        ),
        other => panic!("strict checks let a lock through: {other:?}"),
    }
    assert_eq!(
        common::holders_any(&cluster.direct_urls(), &common::key(&resource)),
        0,
        "nothing may be written before the checks pass"
    );
    config(&cluster, 2, "maxmemory-policy", "noeviction");
    let guard = redlock
        .try_lock(&resource, Duration::from_secs(5))
        .await
        .expect("the checks pass now");
    guard.release().await.expect("release");
}

#[tokio::test]
async fn a_replica_is_reported_as_not_a_master() {
    let cluster = common::cluster(3);
    let port = common::port_of(&cluster.direct_url(0));
    let replica = cluster.direct_url(2);
    if let Err(e) = common::query::<()>(
        &replica,
        redis::cmd("REPLICAOF").arg("127.0.0.1").arg(&port),
    ) {
        panic!("REPLICAOF: {e}");
    }
    let redlock = common::redlock(&cluster.urls(), common::fast_config());
    let found = problems(redlock.check().await);
    assert!(
        matches!(found.as_slice(), [NodeProblem::NotMaster { index: 2, role, .. }] if role == "slave"),
        "{found:?}"
    );
}

#[tokio::test]
async fn a_wrong_password_is_reported_as_an_authentication_failure() {
    let cluster = common::cluster(3);
    config(&cluster, 1, "requirepass", "right");
    let mut urls = cluster.urls();
    urls[1] = urls[1].replace("redis://", "redis://:wrong@");
    let redlock = common::redlock(&urls, common::fast_config());
    let found = problems(redlock.check().await);
    assert!(
        matches!(found.as_slice(), [NodeProblem::AuthFailed { index: 1, .. }]),
        "{found:?}"
    );
    assert!(found[0].to_string().contains("password"), "{}", found[0]);
}

#[tokio::test]
async fn a_proxy_in_front_of_another_node_is_reported_as_a_duplicate() {
    let cluster = common::cluster(3);
    // Node 0 twice: once through its proxy, once directly.
    let urls = vec![cluster.url(0), cluster.url(1), cluster.direct_url(0)];
    let redlock = common::redlock(&urls, common::fast_config());
    let found = problems(redlock.check().await);
    assert!(
        matches!(
            found.as_slice(),
            [NodeProblem::Duplicate {
                index: 2,
                same_as: 0,
                ..
            }]
        ),
        "{found:?}"
    );
}

#[tokio::test]
async fn an_evicting_node_is_reported_with_its_policy() {
    let cluster = common::cluster(3);
    config(&cluster, 0, "maxmemory-policy", "allkeys-lru");
    let redlock = common::redlock(&cluster.urls(), common::fast_config());
    let found = problems(redlock.check().await);
    assert!(
        matches!(found.as_slice(), [NodeProblem::Eviction { index: 0, policy, .. }] if policy == "allkeys-lru"),
        "{found:?}"
    );
    let text = Error::Misconfigured(found).to_string();
    assert!(
        text.contains("node 0") && text.contains("noeviction"),
        "{text}"
    );
}

#[tokio::test]
async fn a_minority_down_passes_but_a_majority_down_fails_naming_the_nodes() {
    let cluster = common::cluster(3);
    let redlock = common::redlock(&cluster.urls(), common::fast_config());
    cluster.kill(0).unwrap_or_else(|e| panic!("{e}"));
    assert!(redlock.check().await.is_ok());
    cluster.kill(1).unwrap_or_else(|e| panic!("{e}"));
    let found = tokio::time::timeout(Duration::from_secs(10), redlock.check())
        .await
        .unwrap_or_else(|_| panic!("check() hung"));
    let found = problems(found);
    let indices: Vec<usize> = found.iter().map(NodeProblem::index).collect();
    assert_eq!(indices, vec![0, 1], "{found:?}");
}
