#![cfg(feature = "testkit")]
//! The restart guard on real nodes: a node that restarted (or lost its
//! data) refuses to vote for the quarantine, then votes again;
//! `init_nodes` skips the wait; a node keeps the quarantine of the client
//! that began its trust period and refuses another; TTLs above max_ttl are
//! refused; the start-up checks, inspection and the fenced read see the
//! quarantine.

mod common;

use std::time::Duration;

use redquorum::testkit::LocalCluster;
use redquorum::{Config, Error, LockOptions, NodeOutcome, NodeProblem, Redlock};

/// Small, so that waiting out a quarantine keeps the tests quick.
const MAX_TTL: Duration = Duration::from_millis(300);

/// A guarded config that needs every one of 3 nodes, so that one
/// quarantined node fails the attempt and shows in its report.
fn all_of_three(max_ttl: Duration) -> Config {
    common::fast_config()
        .with_retries(0)
        .with_quorum(3)
        .with_restart_guard(max_ttl)
}

/// A fresh Redlock (no open connection) on `cluster`.
fn fresh(cluster: &LocalCluster, config: Config) -> Redlock {
    common::redlock(&cluster.urls(), config)
}

/// Waits until the clean-up of a failed attempt on `resource` has landed
/// on every node: it returns within twice the node timeout, and a delete
/// still in flight then goes on in the background (on a loaded machine the
/// next attempt could meet the key and be refused).
async fn cleaned_up(cluster: &LocalCluster, resource: &str) {
    let (urls, key) = (cluster.urls(), common::key(resource));
    let gone = common::eventually(Duration::from_secs(5), || {
        common::holders_any(&urls, &key) == 0
    })
    .await;
    assert!(gone, "a failed attempt's key on {resource} stayed");
}

/// Node 0's outcome in a failed attempt, or `None` when the lock was taken
/// (it is then released).
async fn node_0(redlock: &Redlock, resource: &str) -> Option<NodeOutcome> {
    match redlock.try_lock(resource, MAX_TTL).await {
        Ok(guard) => {
            guard.release().await.expect("release");
            None
        }
        Err(Error::NotAcquired(why)) => Some(why.nodes()[0].outcome().clone()),
        Err(e) => panic!("{e}"),
    }
}

