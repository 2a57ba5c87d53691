//! Workers contend for one resource on five Redis nodes while one node is
//! paused for a moment and two nodes are killed and, after the TTL has
//! passed, restarted. Every hold is recorded
//! on one monotonic clock; the demo ends by counting overlapping holds,
//! which must be zero.
//!
//! With `--svg PATH` it also draws the run: one lane per worker with its
//! holds, one per node with its state, the faults, and the verdict.
//!
//! ```sh
//! bash scripts/demo.sh                 # five local redis-server nodes (cargo run --profile demo -p redquorum-demo)
//! bash scripts/demo.sh --svg docs/demo-timeline.svg   # and draw the run
//! REDQUORUM_NODES=redis://127.0.0.1:7001,... bash scripts/demo.sh   # your nodes (no kills)
//! ```

use std::time::Duration;

mod svg;
mod timeline;

use redquorum::testkit::{History, LocalCluster, NodeState, Nodes};
use redquorum::{Config, Error, Redlock};
use tokio::time::Instant;

use crate::timeline::Timeline;

const WORKERS: usize = 6;
const TTL: Duration = Duration::from_millis(1_000);
const RUN: Duration = Duration::from_secs(6);
const PAUSE_AT: Duration = Duration::from_millis(800);
const RESUME_AT: Duration = Duration::from_millis(1_400);
const KILL_AT: Duration = Duration::from_secs(2);
/// Longer than the TTL after the kill: a node restarted empty sooner could
/// grant a lock still held elsewhere.
const RESTART_AT: Duration = Duration::from_millis(4_000);

#[derive(Default)]
struct WorkerStats {
    acquired: u32,
    contended: u32,
    unavailable: u32,
    validity_ms: Vec<u128>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let svg = svg_path()?;
    let nodes = Nodes::from_env(5)?;
    let cluster = nodes.local();
    let urls = nodes.urls();
    println!("nodes: {}", urls.join(", "));
    let config = Config::default()
        .with_node_timeout(Duration::from_millis(50))
        .with_retries(50)
        .with_retry_delay(Duration::from_millis(20))
        .with_retry_jitter(Duration::from_millis(15));
    let redlock = Redlock::with_config(urls.iter().map(String::as_str), config)?;
    println!(
        "{} nodes, quorum {}, TTL {TTL:?}, {WORKERS} workers for {RUN:?}",
        redlock.node_count(),
        redlock.quorum()
    );

    let history = History::default();
    let started = Instant::now();
    let timeline = match cluster {
        Some(cluster) => Timeline::for_cluster(cluster, started),
        None => Timeline::new(
            started,
            urls.iter().map(|u| u.trim_start_matches("redis://")),
        ),
    };
    let mut workers = Vec::new();
    for worker in 0..WORKERS {
        let (redlock, history) = (redlock.clone(), history.clone());
        workers.push(tokio::spawn(async move {
            let mut stats = WorkerStats::default();
            while started.elapsed() < RUN {
                match redlock.lock("demo:report", TTL).await {
                    Ok(guard) => {
                        let start = Instant::now();
                        stats.acquired += 1;
                        stats.validity_ms.push(guard.remaining().as_millis());
                        let work = Duration::from_millis(rand::random_range(5..30));
                        tokio::time::sleep(work).await;
                        let valid_until = guard.valid_until();
                        let released_at = Instant::now();
                        let _ = guard.release().await;
                        history.record(worker, start, valid_until, released_at);
                        tokio::time::sleep(Duration::from_millis(rand::random_range(0..10))).await;
                    }
                    Err(Error::NotAcquired(why))
                        if why.reason() == redquorum::Reason::Unavailable =>
                    {
                        stats.unavailable += 1
                    }
                    Err(Error::NotAcquired(_)) => stats.contended += 1,
                    Err(e) => return Err(e.to_string()),
                }
            }
            Ok::<_, String>(stats)
        }));
    }

    if let Some(cluster) = cluster {
        tokio::time::sleep_until(started + PAUSE_AT).await;
        cluster.pause(4)?;
        timeline.node(4, NodeState::Paused);
        timeline.mark("pause node 4");
        println!(
            "[{:>5} ms] paused node 4 (SIGSTOP): {}",
            started.elapsed().as_millis(),
            states(cluster)
        );
        tokio::time::sleep_until(started + RESUME_AT).await;
        cluster.resume(4)?;
        timeline.node(4, NodeState::Up);
        timeline.mark("resume node 4");
        tokio::time::sleep_until(started + KILL_AT).await;
        cluster.kill(1)?;
        cluster.kill(3)?;
        timeline.node(1, NodeState::Down);
        timeline.node(3, NodeState::Down);
        timeline.mark("kill nodes 1 and 3");
        println!(
            "[{:>5} ms] killed nodes 1 and 3: {}",
            started.elapsed().as_millis(),
            states(cluster)
        );
        tokio::time::sleep_until(started + RESTART_AT).await;
        cluster.restart(1)?;
        cluster.restart(3)?;
        timeline.node(1, NodeState::Up);
        timeline.node(3, NodeState::Up);
        timeline.mark("restart nodes 1 and 3 (empty)");
        println!(
            "[{:>5} ms] restarted nodes 1 and 3 (empty, after the TTL): {}",
            started.elapsed().as_millis(),
            states(cluster)
        );
    } else {
        println!("external nodes: no faults injected");
    }

    println!();
    println!("worker  acquired  contended  unavailable  validity min/median/max (ms)");
    let mut total = 0;
    for (worker, task) in workers.into_iter().enumerate() {
        let mut stats = task.await??;
        stats.validity_ms.sort_unstable();
        let v = &stats.validity_ms;
        let (min, med, max) = match v.len() {
            0 => (0, 0, 0),
            n => (v[0], v[n / 2], v[n - 1]),
        };
        total += stats.acquired;
        println!(
            "{worker:>6}  {:>8}  {:>9}  {:>11}  {min}/{med}/{max}",
            stats.acquired, stats.contended, stats.unavailable
        );
    }
    if let Some(cluster) = cluster {
        println!("node states at the end: {}", states(cluster));
    }
    timeline.end();
    let overlaps = history.overlaps().len();
    println!("acquisitions: {total}");
    println!("overlapping holds: {overlaps}");
    if let Some(path) = svg {
        let title = format!(
            "redquorum demo: {WORKERS} workers, one lock, {} nodes (quorum {}), TTL {TTL:?}",
            redlock.node_count(),
            redlock.quorum()
        );
        svg::write_svg(&history, &path, &timeline, &title)?;
        println!("timeline written to {path}");
    }
    if overlaps > 0 || total == 0 {
        return Err("mutual exclusion violated or no progress".into());
    }
    redlock.shutdown().await;
    Ok(())
}

/// `--svg PATH`, if given.
fn svg_path() -> Result<Option<String>, String> {
    let mut args = std::env::args().skip(1);
    match (args.next().as_deref(), args.next(), args.next()) {
        (None, _, _) => Ok(None),
        (Some("--svg"), Some(path), None) => Ok(Some(path)),
        _ => Err("usage: demo [--svg PATH]".to_owned()),
    }
}

fn states(cluster: &LocalCluster) -> String {
    (0..cluster.len())
        .map(|i| format!("{i}={:?}", cluster.state(i)))
        .collect::<Vec<_>>()
        .join(" ")
}
