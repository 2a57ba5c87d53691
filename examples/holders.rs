//! Many held locks, each auto-extended: what each held lock costs.
//!
//! For each size in `HOLDERS` (default `1000 10000`), on five local nodes:
//! takes that many locks with `try_lock`, turns on auto-extension on each,
//! and prints
//! - client memory per held lock (resident set size, from
//!   `/proc/self/statm`, after the locks were taken minus before);
//! - over `SECS` seconds of holding (default 8): extension rounds per
//!   second, client CPU per extension round, and per extended lock the
//!   servers' CPU (`/proc/<pid>/stat` of the five `redis-server`s) and
//!   their script time (`INFO commandstats`, `usec` of `EVALSHA`);
//! - over `PROBE_SECS` more (default 3), while the locks are still held and
//!   extended: `try_lock` + release of a new resource every 5 ms, its
//!   latency p50 and p99;
//! - how many of the held locks were lost (the watchdog gave up, or the
//!   guard's validity ran out): must be 0.
//!
//! ```text
//! cargo run --release --features testkit --example holders
//! HOLDERS="1000 10000 100000" TTL_MS=30000 SECS=40 cargo run --release --features testkit --example holders
//! ```
//!
//! With `CALLGRIND_DIR` set (by `scripts/holders-instructions.sh`, which
//! starts the servers under `valgrind --tool=callgrind` writing there), it
//! also prints the servers' instructions per extended lock: their counters
//! are zeroed before the hold and dumped after it, minus their idle rate
//! (measured first, before any lock is taken) over the hold.
//!
//! An extended lock is counted on the servers, as `PEXPIRE` calls (an
//! extension raises each key's TTL with one) over the number of nodes,
//! so the figure holds whether extensions are sent one call per lock or
//! batched.
//!
//! With `TIMELINE` set, it also prints, per second from the first lock
//! taken to the last probe, the extensions done (node 0's `PEXPIRE`s), the
//! client's and the five servers' CPU (in % of one core), and the probes
//! made in that second with their p99: what the new `try_lock`s compete
//! with.
//!
//! `NODE_TIMEOUT_MS` (default 100) is the node timeout. `TTL_MS` (default 3000) is each lock's TTL: the watchdog extends a lock
//! when a third of it is left, so about every `2/3 x TTL`. One process,
//! two runtime threads; the servers run on the same two cores.

mod support;

use std::time::Duration;

use futures::{FutureExt, StreamExt};
use redquorum::testkit::Nodes;
use redquorum::{LockGuard, Redlock};
use tokio::time::Instant;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// User + system CPU time of a process (`self` or a pid), from
/// `/proc/<pid>/stat`; zero when unknown.
fn cpu_time(pid: &str) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
    let field = |n: usize| -> u64 {
        rest.split_whitespace()
            .nth(n)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    let ticks = field(11) + field(12);
    // SAFETY: sysconf only reads a system constant.
    let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Duration::from_secs_f64(ticks as f64 / per_sec.max(1) as f64)
}

/// One node's counts since its last `CONFIG RESETSTAT`: `EVALSHA` calls,
/// their total time in microseconds, and `PEXPIRE` calls (from scripts).
fn command_stats(conn: &mut redis::Connection) -> [u64; 3] {
    let info: redis::RedisResult<redis::InfoDict> =
        redis::cmd("INFO").arg("commandstats").query(conn);
    let info = info.ok();
    let stat = |command: &str, name: &str| -> u64 {
        let line: String = (info.as_ref())
            .and_then(|info| info.get(&format!("cmdstat_{command}")))
            .unwrap_or_default();
        line.split(',')
            .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    [
        stat("evalsha", "calls"),
        stat("evalsha", "usec"),
        stat("pexpire", "calls"),
    ]
}

/// One reading of the timeline (`TIMELINE`): node 0's `PEXPIRE` calls
/// (counted since its last `CONFIG RESETSTAT`), the client's and the
/// servers' CPU time.
struct Reading {
    at: Instant,
    pexpires: u64,
    client: Duration,
    servers: Duration,
}

/// Reads the timeline every 250 ms on a thread of its own until `stop`.
fn sample(
    mut conn: redis::Connection,
    pids: Vec<String>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Vec<Reading>> {
    std::thread::spawn(move || {
        let mut readings = Vec::new();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            readings.push(Reading {
                at: Instant::now(),
                pexpires: command_stats(&mut conn)[2],
                client: cpu_time("self"),
                servers: pids.iter().map(|p| cpu_time(p)).sum(),
            });
            std::thread::sleep(Duration::from_millis(250));
        }
        readings
    })
}

/// Prints the timeline per second from `origin`: extensions, CPU, and the
/// probes (`(started, latency)`) of each second.
fn print_timeline(origin: Instant, readings: &[Reading], probes: &[(Instant, Duration)]) {
    let second = |at: Instant| at.saturating_duration_since(origin).as_secs();
    let mut lines =
        std::collections::BTreeMap::<u64, (u64, Duration, Duration, Vec<Duration>)>::new();
    for pair in readings.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        // A RESETSTAT between the two readings restarts the count.
        let done = if b.pexpires >= a.pexpires {
            b.pexpires - a.pexpires
        } else {
            b.pexpires
        };
        let line = lines.entry(second(b.at)).or_default();
        line.0 += done;
        line.1 += b.client.saturating_sub(a.client);
        line.2 += b.servers.saturating_sub(a.servers);
    }
    for (started, took) in probes {
        lines.entry(second(*started)).or_default().3.push(*took);
    }
    println!("  second: extensions (node 0), client CPU, servers CPU, probes p99");
    for (s, (done, client, servers, mut probes)) in lines {
        probes.sort_unstable();
        let p99 = if probes.is_empty() {
            String::new()
        } else {
            let p99 = percentile(&probes, 0.99).as_secs_f64() * 1e6;
            format!(", {} probes p99 {p99:.0} us", probes.len())
        };
        println!(
            "  {s:>4}: {done:>6} ext, client {:>3.0}%, servers {:>3.0}%{p99}",
            client.as_secs_f64() * 100.0,
            servers.as_secs_f64() * 100.0
        );
    }
}

