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
        assert!(row.problems().is_empty(), "{:?}", row.problems());
    }
}

#[tokio::test]
async fn a_replica_is_reported_as_not_a_master() {
    let cluster = common::cluster(3);
    let port = cluster
        .direct_url(0)
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap_or("")
        .to_owned();
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
