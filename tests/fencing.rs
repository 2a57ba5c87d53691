//! Fencing tokens against real nodes: monotonic under faults, a paused
//! holder's write refused, the cost of one extra round trip, and a negative
//! control that shows what a node losing its counters does.
#![cfg(feature = "testkit")]

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use redquorum::testkit::{FencedResource, LocalCluster, ProxyMode};
use redquorum::{Error, Redlock};
use tokio::time::Instant;

/// `n` local nodes with `appendonly yes` and `appendfsync always`: a
/// restart keeps every acknowledged write.
fn aof_cluster(n: usize) -> LocalCluster {
    let cluster = cluster(n);
    for i in 0..n {
        cluster
            .enable_aof(i)
            .unwrap_or_else(|e| panic!("AOF on node {i}: {e}"));
    }
    cluster
}

fn fenced_config() -> redquorum::Config {
    fast_config().with_fencing(true)
}

/// Ends a blackhole: drops the connections (requests swallowed by the
/// blackhole would otherwise leave the client's replies out of step), then
/// lets traffic through again.
fn heal(cluster: &LocalCluster, i: usize) {
    cluster.set_proxy(i, ProxyMode::Reset);
    std::thread::sleep(Duration::from_millis(20));
    cluster.set_proxy(i, ProxyMode::Pass);
}

fn counter(url: &str, resource: &str) -> Option<String> {
    get(url, &format!("redquorum:fence:{resource}"))
}

#[tokio::test]
async fn tokens_increase_by_one_across_acquisitions_and_stay_the_same_across_extensions() {
    let nodes = nodes();
    let redlock = redlock(&nodes.urls(), fenced_config());
    let oracle = redquorum::testkit::Oracle::new(nodes.direct_urls(), redlock.quorum());
    let resource = unique("fenced");
    let mut previous = None;
    for _ in 0..5 {
        let mut guard = redlock
            .lock(&resource, Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("lock: {e}"));
        oracle.check(&redlock, &guard).await.unwrap();
        let token = guard.fencing_token().expect("fencing is on: a token");
        assert_eq!(guard.fencing_tokens(), Some(&[token][..]));
        if let Some(previous) = previous {
            assert_eq!(token, previous + 1);
        }
        guard
            .extend(Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("extend: {e}"));
        assert_eq!(guard.fencing_token(), Some(token));
        oracle.check(&redlock, &guard).await.unwrap();
        guard
            .release()
            .await
            .unwrap_or_else(|e| panic!("release: {e}"));
        previous = Some(token);
    }
    // The counters are separate keys, kept after the release; the lock key is gone.
    let urls = nodes.direct_urls();
    let settled = eventually(Duration::from_secs(5), || {
        urls.iter().all(|u| get(u, &key(&resource)).is_none())
    })
    .await;
    assert!(settled, "lock keys left behind");
    let written = urls
        .iter()
        .filter(|u| counter(u, &resource) == previous.map(|t| t.to_string()))
        .count();
    assert!(written >= 3, "last token on only {written} nodes");
}

#[tokio::test]
async fn without_fencing_there_is_no_token_and_no_counter() {
    let nodes = nodes();
    let redlock = redlock(&nodes.urls(), fast_config());
    let resource = unique("unfenced");
    let guard = redlock
        .try_lock(&resource, Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("lock: {e}"));
    assert_eq!(guard.fencing_token(), None);
    assert_eq!(guard.fencing_tokens(), None);
    guard
        .release()
        .await
        .unwrap_or_else(|e| panic!("release: {e}"));
    for url in nodes.direct_urls() {
        assert_eq!(counter(&url, &resource), None);
    }
}

