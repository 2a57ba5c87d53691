//! K acquire+release pairs of one library, for instruction counts under
//! callgrind (see `scripts/instructions.sh`) and allocation counts.
//!
//! ```text
//! pairs --lib ours|rslock|floor|raw --tasks 1|64 --pairs K
//! ```
//!
//! Starts five local `redis-server` processes (children: callgrind does not
//! follow them, so only the client is counted), warms every connection
//! with 50 pairs, then runs K pairs, sequentially (`--tasks 1`) or spread
//! over 64 tasks, on a current-thread runtime. Prints one line:
//! `lib=.. tasks=.. pairs=.. allocs=..` with the allocations made during
//! the K pairs. Fixed costs (start-up, warm-up) cancel out when two runs
//! with different K are subtracted: per pair = (I(K2) - I(K1)) / (K2 - K1).
//!
//! `--lib ours-quiet` is ours with release notifications off. `--serve`
//! (K from stdin instead of `--pairs`, see [`serve`]) is for measuring the
//! servers, `scripts/server-instructions.sh`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redquorum::testkit::LocalCluster;
use redquorum::{Config, Redlock};
use rslock::LockManager;

#[path = "../floor.rs"]
mod floor;
use floor::{Floor, Raw};

/// Counts allocations, to report them per pair.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const TTL: Duration = Duration::from_secs(10);

enum Lib {
    Ours(Redlock),
    Peer(LockManager),
    Floor(Floor),
    Raw(Raw),
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
            Lib::Raw(f) => f.pair(resource, floor::VALUE).await,
            Lib::Floor(f) => f.pair(resource, floor::VALUE).await,
        }
    }
}

/// Runs `pairs` pairs spread over `tasks` tasks (as many per task), on
/// resources named after `phase`; returns how many were run.
async fn run(lib: &Arc<Lib>, tasks: usize, pairs: u64, phase: u64) -> u64 {
    let per_task = pairs / tasks as u64;
    let mut handles = Vec::new();
    for t in 0..tasks {
        let lib = Arc::clone(lib);
        handles.push(tokio::spawn(async move {
            for i in 0..per_task {
                lib.pair(&format!("pairs:{phase}:{t}:{i}")).await;
            }
        }));
    }
    for h in handles {
        h.await.expect("task");
    }
    per_task * tasks as u64
}

/// `--serve`: prints `ready pids=P1,..,P5` (the `redis-server` processes
/// of this run), then reads commands from stdin: `run K` runs K pairs and
/// prints `done pairs=K`; `exit` or end of input stops. Lets a script
/// measure the servers around each batch (`scripts/server-instructions.sh`).
async fn serve(lib: &Arc<Lib>, tasks: usize, cluster: &LocalCluster) {
    let pids: Vec<String> = (0..cluster.len())
        .map(|i| cluster.pid(i).expect("node running").to_string())
        .collect();
    println!("ready pids={}", pids.join(","));
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    for phase in 1.. {
        line.clear();
        if std::io::stdin().read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        let mut words = line.split_whitespace();
        match (words.next(), words.next().and_then(|k| k.parse().ok())) {
            (Some("run"), Some(k)) => {
                let done = run(lib, tasks, k, phase).await;
                println!("done pairs={done}");
                let _ = std::io::stdout().flush();
            }
            (Some("exit") | None, _) => break,
            _ => panic!("--serve: expected `run K` or `exit`, got {line:?}"),
        }
    }
}

fn main() {
    let (mut lib, mut tasks, mut pairs) = (String::from("ours"), 1usize, 1000u64);
    let mut serving = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--serve" {
            serving = true;
            continue;
        }
        let value = args.next().unwrap_or_default();
        match arg.as_str() {
            "--lib" => lib = value,
            "--tasks" => tasks = value.parse().expect("--tasks N"),
            "--pairs" => pairs = value.parse().expect("--pairs K"),
            other => panic!("unknown argument {other}; use --lib L --tasks N --pairs K [--serve]"),
        }
    }
    let cluster = LocalCluster::start(5).expect("start local redis-server nodes");
    let urls = cluster.direct_urls();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let ours = |notify: bool| {
            let config = Config::default()
                .with_node_timeout(Duration::from_secs(2))
                .with_release_notifications(notify);
            Lib::Ours(
                Redlock::with_config(urls.iter().map(String::as_str), config).expect("redquorum"),
            )
        };
        let lib_name = lib.clone();
        let lib = Arc::new(match lib.as_str() {
            "ours" => ours(true),
            "ours-quiet" => ours(false),
            "rslock" => Lib::Peer(LockManager::new(urls.clone())),
            "floor" => Lib::Floor(Floor::new(&urls).await),
            "raw" => Lib::Raw(Raw::new(&urls).await),
            other => panic!("--lib ours|ours-quiet|rslock|floor|raw, not {other}"),
        });
        for i in 0..50 {
            lib.pair(&format!("warm:{i}")).await;
        }
        let before = ALLOCS.load(Ordering::Relaxed);
        let done = if serving {
            serve(&lib, tasks, &cluster).await;
            0
        } else {
            run(&lib, tasks, pairs, 0).await
        };
        let allocs = ALLOCS.load(Ordering::Relaxed) - before;
        let name = match &*lib {
            Lib::Ours(r) => {
                r.shutdown().await;
                if lib_name == "ours" {
                    "ours"
                } else {
                    "ours-quiet"
                }
            }
            Lib::Peer(_) => "rslock",
            Lib::Floor(_) => "floor",
            Lib::Raw(_) => "raw",
        };
        if !serving {
            println!(
                "lib={name} tasks={tasks} pairs={done} allocs={allocs} allocs_per_pair={:.1}",
                allocs as f64 / done as f64
            );
        }
    });
    drop(cluster);
}
