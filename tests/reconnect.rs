//! The first call after a node restarted: its connection is dead, and a
//! command the connection provably never wrote is sent again on a new
//! one, so that the node votes at once. Needs local nodes (restarts).
#![cfg(feature = "testkit")]

mod common;

use std::time::Duration;

use common::*;
use redquorum::Error;
use redquorum::testkit::LocalCluster;

/// Every node must vote: a node whose first call after its restart fails
/// fails the attempt, and shows in the report.
fn all_of_three(urls: &[String]) -> redquorum::Redlock {
    redlock(urls, fast_config().with_retries(0).with_quorum(3))
}

/// Restarts node 0 (empty, no restart guard) while the client is idle,
/// then takes a lock that needs node 0's vote.
async fn first_lock_after_a_restart(cluster: &LocalCluster, urls: &[String]) {
    let redlock = all_of_three(urls);
    warm_up(&redlock).await;
    for round in 0..3 {
        cluster.restart_empty(0).unwrap();
        // Idle long enough for the old connection's end to be seen.
        tokio::time::sleep(Duration::from_millis(200)).await;
        match redlock
            .try_lock(&unique("after-restart"), Duration::from_secs(5))
            .await
        {
            Ok(guard) => guard.release().await.unwrap(),
            Err(Error::NotAcquired(why)) => {
                panic!("round {round}: the first call after a restart failed: {why}")
            }
            Err(e) => panic!("round {round}: {e}"),
        }
    }
    redlock.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_call_after_a_restart_is_sent_again_on_a_new_connection() {
    let cluster = cluster(3);
    first_lock_after_a_restart(&cluster, &cluster.direct_urls()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_proxy_too() {
    let cluster = cluster(3);
    first_lock_after_a_restart(&cluster, &cluster.urls()).await;
}