#[tokio::test]
async fn a_resource_named_like_a_counter_key_does_not_touch_the_counter() {
    let nodes = nodes();
    let redlock = redlock(&nodes.urls(), fenced_config());
    let resource = unique("clash");
    let first = redlock
        .try_lock(&resource, Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("lock: {e}"));
    // "fence:<resource>" as a resource: its lock key is
    // "redquorum:lock:fence:<resource>", never "redquorum:fence:<resource>".
    let other = redlock
        .try_lock(&format!("fence:{resource}"), Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("lock: {e}"));
    assert_eq!(first.fencing_token(), Some(1));
    assert_eq!(other.fencing_token(), Some(1));
    let urls = nodes.direct_urls();
    let written = eventually(Duration::from_secs(5), || {
        urls.iter()
            .all(|u| counter(u, &resource).as_deref() == Some("1"))
    })
    .await;
    assert!(written, "counter of {resource} not 1 on every node");
    // The acquire returns at a quorum; the last SETs may land just after.
    let all = eventually(Duration::from_secs(5), || {
        holders(&urls, &key(&resource), first.value()) == 5
    })
    .await;
    assert!(all, "not held on all 5 nodes");
    for guard in [first, other] {
        guard
            .release()
            .await
            .unwrap_or_else(|e| panic!("release: {e}"));
    }
    let again = redlock
        .try_lock(&resource, Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("lock: {e}"));
    assert_eq!(again.fencing_token(), Some(2));
    again
        .release()
        .await
        .unwrap_or_else(|e| panic!("release: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_strictly_increase_over_hundreds_of_acquisitions_while_minorities_crash_and_are_cut_off()
 {
    let cluster = Arc::new(aof_cluster(5));
    let config = fenced_config()
        .with_node_timeout(Duration::from_millis(30))
        .with_retries(100_000)
        .with_retry_delay(Duration::from_millis(4))
        .with_retry_jitter(Duration::from_millis(4))
        .with_wait(Duration::from_secs(20));
    let redlock = redlock(&cluster.urls(), config);
    let resource = unique("monotonic");
    // 300 by default (about half a minute on a loaded 2-core machine);
    // REDQUORUM_FENCING_ACQUISITIONS=1000 for a longer run.
    let target: usize = std::env::var("REDQUORUM_FENCING_ACQUISITIONS")
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(300);
    let tokens: Arc<Mutex<Vec<(u64, bool)>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let acquired = Arc::new(AtomicUsize::new(0));

    let nemesis = {
        let (cluster, done) = (Arc::clone(&cluster), Arc::clone(&done));
        tokio::spawn(async move {
            let mut faults = 0u32;
            while !done.load(Ordering::SeqCst) {
                // A minority: one or two distinct nodes, each crashed or cut off.
                let first = rand::random_range(0..5usize);
                let victims = if rand::random_range(0..10) < 3 {
                    vec![first, (first + rand::random_range(1..5usize)) % 5]
                } else {
                    vec![first]
                };
                let mut crashed = Vec::new();
                for &v in &victims {
                    if rand::random::<bool>() {
                        cluster.kill(v).unwrap_or_else(|e| panic!("kill {v}: {e}"));
                        crashed.push(v);
                    } else {
                        cluster.set_proxy(v, ProxyMode::Blackhole);
                    }
                    faults += 1;
                }
                tokio::time::sleep(Duration::from_millis(rand::random_range(30..120))).await;
                let cluster = Arc::clone(&cluster);
                tokio::task::spawn_blocking(move || {
                    for v in victims {
                        if crashed.contains(&v) {
                            // With AOF: the node comes back with its counters.
                            cluster
                                .restart_with_aof(v)
                                .unwrap_or_else(|e| panic!("restart {v}: {e}"));
                        } else {
                            heal(&cluster, v);
                        }
                    }
                })
                .await
                .unwrap_or_else(|e| panic!("heal: {e}"));
                tokio::time::sleep(Duration::from_millis(rand::random_range(30..100))).await;
            }
            faults
        })
    };

    let mut workers = Vec::new();
    for worker in 0..8 {
        let (redlock, resource, tokens, done, acquired) = (
            redlock.clone(),
            resource.clone(),
            Arc::clone(&tokens),
            Arc::clone(&done),
            Arc::clone(&acquired),
        );
        workers.push(tokio::spawn(async move {
            let mut mine = 0u32;
            while !done.load(Ordering::SeqCst) {
                let guard = match redlock.lock(&resource, Duration::from_secs(1)).await {
                    Ok(guard) => guard,
                    Err(e) => panic!("worker {worker}: {e}"),
                };
                let token = guard.fencing_token().expect("fencing is on");
                {
                    // Recorded while holding the lock: the order of the
                    // records is the order of the holds.
                    let mut tokens = tokens.lock().unwrap_or_else(|p| p.into_inner());
                    tokens.push((token, !guard.remaining().is_zero()));
                }
                mine += 1;
                if acquired.fetch_add(1, Ordering::SeqCst) + 1 >= target {
                    done.store(true, Ordering::SeqCst);
                }
                // Under faults the release may not reach a quorum.
                let _ = guard.release().await;
            }
            mine
        }));
    }
    let started = Instant::now();
    let mut per_worker = Vec::new();
    for worker in workers {
        per_worker.push(worker.await.unwrap_or_else(|e| panic!("worker: {e}")));
    }
    let faults = nemesis.await.unwrap_or_else(|e| panic!("nemesis: {e}"));
    let tokens = tokens.lock().unwrap_or_else(|p| p.into_inner()).clone();
    println!(
        "{} acquisitions in {:?} per worker {per_worker:?}, {faults} faults injected, last token {:?}",
        tokens.len(),
        started.elapsed(),
        tokens.last()
    );
    assert!(tokens.len() >= target);
    assert!(faults > 0, "the nemesis injected no fault");
    let late = tokens.iter().filter(|(_, valid)| !valid).count();
    assert_eq!(
        late, 0,
        "{late} tokens recorded after their lock's validity"
    );
    let backwards: Vec<_> = tokens
        .windows(2)
        .filter(|w| w[0].0 >= w[1].0)
        .map(|w| (w[0].0, w[1].0))
        .collect();
    assert!(backwards.is_empty(), "tokens not increasing: {backwards:?}");
}

#[tokio::test]
async fn a_holder_paused_past_its_validity_has_its_write_refused_by_the_fenced_resource() {
    let nodes = nodes();
    let client_a = redlock(&nodes.urls(), fenced_config());
    let client_b = redlock(
        &nodes.urls(),
        fenced_config()
            .with_retries(200)
            .with_retry_delay(Duration::from_millis(10)),
    );
    let store = FencedResource::new();
    let resource = unique("kleppmann");

    let a = client_a
        .try_lock(&resource, Duration::from_millis(300))
        .await
        .unwrap_or_else(|e| panic!("A: {e}"));
    let token_a = a.fencing_token().expect("A has a token");
    // A is paused (GC, swap...) past its validity, without extending.
    tokio::time::sleep_until(a.valid_until() + Duration::from_millis(20)).await;
    assert!(a.remaining().is_zero());

    let b = client_b
        .lock(&resource, Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("B: {e}"));
    let token_b = b.fencing_token().expect("B has a token");
    // Where A's keys outlived its validity (they landed late), B's were
    // refused: B holds a quorum, maybe not every node.
    let urls = nodes.direct_urls();
    let held_by_b = holding(&urls, &key(&resource), b.value());
    assert!(held_by_b.len() >= 3, "{held_by_b:?}");
    assert!(token_b > token_a, "B {token_b} <= A {token_a}");
    store
        .write(&resource, token_b, "written by B")
        .unwrap_or_else(|e| panic!("B's write: {e}"));

    // A resumes and writes, believing it still holds the lock.
    let stale = store
        .write(&resource, token_a, "written by A")
        .expect_err("A's write must be refused");
    assert_eq!((stale.token(), stale.highest()), (token_a, token_b));
    assert_eq!(store.value(&resource).as_deref(), Some("written by B"));
    assert_eq!(store.rejected().len(), 1);
    assert_eq!(store.accepted().len(), 1);

    // A's release reports the loss and leaves B's keys alone.
    assert!(matches!(a.release().await, Err(Error::Expired)));
    let after = holding(&urls, &key(&resource), b.value());
    assert!(
        held_by_b.iter().all(|i| after.contains(i)),
        "B's keys before A's release: {held_by_b:?}, after: {after:?}"
    );
    b.release()
        .await
        .unwrap_or_else(|e| panic!("B release: {e}"));
}

/// Raises the counter on nodes 0, 1, 2 (3 and 4 cut off) to `n`, then
/// moves the quorum to nodes 2, 3, 4 (0 and 1 cut off): node 2 alone is in
/// both quorums.
async fn tokens_across_two_quorums(flush_intersection: bool) -> (u64, u64) {
    let cluster = cluster(5);
    let redlock = redlock(
        &cluster.urls(),
        fenced_config()
            .with_node_timeout(Duration::from_millis(100))
            .with_retries(50),
    );
    let resource = unique("intersection");
    cluster.set_proxy(3, ProxyMode::Blackhole);
    cluster.set_proxy(4, ProxyMode::Blackhole);
    let mut last = 0;
    for _ in 0..5 {
        let guard = redlock
            .lock(&resource, Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("first quorum: {e}"));
        last = guard.fencing_token().expect("a token");
        let _ = guard.release().await;
    }
    // Calls to 3 and 4 still on their way (chained behind earlier calls to
    // those nodes) are sent, and lost, while the nodes are cut off.
    redlock.shutdown().await;
    let direct = cluster.direct_urls();
    for url in &direct[3..] {
        assert_eq!(counter(url, &resource), None, "node cut off yet written");
    }
    heal(&cluster, 3);
    heal(&cluster, 4);
    cluster.set_proxy(0, ProxyMode::Blackhole);
    cluster.set_proxy(1, ProxyMode::Blackhole);
    if flush_intersection {
        query::<()>(&direct[2], &redis::cmd("FLUSHALL"))
            .unwrap_or_else(|e| panic!("FLUSHALL: {e}"));
    }
    let guard = redlock
        .lock(&resource, Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("second quorum: {e}"));
    let next = guard.fencing_token().expect("a token");
    let _ = guard.release().await;
    (last, next)
}

#[tokio::test]
async fn the_node_shared_by_two_quorums_carries_the_token_across() {
    let (before, after) = tokens_across_two_quorums(false).await;
    assert_eq!(before, 5);
    assert_eq!(after, before + 1);
}

#[tokio::test]
async fn negative_control_flushing_the_only_shared_node_makes_a_token_go_backwards() {
    // The documented caveat, demonstrated: a node that loses its counters
    // (FLUSHALL, restart without AOF, eviction) breaks monotonicity.
    let (before, after) = tokens_across_two_quorums(true).await;
    assert_eq!(before, 5);
    assert!(
        after < before,
        "expected a token going backwards, got {before} then {after}"
    );
    assert_eq!(after, 1);
}

/// Watches one node with `MONITOR` and counts the commands clients send
/// (commands run inside scripts, shown as `[0 lua]`, are not counted).
struct Monitor {
    stream: TcpStream,
    reader: std::thread::JoinHandle<HashMap<String, u64>>,
}

impl Monitor {
    fn start(addr: &str) -> Monitor {
        let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
        stream
            .write_all(b"MONITOR\r\n")
            .unwrap_or_else(|e| panic!("MONITOR: {e}"));
        let mut lines =
            BufReader::new(stream.try_clone().unwrap_or_else(|e| panic!("{e}"))).lines();
        // "+OK" once MONITOR is in force.
        let ok = lines.next().and_then(Result::ok);
        assert_eq!(ok.as_deref(), Some("+OK"));
        let reader = std::thread::spawn(move || {
            let mut calls = HashMap::new();
            for line in lines.map_while(Result::ok) {
                // +<time> [<db> <client>] "<command>" "<arg>"...
                let Some((source, command)) = line.split_once("] ") else {
                    continue;
                };
                if source.ends_with(" lua") {
                    continue;
                }
                let name = command.split('"').nth(1).unwrap_or("").to_lowercase();
                *calls.entry(name).or_insert(0u64) += 1;
            }
            calls
        });
        Monitor { stream, reader }
    }

    fn stop(self) -> HashMap<String, u64> {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        self.reader
            .join()
            .unwrap_or_else(|_| panic!("monitor reader panicked"))
    }
}

/// Per node, the commands clients sent during `rounds` acquire+release pairs.
async fn commands_per_node(
    redlock: &Redlock,
    addrs: &[String],
    rounds: u64,
) -> Vec<HashMap<String, u64>> {
    let resource = unique("cost");
    // Warm up: connections opened, scripts loaded on every node.
    for _ in 0..2 {
        let guard = redlock
            .try_lock(&resource, Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("lock: {e}"));
        guard
            .release()
            .await
            .unwrap_or_else(|e| panic!("release: {e}"));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let monitors: Vec<_> = addrs.iter().map(|a| Monitor::start(a)).collect();
    for round in 0..rounds {
        // A resource per round: no round waits for the last deletes of the one before.
        let guard = redlock
            .try_lock(&format!("{resource}-{round}"), Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("lock: {e}"));
        guard
            .release()
            .await
            .unwrap_or_else(|e| panic!("release: {e}"));
    }
    // Calls left in flight at the early decision finish in the background.
    tokio::time::sleep(Duration::from_millis(300)).await;
    monitors.into_iter().map(Monitor::stop).collect()
}

#[tokio::test]
async fn fencing_costs_exactly_one_more_command_per_node_per_acquisition() {
    let cluster = cluster(5);
    let addrs: Vec<String> = cluster
        .direct_urls()
        .iter()
        .map(|u| {
            u.trim_start_matches("redis://")
                .trim_end_matches('/')
                .to_owned()
        })
        .collect();
    const ROUNDS: u64 = 10;
    // A generous node timeout: a timed-out call would spoil the count.
    let config = fast_config().with_node_timeout(Duration::from_secs(2));
    let plain = redlock(&cluster.urls(), config.clone());
    let plain = commands_per_node(&plain, &addrs, ROUNDS).await;
    let fenced = redlock(&cluster.urls(), config.with_fencing(true));
    let fenced = commands_per_node(&fenced, &addrs, ROUNDS).await;
    println!("plain: {plain:?}\nfenced: {fenced:?}");
    let total = |m: &HashMap<String, u64>| m.values().sum::<u64>();
    for (node, (plain, fenced)) in plain.iter().zip(&fenced).enumerate() {
        // Plain: SET NX PX, then the release script.
        let expect = HashMap::from([("set".to_owned(), ROUNDS), ("evalsha".to_owned(), ROUNDS)]);
        assert_eq!(plain, &expect, "node {node}");
        // Fenced: the acquire script, the write-back script, the release script.
        let expect = HashMap::from([("evalsha".to_owned(), 3 * ROUNDS)]);
        assert_eq!(fenced, &expect, "node {node}");
        assert_eq!(total(fenced), total(plain) + ROUNDS, "node {node}");
    }
}

#[tokio::test]
async fn a_failed_fenced_attempt_leaves_no_lock_key_and_no_counter_change() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), fenced_config().with_retries(0));
    let resource = unique("fenced-contended");
    let first = redlock
        .try_lock(&resource, Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("lock: {e}"));
    let held = holding(&urls, &key(&resource), first.value());
    assert!(held.len() >= 3, "{held:?}");
    let err = redlock
        .try_lock(&resource, Duration::from_secs(5))
        .await
        .expect_err("held: must fail");
    assert!(
        matches!(&err, Error::NotAcquired(a) if a.reason() == redquorum::Reason::Contended),
        "{err}"
    );
    // The failed attempt's clean-up deleted none of our keys (a call of
    // ours that timed out unsent on a loaded machine may have left a node
    // without one: only the nodes that held it are checked).
    let after = holding(&urls, &key(&resource), first.value());
    assert!(
        held.iter().all(|i| after.contains(i)),
        "ours before the failed attempt: {held:?}, after: {after:?}"
    );
    first
        .release()
        .await
        .unwrap_or_else(|e| panic!("release: {e}"));
    let next = redlock
        .try_lock(&resource, Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("lock: {e}"));
    // The refused attempt consumed no token.
    assert_eq!(next.fencing_token(), Some(2));
    next.release()
        .await
        .unwrap_or_else(|e| panic!("release: {e}"));
}
