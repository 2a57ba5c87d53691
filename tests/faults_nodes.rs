#![cfg(feature = "testkit")]
//! Fault scenarios on the nodes themselves: kill, restart, pause.
//! Each prints acquisitions, failures by cause, faults and overlaps.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::workload::{Marks, Params, scenario, started_between};
use redquorum::testkit::LocalCluster;
use tokio::time::sleep;

const TTL: Duration = Duration::from_millis(300);

async fn blocking(
    cluster: &Arc<LocalCluster>,
    nodes: &[usize],
    op: fn(&LocalCluster, usize) -> Result<(), redquorum::testkit::TestkitError>,
) {
    let (cluster, nodes) = (Arc::clone(cluster), nodes.to_vec());
    let done =
        tokio::task::spawn_blocking(move || nodes.into_iter().try_for_each(|i| op(&cluster, i)))
            .await;
    match done {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("fault failed: {e}"),
        Err(e) => panic!("fault panicked: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_without_faults_keeps_mutual_exclusion() {
    let cluster = common::cluster(5);
    let params = Params::new(TTL);
    let run = scenario(
        "baseline",
        &cluster.urls(),
        &params,
        Duration::from_secs(2),
        async { 0 },
    )
    .await;
    assert!(run.acquisitions() > 10, "{}", run.summary("baseline", 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_minority_and_restarting_it_after_the_ttl_keeps_mutual_exclusion() {
    let cluster = Arc::new(common::cluster(5));
    let params = Params::new(TTL);
    let c = Arc::clone(&cluster);
    let run = scenario(
        "kill minority",
        &cluster.urls(),
        &params,
        Duration::from_secs(3),
        async move {
            sleep(Duration::from_millis(300)).await;
            blocking(&c, &[1, 3], |c, i| c.kill(i)).await;
            sleep(TTL * 2).await;
            blocking(&c, &[1, 3], |c, i| c.restart_empty(i)).await;
            1
        },
    )
    .await;
    assert!(
        run.acquisitions() > 10,
        "{}",
        run.summary("kill minority", 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_majority_stops_acquisitions_without_hanging_and_they_resume_after() {
    let cluster = Arc::new(common::cluster(5));
    let params = Params::new(TTL);
    let c = Arc::clone(&cluster);
    let outage = Marks::default();
    let o = outage.clone();
    let run = scenario(
        "kill majority",
        &cluster.urls(),
        &params,
        Duration::from_secs(3),
        async move {
            sleep(Duration::from_millis(400)).await;
            blocking(&c, &[0, 2, 4], |c, i| c.kill(i)).await;
            o.mark();
            sleep(Duration::from_millis(1000)).await;
            o.mark();
            blocking(&c, &[0, 2, 4], |c, i| c.restart_empty(i)).await;
            o.mark();
            1
        },
    )
    .await;
    let [down, up, restarted] = outage.get();
    let summary = run.summary("kill majority", 1);
    // A lock() that returns just after the kill got its replies before it.
    assert_eq!(
        started_between(&run, down + Duration::from_millis(50), up),
        0,
        "{summary}"
    );
    assert!(run.failures("unavailable") > 0, "{summary}");
    assert!(
        started_between(&run, restarted, restarted + Duration::from_secs(60)) > 0,
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pausing_one_node_mid_acquire_does_not_stop_acquisitions() {
    let cluster = Arc::new(common::cluster(5));
    // Two contenders: with one node paused a grant needs 3 of the 4 left,
    // and four contenders split those votes so often on a loaded machine
    // that the window could pass with no acquisition on contention alone.
    let params = Params {
        workers: 2,
        ..Params::new(TTL)
    };
    let c = Arc::clone(&cluster);
    let window = Marks::default();
    let w = window.clone();
    let run = scenario(
        "pause one",
        &cluster.urls(),
        &params,
        Duration::from_secs(2),
        async move {
            sleep(Duration::from_millis(300)).await;
            blocking(&c, &[2], |c, i| c.pause(i)).await;
            w.mark();
            sleep(Duration::from_millis(1000)).await;
            w.mark();
            blocking(&c, &[2], |c, i| c.resume(i)).await;
            1
        },
    )
    .await;
    let [from, to] = window.get();
    let summary = run.summary("pause one", 1);
    assert!(started_between(&run, from, to) > 0, "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pausing_a_majority_longer_than_the_ttl_grants_nothing_until_they_resume() {
    let cluster = Arc::new(common::cluster(5));
    let params = Params::new(TTL);
    let c = Arc::clone(&cluster);
    let window = Marks::default();
    let w = window.clone();
    let run = scenario(
        "pause majority",
        &cluster.urls(),
        &params,
        Duration::from_secs(3),
        async move {
            sleep(Duration::from_millis(300)).await;
            blocking(&c, &[0, 1, 3], |c, i| c.pause(i)).await;
            w.mark();
            sleep(TTL * 3).await;
            w.mark();
            blocking(&c, &[0, 1, 3], |c, i| c.resume(i)).await;
            w.mark();
            1
        },
    )
    .await;
    let [paused, resuming, resumed] = window.get();
    let summary = run.summary("pause majority", 1);
    assert_eq!(
        started_between(&run, paused + Duration::from_millis(50), resuming),
        0,
        "{summary}"
    );
    assert!(
        started_between(&run, resumed, resumed + Duration::from_secs(60)) > 0,
        "{summary}"
    );
}
