//! redquorum vs rslock on the same five nodes, same scenarios, one table.
//!
//! ```text
//! cd benches/peers && cargo run --release -- --secs 3 --json peers.json
//! ```
//!
//! Nodes: five local `redis-server` processes (direct ports, no proxy), or
//! `REDLOCK_NODES`. Each scenario runs in `--rounds` rounds (default 5),
//! alternating the two libraries so that background load hits both alike;
//! the table shows medians across rounds.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redquorum::Redlock;
use redquorum::testkit::LocalCluster;
use rslock::LockManager;

const TTL: Duration = Duration::from_secs(10);

static NEXT: AtomicU64 = AtomicU64::new(0);

fn fresh(prefix: &str) -> String {
    format!(
        "peers:{prefix}:{}:{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// One library under test.
#[derive(Clone)]
enum Lib {
    Ours(Redlock),
    Peer(Arc<LockManager>),
}

impl Lib {
    async fn pair(&self, resource: &str) {
        match self {
            Lib::Ours(r) => {
                let guard = r.try_lock(resource, TTL).await.expect("redquorum try_lock");
                guard.release().await.expect("redquorum release");
            }
            Lib::Peer(m) => {
                let lock = m.lock(resource, TTL).await.expect("rslock lock");
                m.unlock(&lock).await;
            }
        }
    }

    /// Mean time of one `extend` of a held lock, over `n` calls.
    async fn extends(&self, n: u32) -> Duration {
        let resource = fresh("extend");
        match self {
            Lib::Ours(r) => {
                let mut guard = r
                    .try_lock(&resource, TTL)
                    .await
                    .expect("redquorum try_lock");
                let start = Instant::now();
                for _ in 0..n {
                    guard.extend(TTL).await.expect("redquorum extend");
                }
                let spent = start.elapsed();
                guard.release().await.expect("redquorum release");
                spent / n
            }
            Lib::Peer(m) => {
                let mut lock = m.lock(resource.as_str(), TTL).await.expect("rslock lock");
                let start = Instant::now();
                for _ in 0..n {
                    lock = m.extend(&lock, TTL).await.expect("rslock extend");
                }
                let spent = start.elapsed();
                m.unlock(&lock).await;
                spent / n
            }
        }
    }
}

/// Median per-pair latency of sequential pairs for `secs`.
async fn sequential(lib: &Lib, secs: Duration) -> (Duration, f64) {
    let resource = fresh("seq");
    let mut samples = Vec::new();
    let start = Instant::now();
    while start.elapsed() < secs {
        let t = Instant::now();
        lib.pair(&resource).await;
        samples.push(t.elapsed());
    }
    let rate = samples.len() as f64 / start.elapsed().as_secs_f64();
    samples.sort();
    (samples[samples.len() / 2], rate)
}

/// This process's CPU time (user + system) in clock ticks (1/100 s on Linux).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses).
    let rest = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    field(11) + field(12)
}

/// Pairs per second with `tasks` tasks on distinct resources for `secs`,
/// and the client CPU time per pair in microseconds.
async fn concurrent(lib: &Lib, tasks: usize, secs: Duration) -> (f64, f64) {
    let done = Arc::new(AtomicU64::new(0));
    let cpu_start = cpu_ticks();
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (lib, done) = (lib.clone(), Arc::clone(&done));
            tokio::spawn(async move {
                let resource = fresh("tp");
                while start.elapsed() < secs {
                    lib.pair(&resource).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for h in handles {
        h.await.expect("task");
    }
    let pairs = done.load(Ordering::Relaxed) as f64;
    let cpu_us = (cpu_ticks() - cpu_start) as f64 * 10_000.0;
    (pairs / start.elapsed().as_secs_f64(), cpu_us / pairs)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Row {
    scenario: &'static str,
    unit: &'static str,
    ours: f64,
    peer: f64,
    higher_is_better: bool,
}

impl Row {
    /// How many times better ours is (> 1: ours wins).
    fn ratio(&self) -> f64 {
        if self.higher_is_better {
            self.ours / self.peer
        } else {
            self.peer / self.ours
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut secs = 3.0f64;
    let mut rounds = 5usize;
    let mut json = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--secs" => secs = args.next().and_then(|s| s.parse().ok()).expect("--secs N"),
            "--rounds" => {
                rounds = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--rounds N")
            }
            "--json" => json = args.next(),
            other => panic!("unknown argument {other}; use --secs N --rounds N --json PATH"),
        }
    }
    let per_round = Duration::from_secs_f64(secs / rounds as f64);

    let mut _cluster = None;
    let urls: Vec<String> = match std::env::var("REDLOCK_NODES") {
        Ok(list) if !list.trim().is_empty() => {
            list.split(',').map(|u| u.trim().to_owned()).collect()
        }
        _ => {
            let cluster = LocalCluster::start(5).expect("start local redis-server nodes");
            let urls = cluster.direct_urls();
            _cluster = Some(cluster);
            urls
        }
    };
    // rslock has no per-call timeout; give ours a generous one so that a
    // starved machine does not turn slow answers into failed pairs.
    let mut config = redquorum::Config::default().with_node_timeout(Duration::from_secs(2));
    if let Some(q) = std::env::var("PEERS_QUORUM").ok().and_then(|q| q.parse().ok()) {
        config = config.with_quorum(q);
    }
    let ours = Lib::Ours(
        Redlock::with_config(urls.iter().map(String::as_str), config).expect("redquorum"),
    );
    let peer = Lib::Peer(Arc::new(LockManager::new(urls.clone())));
    // Connect both before timing anything.
    for lib in [&ours, &peer] {
        for _ in 0..100 {
            lib.pair(&fresh("warm")).await;
        }
    }

    let mut cpu_per_pair = [vec![], vec![]];
    let (mut lat, mut seq, mut tp, mut ext) = (
        [vec![], vec![]],
        [vec![], vec![]],
        [vec![], vec![]],
        [vec![], vec![]],
    );
    for round in 0..rounds {
        // Alternate which library goes first.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let lib = if i == 0 { &ours } else { &peer };
            let (median, rate) = sequential(lib, per_round).await;
            lat[i].push(median.as_secs_f64() * 1e6);
            seq[i].push(rate);
            let (rate, cpu) = concurrent(lib, 64, per_round).await;
            tp[i].push(rate);
            cpu_per_pair[i].push(cpu);
            ext[i].push(lib.extends(200).await.as_secs_f64() * 1e6);
        }
    }
    let [lat_o, lat_p] = lat;
    let [seq_o, seq_p] = seq;
    let [tp_o, tp_p] = tp;
    let [ext_o, ext_p] = ext;
    let [cpu_o, cpu_p] = cpu_per_pair;
    let rows = [
        Row {
            scenario: "acquire+release latency (1 task)",
            unit: "us",
            ours: median(lat_o),
            peer: median(lat_p),
            higher_is_better: false,
        },
        Row {
            scenario: "sequential pairs/s (1 task)",
            unit: "pairs/s",
            ours: median(seq_o),
            peer: median(seq_p),
            higher_is_better: true,
        },
        Row {
            scenario: "throughput pairs/s (64 tasks)",
            unit: "pairs/s",
            ours: median(tp_o),
            peer: median(tp_p),
            higher_is_better: true,
        },
        Row {
            scenario: "client CPU per pair (64 tasks)",
            unit: "us",
            ours: median(cpu_o),
            peer: median(cpu_p),
            higher_is_better: false,
        },
        Row {
            scenario: "extend latency",
            unit: "us",
            ours: median(ext_o),
            peer: median(ext_p),
            higher_is_better: false,
        },
    ];

    println!(
        "redquorum vs rslock 0.9, 5 nodes, {rounds} rounds x {per_round:.1?} per scenario, medians"
    );
    println!("| scenario | unit | ours | rslock | ratio (>1: ours better) |");
    println!("|---|---|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.2} |",
            r.scenario,
            r.unit,
            r.ours,
            r.peer,
            r.ratio()
        );
    }
    if let Some(path) = json {
        let body: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "  {{\"scenario\": \"{}\", \"unit\": \"{}\", \"ours\": {:.3}, \"peer\": {:.3}, \"ratio\": {:.3}}}",
                    r.scenario, r.unit, r.ours, r.peer, r.ratio()
                )
            })
            .collect();
        std::fs::write(&path, format!("[\n{}\n]\n", body.join(",\n"))).expect("write json");
        println!("wrote {path}");
    }
}