fn left_of(outcome: Option<NodeOutcome>) -> Duration {
    match outcome {
        Some(NodeOutcome::Quarantined { left }) => left,
        other => panic!("expected node 0 quarantined, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_refuses_votes_for_the_quarantine_and_then_votes_again() {
    let cluster = common::cluster(3);
    let config = all_of_three(MAX_TTL);
    let q = config.quarantine().expect("guard on");
    let redlock = common::guarded(&cluster, config.clone()).await;
    let resource = common::unique("guard-restart");
    assert_eq!(node_0(&redlock, &resource).await, None, "trusted at once");

    cluster.restart_empty(0).expect("restart");
    let redlock = fresh(&cluster, config);
    let first = node_0(&redlock, &resource).await;
    let left = left_of(first.clone());
    assert!(left > Duration::ZERO && left <= q, "left {left:?}, q {q:?}");
    let outcome = first.expect("refused");
    assert!(outcome.is_unavailable() && !outcome.is_misconfigured());
    assert!(outcome.to_string().contains("quarantined"), "{outcome}");

    // Refused until the quarantine is over, then a vote again.
    let mut voted = false;
    for _ in 0..100 {
        match node_0(&redlock, &resource).await {
            // Granted: node 0 voted, though another node answered too late
            // for the lock (a loaded machine).
            None | Some(NodeOutcome::Granted) => {
                voted = true;
                break;
            }
            // Pending: the round ended before node 0's answer came (a
            // loaded machine); neither a refusal nor a vote, so ask again.
            Some(NodeOutcome::Quarantined { .. } | NodeOutcome::Pending) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Some(other) => panic!("node 0 answered {other}"),
        }
    }
    assert!(voted, "node 0 never voted again after its quarantine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_nodes_lets_a_restarted_node_vote_without_waiting() {
    let cluster = common::cluster(3);
    // A quarantine far longer than the test: only init_nodes can end it.
    let config = all_of_three(Duration::from_secs(600));
    drop(common::guarded(&cluster, config.clone()).await);
    cluster.restart_empty(0).expect("restart");
    let redlock = fresh(&cluster, config.clone());
    let resource = common::unique("guard-init");
    assert!(matches!(
        node_0(&redlock, &resource).await,
        Some(NodeOutcome::Quarantined { .. })
    ));
    let marked = redlock.init_nodes().await;
    assert_eq!(marked.len(), 3);
    assert!(
        marked
            .iter()
            .all(|r| *r.outcome() == redquorum::NodeOutcome::Granted),
        "{marked:?}"
    );
    // Node 0 votes (the lock itself may still miss a late answer from
    // another node on a loaded machine). The first attempt's clean-up
    // must be over: a key still on another node refuses at once, and with
    // all three needed the round then ends before node 0's answer.
    cleaned_up(&cluster, &resource).await;
    let after = node_0(&redlock, &resource).await;
    assert!(
        matches!(after, None | Some(NodeOutcome::Granted)),
        "node 0 answered {after:?}"
    );
}

/// The problems `check_report` finds on node `index` that concern the
/// restart guard.
async fn guard_problems(redlock: &Redlock, index: usize) -> Vec<NodeProblem> {
    redlock.check_report().await[index]
        .problems()
        .iter()
        .filter(|p| {
            matches!(
                p,
                NodeProblem::Quarantined { .. } | NodeProblem::QuarantineMismatch { .. }
            )
        })
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_keeps_the_quarantine_of_the_client_that_met_it_first_and_refuses_another() {
    let cluster = common::cluster(3);
    let (long, short) = (
        all_of_three(Duration::from_secs(600)),
        all_of_three(MAX_TTL),
    );
    let long_q = long.quarantine().expect("guard on");
    let short_q = short.quarantine().expect("guard on");
    let resource = common::unique("guard-kept");
    // Every node keeps the short quarantine, then node 0 restarts and the
    // long client meets it first.
    drop(common::guarded(&cluster, short.clone()).await);
    cluster.restart_empty(0).expect("restart");
    let long = fresh(&cluster, long);
    assert!(long.try_lock(&resource, MAX_TTL).await.is_err());
    long.shutdown().await;
    let problems = guard_problems(&long, 0).await;
    assert!(
        matches!(problems[..], [NodeProblem::Quarantined { left, started: true, .. }]
            if left > short_q),
        "{problems:?}"
    );
    for index in [1, 2] {
        let problems = guard_problems(&long, index).await;
        assert!(
            matches!(problems[..], [NodeProblem::QuarantineMismatch { kept, ours, .. }]
                if kept == short_q && ours == long_q),
            "node {index}: {problems:?}"
        );
    }
    // The short client is refused by node 0, which still waits the long
    // quarantine out.
    let short = fresh(&cluster, short);
    tokio::time::sleep(short_q * 2).await;
    match short.try_lock(&resource, MAX_TTL).await {
        Err(Error::NotAcquired(why)) => {
            assert!(why.reason() == redquorum::Reason::Misconfigured, "{why}")
        }
        other => panic!("expected node 0's mismatch to refuse it, got {other:?}"),
    }
    let problems = guard_problems(&short, 0).await;
    assert!(
        problems.iter().any(
            |p| matches!(p, NodeProblem::QuarantineMismatch { kept, ours, .. }
            if *kept == long_q && *ours == short_q)
        ),
        "{problems:?}"
    );
    let problems = guard_problems(&long, 0).await;
    assert!(
        matches!(problems[..], [NodeProblem::Quarantined { left, .. }] if left > short_q),
        "{problems:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_above_max_ttl_is_an_invalid_argument_for_lock_and_extend() {
    let cluster = common::cluster(3);
    let redlock =
        common::guarded(&cluster, common::fast_config().with_restart_guard(MAX_TTL)).await;
    let resource = common::unique("guard-ttl");
    let too_long = MAX_TTL + Duration::from_millis(1);
    match redlock.try_lock(&resource, too_long).await {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("max_ttl"), "{why}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    let mut guard = redlock.try_lock(&resource, MAX_TTL).await.expect("lock");
    match guard.extend(too_long).await {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("max_ttl"), "{why}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    guard.release().await.expect("release");
    let zero = Config::default().with_restart_guard(Duration::ZERO);
    assert!(matches!(
        Redlock::with_config(cluster.urls(), zero),
        Err(Error::Config(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_warns_about_a_quarantined_node_and_inspect_shows_it() {
    let cluster = common::cluster(3);
    let config = all_of_three(Duration::from_secs(600));
    drop(common::guarded(&cluster, config.clone()).await);
    cluster.restart_empty(0).expect("restart");
    let redlock = fresh(&cluster, config);
    let resource = common::unique("guard-check");

    // Before any vote: no record for the new process yet.
    let rows = redlock.check_report().await;
    assert!(
        rows[0]
            .problems()
            .iter()
            .any(|p| matches!(p, NodeProblem::Quarantined { started: false, .. })),
        "{:?}",
        rows[0].problems()
    );
    let _ = node_0(&redlock, &resource).await; // starts the quarantine
    let rows = redlock.check_report().await;
    let problem = rows[0]
        .problems()
        .iter()
        .find(|p| matches!(p, NodeProblem::Quarantined { started: true, .. }))
        .unwrap_or_else(|| panic!("{:?}", rows[0].problems()));
    assert!(problem.is_warning());
    assert!(problem.to_string().contains("quarantined"), "{problem}");
    assert!(rows[1..].iter().all(|r| {
        r.problems()
            .iter()
            .all(|p| !matches!(p, NodeProblem::Quarantined { .. }))
    }));
    redlock
        .check()
        .await
        .expect("a quarantine does not fail the checks");

    let seen = redlock.inspect(&resource).await.expect("inspect");
    assert!(seen.nodes()[0].quarantine().is_some(), "{seen:?}");
    assert_eq!(seen.nodes()[1].quarantine(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_a_node_counts_in_the_fenced_read_once_a_token_was_written_back_to_it() {
    let cluster = common::cluster(3);
    let config = common::fast_config()
        .with_retries(0)
        .with_restart_guard(MAX_TTL);
    let fenced = LockOptions::new().fencing(true);
    let resource = common::unique("guard-fence");
    let redlock = common::guarded(&cluster, config.clone()).await;
    let first = redlock
        .lock_with(&resource, MAX_TTL, &fenced)
        .await
        .expect("lock");
    assert_eq!(first.fencing_token(), Some(1));
    first.release().await.expect("release");

    cluster.restart_empty(0).expect("restart");
    tokio::time::sleep(config.quarantine().expect("guard on") * 2).await;
    // Node 0 is out of quarantine but its counter was lost: with all three
    // needed it is no vote in the fenced read.
    let all = fresh(&cluster, config.clone().with_quorum(3));
    let _ = all.try_lock(&resource, MAX_TTL).await; // starts node 0's quarantine
    tokio::time::sleep(config.quarantine().expect("guard on") * 2).await;
    cleaned_up(&cluster, &resource).await;
    match all.lock_with(&resource, MAX_TTL, &fenced).await {
        Err(Error::NotAcquired(why)) => {
            assert_eq!(
                why.nodes()[0].outcome(),
                &NodeOutcome::CountersUnknown,
                "{why}"
            );
            assert!(why.to_string().contains("not known intact"), "{why}");
        }
        other => panic!("expected node 0 left out of the fenced read, got {other:?}"),
    }
    // A majority of intact nodes issues the next token and writes it back
    // to node 0, which then counts again.
    cleaned_up(&cluster, &resource).await;
    let majority = fresh(&cluster, config);
    let second = majority
        .lock_with(&resource, MAX_TTL, &fenced)
        .await
        .expect("lock");
    assert_eq!(second.fencing_token(), Some(2));
    second.release().await.expect("release");
    majority.shutdown().await; // node 0's write-back and release are done
    let third = all
        .lock_with(&resource, MAX_TTL, &fenced)
        .await
        .expect("lock on all three");
    assert_eq!(third.fencing_token(), Some(3));
    third.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_without_a_readable_since_starts_a_new_quarantine_that_ends() {
    let cluster = common::cluster(3);
    let config = all_of_three(MAX_TTL);
    drop(common::guarded(&cluster, config.clone()).await);
    let hdel = redis::cmd("HDEL")
        .arg("redquorum:restart-guard:node")
        .arg("since")
        .clone();
    let removed: i64 = common::query(&cluster.direct_url(0), &hdel).expect("HDEL");
    assert_eq!(removed, 1);
    let redlock = fresh(&cluster, config);
    let resource = common::unique("guard-since");
    left_of(node_0(&redlock, &resource).await);
    let mut voted = false;
    for _ in 0..100 {
        if node_0(&redlock, &resource).await.is_none() {
            voted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(voted, "node 0 never voted again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_guard_on_every_kind_of_lock_extends() {
    let cluster = common::cluster(3);
    let config = common::fast_config().with_restart_guard(Duration::from_secs(5));
    let ttl = Duration::from_secs(2);
    let plain = common::guarded(&cluster, config.clone()).await;
    let reseeding = fresh(&cluster, config.with_reseed_restarted_nodes(true));
    let resource = common::unique("guard-extend-kinds");
    for redlock in [&plain, &reseeding] {
        let mut guard = redlock.try_lock(&resource, ttl).await.expect("lock");
        guard.extend(ttl).await.expect("extend");
        guard.release().await.expect("release");
    }
    let mut hold = plain
        .lock_with(
            &resource,
            ttl,
            &redquorum::LockOptions::new()
                .owner("job-1")
                .wait(redquorum::Wait::No),
        )
        .await
        .expect("reentrant lock");
    hold.extend(ttl).await.expect("reentrant extend");
    hold.release().await.expect("reentrant release");
}

/// `INFO replication` of the node at `url`.
fn replication(url: &str) -> String {
    common::query::<String>(url, redis::cmd("INFO").arg("replication")).expect("INFO replication")
}

/// Makes the node at `url` a replica of the one at `master` and waits (up
/// to 20 s) until it has synced.
async fn replicate(url: &str, master: &str) {
    let no_delay = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-diskless-sync-delay")
        .arg("0")
        .clone();
    common::query::<()>(master, &no_delay).expect("CONFIG SET");
    let port = common::port_of(master);
    let replicaof = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(&port).clone();
    common::query::<()>(url, &replicaof).expect("REPLICAOF");
    assert!(
        common::eventually(Duration::from_secs(20), || {
            replication(url).contains("master_link_status:up")
        })
        .await,
        "{url} never synced from {master}"
    );
}

fn promote(url: &str) {
    let promote = redis::cmd("REPLICAOF").arg("NO").arg("ONE").clone();
    common::query::<()>(url, &promote).expect("REPLICAOF NO ONE");
}

fn run_id(url: &str) -> String {
    let info = common::query::<String>(url, redis::cmd("INFO").arg("server")).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// A failover to a replica and a failback to the old master with no vote
/// in between: the old master's process (its `run_id`) never changed, but
/// its data is now what the replica had, so it may have forgotten locks.
/// Its replication id changed: it starts a quarantine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_and_failback_with_no_vote_in_between_starts_a_quarantine() {
    let cluster = common::cluster(3);
    let spare = common::cluster(1);
    let config = all_of_three(Duration::from_secs(600));
    let redlock = common::guarded(&cluster, config.clone()).await;
    let resource = common::unique("guard-failback");
    assert_eq!(node_0(&redlock, &resource).await, None, "trusted at once");
    let (primary, replica) = (cluster.direct_url(0), spare.direct_url(0));
    let before = run_id(&primary);
    replicate(&replica, &primary).await;
    // Failover: the replica is promoted, the old master follows it...
    promote(&replica);
    replicate(&primary, &replica).await;
    // ...and failback, with no vote in between.
    promote(&primary);
    assert_eq!(run_id(&primary), before, "the same process");
    let redlock = fresh(&cluster, config);
    left_of(node_0(&redlock, &resource).await);
}

/// A record of an earlier version has no replication id: it is adopted,
/// and the node keeps voting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_without_a_replication_id_is_adopted_without_a_quarantine() {
    let cluster = common::cluster(3);
    let config = all_of_three(MAX_TTL);
    drop(common::guarded(&cluster, config.clone()).await);
    let record = "redquorum:restart-guard:node";
    let url = cluster.direct_url(0);
    let hdel = redis::cmd("HDEL").arg(record).arg("replid").clone();
    let removed: i64 = common::query(&url, &hdel).expect("HDEL");
    assert_eq!(removed, 1, "the record keeps the replication id");
    let redlock = fresh(&cluster, config);
    let resource = common::unique("guard-replid");
    assert_eq!(node_0(&redlock, &resource).await, None, "still trusted");
    let hget = redis::cmd("HGET").arg(record).arg("replid").clone();
    let replid: Option<String> = common::query(&url, &hget).expect("HGET");
    assert!(replid.is_some_and(|r| replication(&url).contains(&r)));
}
