//! Redlock over the masters of one local Redis Cluster (feature `cluster`):
//! the cluster forms, its faults (a master failover, a slot moved) happen
//! as an operator's would, and the lock keeps its promises through them.
#![cfg(all(feature = "testkit", feature = "cluster"))]

mod common;

use std::time::Duration;

use common::*;
use redquorum::testkit::{LocalRedisCluster, Oracle};
use redquorum::{Config, Error, NodeOutcome, Redlock};
use tokio::task::block_in_place;
use tokio::time::Instant;

fn start(masters: usize, replicas: usize) -> LocalRedisCluster {
    match LocalRedisCluster::start(masters, replicas) {
        Ok(cluster) => cluster,
        Err(e) => panic!("local redis cluster: {e}"),
    }
}

async fn over(cluster: &LocalRedisCluster, nodes: usize, config: Config) -> Redlock {
    match Redlock::cluster(cluster.url(0), nodes, config).await {
        Ok(redlock) => redlock,
        Err(e) => panic!("Redlock::cluster: {e}"),
    }
}

/// The masters holding a key whose name ends with `suffix`.
fn masters_holding(cluster: &LocalRedisCluster, suffix: &str) -> Vec<usize> {
    cluster
        .masters()
        .into_iter()
        .filter(|&m| {
            let mut con = cluster.connection(m).expect("connection");
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("*{suffix}"))
                .query(&mut con)
                .expect("KEYS");
            !keys.is_empty()
        })
        .collect()
}

