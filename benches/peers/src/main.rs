//! redquorum vs rslock on the same five nodes, same scenarios, one table.
//!
//! ```text
//! cd benches/peers && cargo run --release -- --secs 3 --json peers.json
//! cd benches/peers && cargo run --release -- --secs 1 --rounds 2 --contended-secs 2   # quick look
//! cd benches/peers && cargo run --release -- --rss [--rss-pairs 200000] [--json rss.json]
//! ```
//!
//! Nodes: five local `redis-server` processes (direct ports), or
//! `REDLOCK_NODES`. Each scenario runs in `--rounds` rounds (default 5),
//! alternating which library goes first so that background load hits both
//! alike; the table shows medians across rounds. `--secs` (default 3) is
//! the time per library and scenario, spread over the rounds.
//!
//! Scenarios:
//! - sequential: one spawned task, acquire+release pairs on one resource
//!   (pair latency, release latency, pairs/s). The two floors of
//!   `floor.rs` run it too, in the same rounds: a hand-written fan-out on
//!   redis-rs connections and the same bytes on raw sockets, printed
//!   under the table with their ratio to rslock (what any client on those
//!   connections could reach);
//! - throughput: 64 tasks on distinct resources (pairs/s, client CPU per
//!   pair from `/proc/self/stat`);
//! - extend latency of a held lock;
//! - one slow node: node 0 reached through the testkit proxy with
//!   `ProxyMode::Delay(20 ms)` (+20 ms each way), the other four direct;
//!   sequential pairs/s and release p50, also divided by the same library's
//!   healthy figures of the same round. Local nodes only (skipped with
//!   `REDLOCK_NODES`);
//! - contended: 16 workers, one resource, each looping {waiting `lock()`,
//!   hold 1 ms of blocking work, release} for `--contended-secs` per round and library
//!   (default 10 s x secs / 3); acquisitions/s and fairness (fewest
//!   acquisitions of a worker / most), and the median hand-off (a release
//!   called to the next worker's lock acquired), printed under the table
//!   also as a multiple of the raw-socket floor's pair latency (two
//!   rounds, as a hand-off). redquorum: `Redlock::lock` with
//!   unlimited retries, 5 ms +- 3 ms apart, release notifications on;
//!   rslock: `LockManager::lock` with `set_retry(u32::MAX, 10 ms)` (a
//!   random 0..10 ms pause). Calls that gave up anyway are counted and
//!   printed under the table.
//!
//! `--rss` runs only the memory measurement: redquorum, `--rss-pairs`
//! (default 200,000) pairs over 64 tasks, one reused resource per task,
//! `VmRSS` sampled after 1/20 of the pairs and after every quarter.
//!
//! Server instructions per pair: `scripts/server-instructions.sh` (uses
//! the `pairs` driver).

mod contended;
mod floor;
mod libs;
mod measure;
mod rss;
mod table;

use std::time::Duration;

use redquorum::testkit::{LocalCluster, ProxyMode};

use libs::{Lib, base_config};
use measure::{concurrent, median, sequential};
use table::Row;

/// Added to each direction of node 0's traffic in the slow-node scenario.
const SLOW: Duration = Duration::from_millis(20);

/// Per-round samples of one metric, ours at 0 and rslock at 1.
type Samples = [Vec<f64>; 2];

#[derive(Default)]
struct Results {
    lat: Samples,
    release: Samples,
    seq: Samples,
    tp: Samples,
    cpu: Samples,
    ext: Samples,
    slow_seq: Samples,
    slow_seq_ratio: Samples,
    slow_release: Samples,
    slow_release_ratio: Samples,
    cont_rate: Samples,
    cont_fair: Samples,
    give_ups: [u64; 2],
    hold_us: Samples,
    handoff_us: Samples,
    /// Sequential pairs/s of the redis-rs floor (0) and the raw one (1).
    floors: Samples,
}