/// The servers under callgrind: zeroes their counters, and later dumps
/// them and sums what they counted since.
struct Callgrind {
    dir: String,
    pids: Vec<String>,
    dumps: u32,
}

impl Callgrind {
    fn from_env(pids: &[String]) -> Option<Self> {
        let dir = std::env::var("CALLGRIND_DIR").ok()?;
        Some(Callgrind {
            dir,
            pids: pids.to_vec(),
            dumps: 0,
        })
    }

    fn control(&self, flag: &str) {
        for pid in &self.pids {
            let _ = std::process::Command::new("callgrind_control")
                .args([flag, pid])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        }
    }

    fn zero(&self) {
        self.control("-z");
    }

    /// Instructions over the five servers since the last `zero`.
    fn dump(&mut self) -> u64 {
        self.control("-d");
        self.dumps += 1;
        let summary = |pid: &String| -> u64 {
            let path = format!("{}/cg.{pid}.{}", self.dir, self.dumps);
            let text = std::fs::read_to_string(path).unwrap_or_default();
            (text.lines())
                .find_map(|line| line.strip_prefix("summary: "))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0)
        };
        self.pids.iter().map(summary).sum()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len().saturating_sub(1)) as f64 * p) as usize;
    sorted.get(index).copied().unwrap_or_default()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sizes: Vec<usize> = std::env::var("HOLDERS")
        .unwrap_or_else(|_| "1000 10000".to_owned())
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect();
    let ttl = Duration::from_millis(env_u64("TTL_MS", 3000));
    let secs = Duration::from_secs(env_u64("SECS", 8));
    let probe_secs = Duration::from_secs(env_u64("PROBE_SECS", 3));
    let nodes = Nodes::from_env(5)?;
    let cluster = nodes
        .local()
        .ok_or("needs local nodes (unset REDQUORUM_NODES)")?;
    let pids: Vec<String> = (0..cluster.len())
        .filter_map(|i| cluster.pid(i).map(|p| p.to_string()))
        .collect();
    let mut stats: Vec<redis::Connection> = (0..cluster.len())
        .map(|i| cluster.connection(i))
        .collect::<Result<_, _>>()?;
    let mut callgrind = Callgrind::from_env(&pids);
    // The servers' instructions per second with no traffic.
    let idle_rate = match &mut callgrind {
        Some(callgrind) => {
            callgrind.zero();
            let start = Instant::now();
            tokio::time::sleep(Duration::from_secs(3)).await;
            callgrind.dump() as f64 / start.elapsed().as_secs_f64()
        }
        None => 0.0,
    };
    let urls = nodes.direct_urls();
    // Under callgrind the servers answer far slower than the default
    // node timeout allows.
    let node_timeout = Duration::from_millis(env_u64("NODE_TIMEOUT_MS", 100));
    let config = redquorum::Config::default().with_node_timeout(node_timeout);
    let redlock = Redlock::with_config(urls.iter().map(String::as_str), config)?;
    // Connections and scripts first.
    redlock
        .try_lock("holders:warm", ttl)
        .await?
        .release()
        .await?;
    println!(
        "five local nodes, one client (2 runtime threads), TTL {ttl:?}, hold {secs:?}, \
         probe {probe_secs:?}"
    );
    for (round, &size) in sizes.iter().enumerate() {
        let rss_before = support::rss_bytes();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler = match std::env::var_os("TIMELINE") {
            Some(_) => Some(sample(cluster.connection(0)?, pids.clone(), stop.clone())),
            None => None,
        };
        let acquiring = Instant::now();
        let guards: Vec<LockGuard> = futures::stream::iter(0..size)
            .map(|i| {
                let redlock = redlock.clone();
                async move {
                    let resource = format!("holders:{}:{round}:{i}", std::process::id());
                    let mut guard = redlock.try_lock(&resource, ttl).await?;
                    guard.auto_extend();
                    Ok::<_, redquorum::Error>(guard)
                }
            })
            .buffer_unordered(256)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        let per_lock = support::rss_bytes().saturating_sub(rss_before) as f64 / size as f64;
        let acquired_in = acquiring.elapsed();

        for conn in &mut stats {
            redis::cmd("CONFIG").arg("RESETSTAT").exec(conn)?;
        }
        let servers = |pids: &[String]| pids.iter().map(|p| cpu_time(p)).sum::<Duration>();
        if let Some(callgrind) = &callgrind {
            callgrind.zero();
        }
        let (client0, servers0, start) = (cpu_time("self"), servers(&pids), Instant::now());
        tokio::time::sleep(secs).await;
        let elapsed = start.elapsed();
        let instructions = (callgrind.as_mut())
            .map(|callgrind| callgrind.dump() as f64 - idle_rate * start.elapsed().as_secs_f64());
        let client = cpu_time("self").saturating_sub(client0);
        let server = servers(&pids).saturating_sub(servers0);
        let [calls, usec, raised] = stats
            .iter_mut()
            .map(command_stats)
            .fold([0; 3], |[c, u, p], [calls, usec, raised]| {
                [c + calls, u + usec, p + raised]
            });
        // One extended lock: one PEXPIRE on each of the five nodes.
        let rounds = raised as f64 / urls.len() as f64;

        let (mut latencies, mut probes) = (Vec::new(), Vec::new());
        let probe_end = Instant::now() + probe_secs;
        let mut probe = 0u64;
        while Instant::now() < probe_end {
            probe += 1;
            let resource = format!("holders:probe:{}:{round}:{probe}", std::process::id());
            let started = Instant::now();
            let guard = redlock.try_lock(&resource, ttl).await?;
            let took = started.elapsed();
            latencies.push(took);
            probes.push((started, took));
            guard.release().await?;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        latencies.sort_unstable();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let readings = sampler.map(|s| s.join().unwrap_or_default());

        let lost = guards
            .iter()
            .filter(|g| g.lost().now_or_never().is_some() || g.remaining().is_zero())
            .count();
        let failed_releases: usize = futures::stream::iter(guards)
            .map(|guard| async move { usize::from(guard.release().await.is_err()) })
            .buffer_unordered(256)
            .fold(0, |sum, failed| async move { sum + failed })
            .await;
        let per_round = |d: Duration| d.as_secs_f64() * 1e6 / rounds.max(1.0);
        println!("holders={size} (taken in {acquired_in:.1?})");
        println!("  client memory per held lock: {per_lock:.0} bytes");
        println!(
            "  extension rounds: {:.0}/s; per extended lock: client CPU {:.1} us, \
             server CPU {:.1} us, server script time {:.1} us (5 nodes); \
             {:.1} locks per EVALSHA",
            rounds / elapsed.as_secs_f64(),
            per_round(client),
            per_round(server),
            usec as f64 / rounds.max(1.0),
            raised as f64 / calls.max(1) as f64,
        );
        if let Some(instructions) = instructions {
            println!(
                "  server instructions per extended lock (5 nodes, idle subtracted): {:.0}",
                instructions / rounds.max(1.0)
            );
        }
        println!(
            "  try_lock of a new resource while held: p50 {:.0} us, p99 {:.0} us ({} probes)",
            percentile(&latencies, 0.5).as_secs_f64() * 1e6,
            percentile(&latencies, 0.99).as_secs_f64() * 1e6,
            latencies.len()
        );
        println!("  lost locks: {lost} (releases that failed: {failed_releases})");
        if let Some(readings) = readings {
            print_timeline(acquiring, &readings, &probes);
        }
    }
    redlock.shutdown().await;
    Ok(())
}