/// `workers` tasks take and release `resource` `rounds` times each; the
/// history of their holds.
async fn contend(redlock: &Redlock, resource: &str, workers: usize, rounds: usize) -> History {
    let history = History::default();
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let (redlock, history, resource) =
                (redlock.clone(), history.clone(), resource.to_owned());
            tokio::spawn(async move {
                for _ in 0..rounds {
                    let guard = redlock
                        .lock(&resource, Duration::from_secs(5))
                        .await
                        .expect("lock");
                    let start = Instant::now();
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let valid_until = guard.valid_until();
                    let released = Instant::now();
                    guard.release().await.expect("release");
                    history.record(w, start, valid_until, released);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("worker");
    }
    history
}

/// `resource`, locked by `redlock` for `secs` seconds.
async fn take(redlock: &Redlock, resource: &str, secs: u64) -> redquorum::LockGuard {
    match redlock.try_lock(resource, Duration::from_secs(secs)).await {
        Ok(guard) => guard,
        Err(e) => panic!("lock {resource}: {e}"),
    }
}

fn patient() -> Config {
    fast_config()
        .with_retries(400)
        .with_retry_delay(Duration::from_millis(5))
}

#[test]
fn a_local_cluster_forms_and_promotes_a_replica_when_a_master_dies() {
    let cluster = start(3, 1);
    assert_eq!(cluster.len(), 6);
    assert_eq!(cluster.masters().len(), 3);
    let owner = cluster.master_of(0).expect("owner of slot 0");
    cluster.kill(owner).expect("kill");
    let promoted = cluster
        .wait_for_owner_other_than(0, owner)
        .expect("promotion");
    assert_ne!(promoted, owner);
    assert_eq!(cluster.masters().len(), 3, "the replica is a master now");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_masters_each_hold_one_key_the_oracle_checks_and_concurrent_workers_never_overlap() {
    let cluster = block_in_place(|| start(3, 1));
    let redlock = over(&cluster, 3, patient()).await;
    assert_eq!(redlock.quorum(), 2);
    let resource = unique("cluster-3");
    let guard = take(&redlock, &resource, 10).await;
    let holding = block_in_place(|| masters_holding(&cluster, &format!("lock:{resource}")));
    assert_eq!(holding.len(), 3, "one key on each master: {holding:?}");
    // The oracle reads each node's tagged key on its master: the guard
    // claims no more than a quorum holds...
    let mut urls = Vec::new();
    let mut tagged = Vec::new();
    for check in redlock.check_report().await {
        let (tag, slot) = check.cluster_slot().expect("slot");
        let master = block_in_place(|| cluster.master_of(slot)).expect("owner");
        urls.push(cluster.url(master));
        tagged.push(format!("{{{tag}}}"));
    }
    let oracle = Oracle::new(urls.clone(), redlock.quorum()).with_key_prefixes(tagged.clone());
    oracle.check(&redlock, &guard).await.expect("no violation");
    // ... and sees the violation once two masters lose the key.
    for (url, prefix) in urls.iter().zip(&tagged).take(2) {
        let key = format!("{prefix}{}", redlock.lock_key(&resource));
        let _: i64 = block_in_place(|| query(url, redis::cmd("DEL").arg(&key))).expect("DEL");
    }
    assert!(
        oracle.check(&redlock, &guard).await.is_err(),
        "the oracle is blind"
    );
    let _ = guard.release().await;
    let history = contend(&redlock, &resource, 4, 10).await;
    assert_eq!(history.len(), 40);
    assert!(history.overlaps().is_empty(), "{:?}", history.overlaps());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_masters_pass_the_check_with_each_tag_on_the_slot_the_server_computes() {
    let cluster = block_in_place(|| start(5, 0));
    let redlock = over(&cluster, 5, patient()).await;
    redlock
        .check()
        .await
        .expect("a cluster's masters pass the check");
    let report = redlock.check_report().await;
    let mut slots = Vec::new();
    for check in &report {
        let (tag, slot) = check
            .cluster_slot()
            .expect("a cluster node reports its slot");
        let mut con = block_in_place(|| cluster.connection(0)).expect("connection");
        let server: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(format!("{{{tag}}}redquorum:lock:x"))
            .query(&mut con)
            .expect("KEYSLOT");
        assert_eq!(server, slot, "tag {tag}");
        slots.push(slot);
    }
    slots.dedup();
    assert_eq!(slots.len(), 5);
    let history = contend(&redlock, &unique("cluster-5"), 3, 8).await;
    assert_eq!(history.len(), 24);
    assert!(history.overlaps().is_empty(), "{:?}", history.overlaps());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_with_fewer_masters_than_nodes_is_refused_at_construction() {
    let cluster = block_in_place(|| start(3, 0));
    let err = Redlock::cluster(cluster.url(0), 5, fast_config())
        .await
        .expect_err("5 nodes on 3 masters");
    let Error::Placement(message) = &err else {
        panic!("{err:?}");
    };
    assert!(message.contains("both served by master"), "{message}");
    let err = Redlock::cluster(cluster.url(0), 2, fast_config())
        .await
        .expect_err("2 nodes");
    assert!(matches!(err, Error::Config(_)), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_failover_while_held_keeps_the_lock_exclusive_and_quarantines_the_promoted_replica()
 {
    let cluster = block_in_place(|| start(3, 1));
    let config = fast_config().with_restart_guard(Duration::from_secs(20));
    let holder = over(&cluster, 3, config.clone()).await;
    let reports = holder.init_nodes().await;
    assert!(
        reports.iter().all(|r| *r.outcome() == NodeOutcome::Granted),
        "{reports:?}"
    );
    let other = over(&cluster, 3, config).await;
    let resource = unique("failover");
    let guard = take(&holder, &resource, 15).await;
    let slot = holder.check_report().await[0]
        .cluster_slot()
        .expect("slot")
        .1;
    let old = block_in_place(|| cluster.master_of(slot)).expect("owner");
    // The key reaches the replica before its master dies.
    let mut con = block_in_place(|| cluster.connection(old)).expect("connection");
    let _: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(2000)
        .query(&mut con)
        .expect("WAIT");
    block_in_place(|| cluster.kill(old)).expect("kill");
    let promoted =
        block_in_place(|| cluster.wait_for_owner_other_than(slot, old)).expect("promotion");
    assert_ne!(promoted, old);
    // The other client follows the slot to the promoted replica, which
    // holds the replicated key but is a new process: it is quarantined.
    let deadline = Instant::now() + Duration::from_secs(15);
    let quarantined = loop {
        let err = match other.try_lock(&resource, Duration::from_secs(5)).await {
            Ok(_) => panic!("a second holder while the first holds the lock"),
            Err(e) => e,
        };
        let Error::NotAcquired(attempts) = &err else {
            panic!("{err:?}");
        };
        if matches!(
            attempts.nodes()[0].outcome(),
            NodeOutcome::Quarantined { .. }
        ) {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        quarantined,
        "node 0 never reported the promoted replica's quarantine"
    );
    guard
        .release()
        .await
        .expect("release on the two masters left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_moved_while_held_is_followed_and_a_move_onto_a_used_master_refuses_acquisitions() {
    // Four masters, three nodes: one master serves none of the tags.
    let cluster = block_in_place(|| start(4, 0));
    let holder = over(&cluster, 3, fast_config()).await;
    let other = over(&cluster, 3, fast_config()).await;
    let resource = unique("reshard");
    let mut guard = take(&holder, &resource, 20).await;
    let slots: Vec<u16> = holder
        .check_report()
        .await
        .iter()
        .map(|c| c.cluster_slot().expect("slot").1)
        .collect();
    let used: Vec<usize> = slots
        .iter()
        .map(|&s| block_in_place(|| cluster.master_of(s)).expect("owner"))
        .collect();
    let free = block_in_place(|| cluster.masters())
        .into_iter()
        .find(|m| !used.contains(m))
        .expect("a free master");
    // Node 0's slot, with the held key, moves to the free master.
    block_in_place(|| cluster.move_slot(slots[0], free)).expect("move");
    let suffix = format!("lock:{resource}");
    assert!(block_in_place(|| masters_holding(&cluster, &suffix)).contains(&free));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match other.try_lock(&resource, Duration::from_secs(5)).await {
            Ok(_) => panic!("a second holder after the move"),
            Err(Error::NotAcquired(attempts))
                if attempts
                    .nodes()
                    .iter()
                    .all(|n| *n.outcome() == NodeOutcome::Refused) =>
            {
                break;
            }
            Err(Error::NotAcquired(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("node 0 never refused from the slot's new master: {e}"),
        }
    }
    guard
        .extend(Duration::from_secs(20))
        .await
        .expect("the holder extends on all three masters");
    // Node 1's slot moves onto node 0's master: one master, two votes.
    block_in_place(|| cluster.move_slot(slots[1], free)).expect("move");
    let deadline = Instant::now() + Duration::from_secs(15);
    let message = loop {
        match other
            .try_lock(&unique("after"), Duration::from_secs(5))
            .await
        {
            Err(Error::Placement(message)) => break message,
            _ if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("never refused for a shared master: {other:?}"),
        }
    };
    assert!(
        message.contains("nodes 0") && message.contains("and 1"),
        "{message}"
    );
    guard.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_on_the_cluster_is_woken_by_the_release_not_by_its_retry_delay() {
    let cluster = block_in_place(|| start(3, 0));
    let holder = over(&cluster, 3, fast_config()).await;
    let slow_retries = fast_config()
        .with_retries(3)
        .with_retry_delay(Duration::from_secs(20))
        .with_retry_jitter(Duration::from_millis(1));
    let waiter = over(&cluster, 3, slow_retries).await;
    let resource = unique("woken");
    let guard = take(&holder, &resource, 30).await;
    let waiting = {
        let (waiter, resource) = (waiter.clone(), resource.clone());
        tokio::spawn(async move {
            let guard = waiter.lock(&resource, Duration::from_secs(5)).await;
            (Instant::now(), guard.map(|g| g.valid_until()))
        })
    };
    // The waiter's first attempt is refused and it listens.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let released = Instant::now();
    guard.release().await.expect("release");
    let (acquired, got) = waiting.await.expect("waiter");
    assert!(got.is_ok(), "{got:?}");
    assert!(
        acquired - released < Duration::from_secs(10),
        "woken {:?} after the release: by the retry delay, not the notification",
        acquired - released
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_on_the_cluster_grow_and_each_counter_sits_beside_its_nodes_lock_key() {
    let cluster = block_in_place(|| start(3, 0));
    let config = fast_config()
        .with_fencing(true)
        .with_restart_guard(Duration::from_secs(10));
    let redlock = over(&cluster, 3, config).await;
    redlock.init_nodes().await;
    let resource = unique("fenced");
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let guard = take(&redlock, &resource, 5).await;
        tokens.push(guard.fencing_token().expect("a token"));
        guard.release().await.expect("release");
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    // Each master holds its node's counter and guard record, in the slot
    // of that node's tag (a key of another slot would have been refused).
    for check in redlock.check_report().await {
        let (tag, slot) = check.cluster_slot().expect("slot");
        let master = block_in_place(|| cluster.master_of(slot)).expect("owner");
        let mut con = block_in_place(|| cluster.connection(master)).expect("connection");
        let keys: Vec<String> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(100)
            .query(&mut con)
            .expect("GETKEYSINSLOT");
        assert!(
            keys.iter().any(|k| k.contains("fence:"))
                && keys.iter().all(|k| k.starts_with(&format!("{{{tag}}}"))),
            "{tag}: {keys:?}"
        );
    }
}