fn row(scenario: &'static str, unit: &'static str, s: &Samples, higher: bool) -> Row {
    Row {
        scenario,
        unit,
        ours: median(s[0].clone()),
        peer: median(s[1].clone()),
        higher_is_better: higher,
    }
}

struct Args {
    secs: f64,
    rounds: usize,
    contended_secs: Option<f64>,
    json: Option<String>,
    rss: bool,
    rss_pairs: u64,
}

fn args() -> Args {
    let mut a = Args {
        secs: 3.0,
        rounds: 5,
        contended_secs: None,
        json: None,
        rss: false,
        rss_pairs: 200_000,
    };
    let mut args = std::env::args().skip(1);
    let usage = "use --secs N --rounds N --contended-secs N --json PATH --rss --rss-pairs N";
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| panic!("{name} needs a value"))
        };
        match arg.as_str() {
            "--secs" => a.secs = value("--secs").parse().expect("--secs N"),
            "--rounds" => a.rounds = value("--rounds").parse().expect("--rounds N"),
            "--contended-secs" => {
                a.contended_secs = Some(value(&arg).parse().expect("--contended-secs N"))
            }
            "--json" => a.json = Some(value("--json")),
            "--rss" => a.rss = true,
            "--rss-pairs" => a.rss_pairs = value(&arg).parse().expect("--rss-pairs N"),
            other => panic!("unknown argument {other}; {usage}"),
        }
    }
    a
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = args();
    let per_round = Duration::from_secs_f64(args.secs / args.rounds as f64);
    let contended_secs =
        Duration::from_secs_f64(args.contended_secs.unwrap_or(10.0 * args.secs / 3.0));

    let mut cluster = None;
    let urls: Vec<String> = match std::env::var("REDLOCK_NODES") {
        Ok(list) if !list.trim().is_empty() => {
            list.split(',').map(|u| u.trim().to_owned()).collect()
        }
        _ => {
            let c = LocalCluster::start(5).expect("start local redis-server nodes");
            let urls = c.direct_urls();
            cluster = Some(c);
            urls
        }
    };

    if args.rss {
        let ours = libs::ours(&urls, base_config());
        ours.warm(100).await;
        let samples = rss::rss(&ours, args.rss_pairs).await;
        rss::report(&samples, args.json.as_deref());
        return;
    }

    let healthy = [libs::ours(&urls, base_config()), libs::peer(&urls)];
    let waiting = [contended::ours(&urls), contended::peer(&urls)];
    // Node 0 through its proxy, +20 ms each way; the others direct.
    let slow = cluster.as_ref().map(|c| {
        c.set_proxy(0, ProxyMode::Delay(SLOW));
        let mut slow_urls = urls.clone();
        slow_urls[0] = c.url(0);
        [
            libs::ours(&slow_urls, base_config()),
            libs::peer(&slow_urls),
        ]
    });
    // Connect every client before timing anything.
    for lib in healthy.iter().chain(&waiting) {
        lib.warm(100).await;
    }
    for lib in slow.iter().flatten() {
        lib.warm(10).await;
    }
    let floors = [
        Lib::Floor(std::sync::Arc::new(floor::Floor::new(&urls).await)),
        Lib::Raw(std::sync::Arc::new(floor::Raw::new(&urls).await)),
    ];
    for lib in &floors {
        lib.warm(100).await;
    }

    let mut r = Results::default();
    for round in 0..args.rounds {
        // Alternate which library goes first.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let lib: &Lib = &healthy[i];
            let s = sequential(lib, per_round).await;
            r.lat[i].push(s.pair_p50.as_secs_f64() * 1e6);
            r.release[i].push(s.release_p50.as_secs_f64() * 1e6);
            r.seq[i].push(s.rate);
            let (rate, cpu) = concurrent(lib, 64, per_round).await;
            r.tp[i].push(rate);
            r.cpu[i].push(cpu);
            r.ext[i].push(lib.extends(200).await.as_secs_f64() * 1e6);
            if let Some(slow) = &slow {
                let sl = sequential(&slow[i], per_round).await;
                r.slow_seq[i].push(sl.rate);
                r.slow_seq_ratio[i].push(sl.rate / s.rate);
                r.slow_release[i].push(sl.release_p50.as_secs_f64() * 1e6);
                r.slow_release_ratio[i]
                    .push(sl.release_p50.as_secs_f64() / s.release_p50.as_secs_f64());
            }
            let c = contended::contended(&waiting[i], contended_secs).await;
            r.cont_rate[i].push(c.per_sec);
            r.cont_fair[i].push(c.fairness);
            r.give_ups[i] += c.give_ups;
            r.hold_us[i].push(c.hold_us);
            r.handoff_us[i].push(c.handoff_us);
            // One floor after each library, the other one first every other round.
            let f = (i + round / 2) % 2;
            r.floors[f].push(sequential(&floors[f], per_round).await.rate);
        }
    }

    let mut rows = vec![
        row("acquire+release latency (1 task)", "us", &r.lat, false),
        row("sequential pairs/s (1 task)", "pairs/s", &r.seq, true),
        row("throughput pairs/s (64 tasks)", "pairs/s", &r.tp, true),
        row("client CPU per pair (64 tasks)", "us", &r.cpu, false),
        row("extend latency", "us", &r.ext, false),
        row("release p50 (1 task)", "us", &r.release, false),
    ];
    if slow.is_some() {
        rows.extend([
            row(
                "one node +20 ms: sequential pairs/s",
                "pairs/s",
                &r.slow_seq,
                true,
            ),
            row(
                "one node +20 ms: sequential pairs/s / healthy",
                "x",
                &r.slow_seq_ratio,
                true,
            ),
            row("one node +20 ms: release p50", "us", &r.slow_release, false),
            row(
                "one node +20 ms: release p50 / healthy",
                "x",
                &r.slow_release_ratio,
                false,
            ),
        ]);
    }
    rows.extend([
        row(
            "contended acquisitions/s (16 workers, 1 ms hold)",
            "acq/s",
            &r.cont_rate,
            true,
        ),
        row(
            "contended fairness (16 workers, min/max)",
            "min/max",
            &r.cont_fair,
            true,
        ),
        row(
            "contended hand-off median (release called -> next acquired)",
            "us",
            &r.handoff_us,
            false,
        ),
    ]);

    let rounds = args.rounds;
    table::print(
        &format!(
            "redquorum vs rslock 0.9, 5 nodes, {rounds} rounds x {per_round:.1?} per scenario \
             (contended {contended_secs:.1?}), medians"
        ),
        &rows,
        args.json.as_deref(),
    );
    if slow.is_none() {
        println!("one-slow-node rows skipped: REDLOCK_NODES has no testkit proxy");
    }
    println!(
        "contended: waiting lock() calls that gave up (summed over rounds): ours {}, rslock {}; \
         hold as measured: ours {:.0} us, rslock {:.0} us",
        r.give_ups[0],
        r.give_ups[1],
        median(r.hold_us[0].clone()),
        median(r.hold_us[1].clone())
    );
    let rslock = median(r.seq[1].clone());
    for (name, samples) in [
        ("redis-rs floor", &r.floors[0]),
        ("raw-socket floor", &r.floors[1]),
    ] {
        let rate = median(samples.clone());
        println!(
            "sequential pairs/s of the {name}: {rate:.0}, {:.2}x rslock's (same rounds)",
            rate / rslock
        );
    }
    // A pair is two rounds, as a hand-off is (the release's, then the
    // waiter's acquisition).
    let floor_pair_us = 1e6 / median(r.floors[1].clone());
    println!(
        "contended hand-off median / the raw-socket floor's pair (two rounds, {floor_pair_us:.0} us): \
         ours {:.2}x, rslock {:.2}x",
        median(r.handoff_us[0].clone()) / floor_pair_us,
        median(r.handoff_us[1].clone()) / floor_pair_us
    );
}
