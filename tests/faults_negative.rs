#![cfg(feature = "testkit")]
//! Negative controls: runs that break Redlock's assumptions must show an
//! overlap in the checker (so a green run means something), and the same
//! runs done safely must not.

mod common;

use std::time::Duration;

use redquorum::testkit::{History, LocalCluster, ProxyMode};
use redquorum::{Error, NodeOutcome, Redlock};
use tokio::time::Instant;

const TTL: Duration = Duration::from_millis(1500);

enum Break {
    /// Node 2 restarted empty at once.
    RestartEmpty,
    /// Node 2 restarted after the TTL.
    RestartAfterTtl,
    /// Node 2 restarted with AOF (`appendfsync always`).
    RestartWithAof,
    /// Node 2 forgets the key early (clock jump).
    ExpireEarly,
    /// An RDB snapshot of node 2 is taken before A locks; node 2 is then
    /// killed (`SIGKILL`) and restarted from it.
    RestartFromSnapshot,
    /// `FLUSHALL` on node 2.
    Flushall,
    /// Nothing breaks.
    Nothing,
}

/// Client A holds the lock on nodes 0, 1, 2 (3 and 4 cut off from it);
/// node 2, the intersection with {2, 3, 4}, is then broken as told; client
/// B tries {2, 3, 4}. Returns the history of both holds.
async fn run(how: Break) -> History {
    run_guarded(how, false).await.0
}

