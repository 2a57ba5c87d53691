#![cfg(feature = "testkit")]
//! Fault scenarios on the network between client and nodes: latency,
//! blackholes, lost replies, fast clocks, cancelled acquisitions.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::workload::{Marks, Params, scenario, started_between};
use redquorum::testkit::{LocalCluster, ProxyMode};
use tokio::time::sleep;

const TTL: Duration = Duration::from_millis(300);

fn set(cluster: &LocalCluster, nodes: &[usize], mode: ProxyMode) {
    for &i in nodes {
        cluster.set_proxy(i, mode);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_growing_towards_the_ttl_shrinks_validity_but_never_grants_an_empty_lock() {
    let cluster = Arc::new(common::cluster(5));
    let mut params = Params::new(TTL);
    // Let slow replies count, so that validity (not the node timeout)
    // decides; one uncontended client, so failures are the latency's doing.
    params.config = params.config.with_node_timeout(TTL * 2).with_retries(0);
    params.workers = 1;
    let c = Arc::clone(&cluster);
    let window = Marks::default();
    let w = window.clone();
    let fault = async move {
        let mut faults = 0;
        for step in [20u32, 10, 6, 4, 3] {
            set(&c, &[0, 1, 2, 3, 4], ProxyMode::Delay(TTL / step));
            faults += 1;
            sleep(Duration::from_millis(350)).await;
        }
        // A round trip of a whole TTL: no attempt can keep any validity.
        set(&c, &[0, 1, 2, 3, 4], ProxyMode::Delay(TTL / 2));
        faults += 1;
        w.mark();
        sleep(Duration::from_millis(1700)).await;
        w.mark();
        set(&c, &[0, 1, 2, 3, 4], ProxyMode::Pass);
        faults
    };
    let urls = cluster.urls();
    let run = scenario(
        "latency to ttl",
        &urls,
        &params,
        Duration::from_millis(3500),
        fault,
    )
    .await;
    let [from, to] = window.get();
    let summary = run.summary("latency to ttl", 6);
    assert!(run.acquisitions() > 0, "{summary}");
    // Once a round trip takes the whole TTL (and an attempt already in
    // flight has finished), nothing may be granted.
    assert_eq!(started_between(&run, from + TTL * 2, to), 0, "{summary}");
    let failed: u64 = ["validity_exhausted", "contended", "unavailable"]
        .iter()
        .map(|c| run.failures(c))
        .sum();
    assert!(failed > 0, "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackholed_minority_does_not_stop_acquisitions() {
    let cluster = Arc::new(common::cluster(5));
    // Two workers: with three nodes left a grant must be unanimous, and
    // four contenders split those votes so often on a loaded machine that
    // a whole window could pass on contention alone.
    let params = Params {
        workers: 2,
        ..Params::new(TTL)
    };
    let c = Arc::clone(&cluster);
    let window = Marks::default();
    let w = window.clone();
    let run = scenario(
        "blackhole minority",
        &cluster.urls(),
        &params,
        Duration::from_secs(2),
        async move {
            sleep(Duration::from_millis(200)).await;
            set(&c, &[0, 4], ProxyMode::Blackhole);
            w.mark();
            sleep(Duration::from_millis(1200)).await;
            w.mark();
            set(&c, &[0, 4], ProxyMode::Pass);
            1
        },
    )
    .await;
    let [from, to] = window.get();
    assert!(
        started_between(&run, from, to) > 0,
        "{}",
        run.summary("blackhole minority", 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackholed_majority_grants_nothing_and_service_resumes_after() {
    let cluster = Arc::new(common::cluster(5));
    let params = Params::new(TTL);
    let c = Arc::clone(&cluster);
    let window = Marks::default();
    let w = window.clone();
    let run = scenario(
        "blackhole majority",
        &cluster.urls(),
        &params,
        Duration::from_secs(3),
        async move {
            sleep(Duration::from_millis(300)).await;
            set(&c, &[1, 2, 3], ProxyMode::Blackhole);
            w.mark();
            sleep(Duration::from_millis(1000)).await;
            w.mark();
            set(&c, &[1, 2, 3], ProxyMode::Pass);
            1
        },
    )
    .await;
    let [from, to] = window.get();
    let summary = run.summary("blackhole majority", 1);
    assert_eq!(
        started_between(&run, from + Duration::from_millis(50), to),
        0,
        "{summary}"
    );
    assert!(run.failures("unavailable") > 0, "{summary}");
    assert!(
        started_between(&run, to, to + Duration::from_secs(60)) > 0,
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_replies_on_three_nodes_leave_no_key_behind() {
    let cluster = Arc::new(common::cluster(5));
    // A long TTL: a key that is gone afterwards was released, not expired.
    let ttl = Duration::from_secs(5);
    let mut params = Params::new(ttl);
    params.config = params.config.with_node_timeout(Duration::from_millis(150));
    params.workers = 2;
    set(&cluster, &[0, 2, 3], ProxyMode::DropReplies);
    let run = scenario(
        "drop replies",
        &cluster.urls(),
        &params,
        Duration::from_millis(1500),
        async { 1 },
    )
    .await;
    let summary = run.summary("drop replies", 1);
    assert_eq!(run.acquisitions(), 0, "{summary}");
    assert!(run.failures("unavailable") > 0, "{summary}");
    let key = common::key(&params.resource);
    let urls = cluster.direct_urls();
    let clean = common::eventually(Duration::from_millis(500), || {
        urls.iter().all(|u| common::get(u, &key).is_none())
    })
    .await;
    assert!(
        clean,
        "a key of ours remained after the acks were lost: {summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clocks_fast_within_the_drift_bound_on_two_nodes_keep_mutual_exclusion() {
    let cluster = Arc::new(common::cluster(5));
    let params = Params::new(TTL);
    // 0.5 % fast; the default drift allowance is 1 % + 2 ms.
    set(&cluster, &[1, 4], ProxyMode::FastClock { per_mille: 1005 });
    let run = scenario(
        "fast clock",
        &cluster.urls(),
        &params,
        Duration::from_secs(2),
        async { 1 },
    )
    .await;
    assert!(run.acquisitions() > 10, "{}", run.summary("fast clock", 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_cancelled_under_latency_leave_no_orphan_keys() {
    let cluster = common::cluster(5);
    let ttl = Duration::from_secs(10);
    set(
        &cluster,
        &[0, 1, 2, 3, 4],
        ProxyMode::Delay(Duration::from_millis(30)),
    );
    let config = common::fast_config();
    let mut cancelled = 0;
    let mut resources = Vec::new();
    for i in 0..12u64 {
        let redlock = common::redlock(&cluster.urls(), config.clone());
        let resource = common::unique("cancel");
        // Dropped mid-round: before, during and after the SETs land.
        let cut = Duration::from_millis(5 + i * 7);
        if tokio::time::timeout(cut, redlock.lock(&resource, ttl))
            .await
            .is_err()
        {
            cancelled += 1;
        }
        resources.push(resource);
    }
    set(&cluster, &[0, 1, 2, 3, 4], ProxyMode::Pass);
    let urls = cluster.direct_urls();
    let clean = common::eventually(Duration::from_secs(5), || {
        resources.iter().all(|r| {
            urls.iter()
                .all(|u| common::get(u, &common::key(r)).is_none())
        })
    })
    .await;
    eprintln!(
        "[cancelled acquire] cancelled={cancelled} of 12, orphan keys left: {}",
        !clean
    );
    assert!(cancelled > 0, "no acquisition was cancelled mid-flight");
    assert!(clean, "orphan keys outlived their cancelled acquisitions");
}