/// [`run`], with the restart guard on (max_ttl = TTL) when `guard`; also
/// says whether B was refused with node 2 quarantined.
async fn run_guarded(how: Break, guard: bool) -> (History, bool) {
    let cluster = common::cluster(5);
    let urls = cluster.urls();
    let config = common::fast_config().with_retries(0);
    let config = if guard {
        let config = config.with_restart_guard(TTL);
        // Marks the nodes trusted through a Redlock of its own, so that B,
        // as without the guard, first connects to node 2 after the break.
        drop(common::guarded(&cluster, config.clone()).await);
        config
    } else {
        config
    };
    let (a, b): (Redlock, Redlock) = (
        common::redlock(&urls, config.clone()),
        common::redlock(&urls, config),
    );
    let resource = common::unique("negative");
    let history = History::default();
    if matches!(how, Break::RestartWithAof) {
        cluster.enable_aof(2).unwrap_or_else(|e| panic!("{e}"));
    }
    if matches!(how, Break::RestartFromSnapshot) {
        cluster.save(2).unwrap_or_else(|e| panic!("{e}"));
    }
    cut(&cluster, ProxyMode::Blackhole);
    let first = a
        .try_lock(&resource, TTL)
        .await
        .unwrap_or_else(|e| panic!("A: {e}"));
    let first_at = Instant::now();
    // A returns at its quorum, before its calls to nodes 3 and 4 may have
    // been read by their proxies; bytes read once the proxy passes again
    // would be forwarded, and A would hold four nodes. Closing the cut
    // connections first drops them with whatever they still carry.
    cut(&cluster, ProxyMode::Reset);
    cut(&cluster, ProxyMode::Pass);
    let cluster = std::sync::Arc::new(cluster);
    let c = std::sync::Arc::clone(&cluster);
    let key = common::key(&resource);
    tokio::task::spawn_blocking(move || match how {
        Break::RestartEmpty => c.restart_empty(2),
        Break::RestartAfterTtl => {
            c.kill(2)?;
            std::thread::sleep(TTL + TTL / 5);
            c.restart_empty(2)
        }
        Break::RestartWithAof => c.restart_with_aof(2),
        Break::ExpireEarly => c.expire_now(2, &key).map(|_| ()),
        Break::RestartFromSnapshot => c.restart_from_snapshot(2),
        Break::Flushall => c.flushall(2),
        Break::Nothing => Ok(()),
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
    .unwrap_or_else(|e| panic!("{e}"));
    let mut quarantined = false;
    match b.try_lock(&resource, TTL).await {
        Ok(second) => {
            history.record(
                1,
                Instant::now(),
                second.valid_until(),
                Instant::now() + TTL,
            );
            drop(second);
        }
        Err(Error::NotAcquired(why)) => {
            eprintln!("B: {why}");
            quarantined = matches!(why.nodes()[2].outcome(), NodeOutcome::Quarantined { .. });
        }
        Err(e) => panic!("B: {e}"),
    }
    history.record(0, first_at, first.valid_until(), first.valid_until());
    drop(first);
    (history, quarantined)
}

/// Prints the run's figures, one line per scenario.
fn report(label: &str, history: &History, note: &str) {
    eprintln!(
        "[{label}] holds={} overlaps={}{note}",
        history.len(),
        history.overlaps().len()
    );
}

fn cut(cluster: &LocalCluster, mode: ProxyMode) {
    cluster.set_proxy(3, mode);
    cluster.set_proxy(4, mode);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_immediate_empty_restart_in_the_quorum_intersection_is_detected() {
    let history = run(Break::RestartEmpty).await;
    report("negative: restart empty", &history, " (DETECTED expected)");
    assert_eq!(
        history.overlaps().len(),
        1,
        "the checker must see the overlap"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_early_expiry_while_two_nodes_are_cut_off_is_detected() {
    let history = run(Break::ExpireEarly).await;
    report("negative: early expiry", &history, " (DETECTED expected)");
    assert_eq!(
        history.overlaps().len(),
        1,
        "the checker must see the overlap"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_delayed_past_the_ttl_shows_no_overlap() {
    let history = run(Break::RestartAfterTtl).await;
    report("control: delayed restart", &history, "");
    assert_eq!(history.len(), 2, "B must get the lock once A's has expired");
    assert!(history.overlaps().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_aof_fsync_always_shows_no_overlap() {
    let history = run(Break::RestartWithAof).await;
    report("control: aof restart", &history, "");
    assert_eq!(
        history.len(),
        1,
        "node 2 must still hold A's key, so B is refused"
    );
    assert!(history.overlaps().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_early_expiry_the_second_client_is_refused() {
    let history = run(Break::Nothing).await;
    report("control: no expiry", &history, "");
    assert_eq!(history.len(), 1);
    assert!(history.overlaps().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_restart_guard_an_immediate_empty_restart_in_the_intersection_shows_no_overlap() {
    let (history, quarantined) = run_guarded(Break::RestartEmpty, true).await;
    assert!(quarantined, "B must be refused by node 2's quarantine");
    report("guard: restart empty", &history, "");
    assert_eq!(history.len(), 1, "the restarted node must refuse B's vote");
    assert!(history.overlaps().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_restart_from_an_older_rdb_snapshot_in_the_intersection_is_detected() {
    let history = run(Break::RestartFromSnapshot).await;
    report("negative: rdb restart", &history, " (DETECTED expected)");
    assert_eq!(
        history.overlaps().len(),
        1,
        "the snapshot predates A's key: the checker must see the overlap"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_restart_guard_a_crash_restart_from_an_older_rdb_snapshot_shows_no_overlap() {
    // The snapshot holds the guard's record (written by init_nodes before
    // SAVE) but not A's key: the record's run_id is the old process's.
    let (history, quarantined) = run_guarded(Break::RestartFromSnapshot, true).await;
    assert!(quarantined, "B must be refused by node 2's quarantine");
    report("guard: rdb restart", &history, "");
    assert_eq!(history.len(), 1, "the restarted node must refuse B's vote");
    assert!(history.overlaps().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_restart_guard_a_flushall_in_the_intersection_shows_no_overlap() {
    let (history, quarantined) = run_guarded(Break::Flushall, true).await;
    assert!(quarantined, "B must be refused by node 2's quarantine");
    report("guard: flushall", &history, "");
    assert_eq!(history.len(), 1, "the flushed node must refuse B's vote");
    assert!(history.overlaps().is_empty());
}
