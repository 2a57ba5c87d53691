//! Latency and throughput of redquorum against the single-node floor.
//!
//! Nodes: five local `redis-server` processes (`LocalCluster`), or the five
//! URLs of `REDQUORUM_NODES` (comma-separated; the fault scenarios then need
//! local nodes and are skipped).
//!
//! ```text
//! cargo bench --features testkit --bench redlock
//! BENCH_SECS=3 cargo bench --features testkit --bench redlock -- uncontended
//! ```
//!
//! Groups (criterion ids, used by `scripts/bench-chart.py`):
//! - `floor/set_nx_px+del`: one node, `SET NX PX` then the compare-and-delete
//!   script (EVALSHA) over one `ConnectionManager` on the direct port.
//! - `floor/5-nodes-raw`: the same two commands sent to all five nodes at
//!   once (`join_all`, no timeouts, no quorum logic): what the machine allows.
//! - `uncontended/acquire+release`: `try_lock` + `release` on 5 nodes, one task.
//! - `uncontended/acquire`: `try_lock` alone (the guard is released untimed).
//! - `uncontended/acquire-fenced`: the same with fencing tokens on.
//! - `uncontended/extend`: `extend` of a held lock.
//! - `metrics/acquire+release-no-recorder`, `metrics/acquire+release-prometheus`
//!   (feature `metrics`): the pair on a current-thread runtime with no
//!   recorder (the facade's no-op) and with a Prometheus recorder
//!   (`metrics-exporter-prometheus`, histogram buckets set) installed;
//!   pairs of both kinds alternate and both are timed, and
//!   `metrics/paired` (printed) is the median of the per-sample ratios,
//!   each measured in one time window. The recorder's upkeep is not timed.
//! - `guard/acquire+release-off`, `guard/acquire+release-on`: the pair with
//!   the restart guard off (plain `SET NX PX`) and on (the guarded script,
//!   which calls `INFO server`), pairs of both kinds alternating and both
//!   timed as in `metrics`; `guard/paired` (printed) is the median of the
//!   per-sample ratios. The guarded nodes are marked trusted first
//!   (`init_nodes`).
//! - `throughput/64-tasks`: 64 tasks on distinct resources; time per pair.
//! - `contended/16-tasks`: 16 tasks taking turns on one resource; time per
//!   hand-off.
//! - `proxy/acquire-healthy`, `proxy/acquire-one-delayed-20ms`: acquire
//!   through the fault proxies, all healthy vs one node 20 ms slower per
//!   round trip.
//! - `paused/acquire-one-paused`: acquire with one node stopped (`SIGSTOP`),
//!   compared with `uncontended/acquire`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use redis::aio::ConnectionManager;
use redquorum::testkit::{Nodes, ProxyMode};
use redquorum::{Config, Redlock};
use tokio::runtime::Runtime;
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(10);

fn redlock(urls: &[String], config: Config) -> Redlock {
    match Redlock::with_config(urls.iter().map(String::as_str), config) {
        Ok(r) => r,
        Err(e) => panic!("redlock: {e}"),
    }
}

fn runtime() -> Runtime {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("tokio runtime: {e}"),
    }
}

/// A resource name unique to this process and call.
fn fresh_resource(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let pid = std::process::id();
    format!(
        "bench:{prefix}:{pid}:{}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn config_from_env(c: Criterion) -> Criterion {
    let secs = std::env::var("BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    c.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(secs))
}

/// One acquire + release. Errors are reported, not fatal: on a loaded
/// machine a node can miss the node timeout, and that cost is part of what
/// is measured.
async fn pair(redlock: &Redlock, resource: &str) {
    match redlock.try_lock(resource, TTL).await {
        Ok(guard) => {
            if let Err(e) = guard.release().await {
                eprintln!("release: {e}");
            }
        }
        Err(e) => eprintln!("try_lock: {e}"),
    }
}

/// Times `try_lock` alone; each guard is released after the clock stops.
async fn timed_acquires(redlock: &Redlock, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let resource = fresh_resource("acq");
        let start = Instant::now();
        let guard = redlock.try_lock(&resource, TTL).await;
        total += start.elapsed();
        match guard {
            // Dropping releases in the background (after any call still in
            // flight to a faulty node), so the next acquire is not delayed.
            Ok(guard) => drop(guard),
            Err(e) => eprintln!("try_lock: {e}"),
        }
    }
    total
}

/// Times `release` alone, right after an untimed `try_lock`: with a slow
/// node, the release finds that node's acquire call still in flight.
async fn timed_releases(redlock: &Redlock, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let resource = fresh_resource("rel");
        let guard = match redlock.try_lock(&resource, TTL).await {
            Ok(guard) => guard,
            Err(e) => {
                eprintln!("try_lock: {e}");
                continue;
            }
        };
        let start = Instant::now();
        if let Err(e) = guard.release().await {
            eprintln!("release: {e}");
        }
        total += start.elapsed();
    }
    total
}

fn benches(c: &mut Criterion) {
    let nodes = match Nodes::from_env(5) {
        Ok(nodes) => nodes,
        Err(e) => panic!("cannot start local Redis nodes: {e}"),
    };
    let direct = nodes.direct_urls();
    let rt = runtime();

    // Floor: the same commands a lock makes, on one node, with one round
    // trip each and nothing around them.
    {
        let release = redis::Script::new(
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
        );
        let client = match redis::Client::open(direct[0].as_str()) {
            Ok(c) => c,
            Err(e) => panic!("client: {e}"),
        };
        let conn = match rt.block_on(ConnectionManager::new(client)) {
            Ok(c) => c,
            Err(e) => panic!("connect: {e}"),
        };
        let key = fresh_resource("floor");
        let mut group = c.benchmark_group("floor");
        group.bench_function("set_nx_px+del", |b| {
            b.iter_custom(|iters| {
                let mut conn = conn.clone();
                let (key, release) = (&key, &release);
                rt.block_on(async move {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let set: Option<String> = match redis::cmd("SET")
                            .arg(key)
                            .arg("v")
                            .arg("NX")
                            .arg("PX")
                            .arg(10_000)
                            .query_async(&mut conn)
                            .await
                        {
                            Ok(r) => r,
                            Err(e) => panic!("SET: {e}"),
                        };
                        assert!(set.is_some(), "floor key was already set");
                        let deleted: i64 =
                            match release.key(key).arg("v").invoke_async(&mut conn).await {
                                Ok(n) => n,
                                Err(e) => panic!("release: {e}"),
                            };
                        assert_eq!(deleted, 1);
                    }
                    start.elapsed()
                })
            });
        });
        // The same two commands on all five nodes at once, waiting for
        // every answer: what the machine allows before any lock logic.
        let mut conns = Vec::new();
        for url in &direct {
            let client = match redis::Client::open(url.as_str()) {
                Ok(c) => c,
                Err(e) => panic!("client: {e}"),
            };
            match rt.block_on(ConnectionManager::new(client)) {
                Ok(c) => conns.push(c),
                Err(e) => panic!("connect: {e}"),
            }
        }
        group.bench_function("5-nodes-raw", |b| {
            b.iter_custom(|iters| {
                let (key, release, conns) = (&key, &release, &conns);
                rt.block_on(async move {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let sets = conns.iter().map(|conn| {
                            let mut conn = conn.clone();
                            async move {
                                redis::cmd("SET")
                                    .arg(key)
                                    .arg("v")
                                    .arg("NX")
                                    .arg("PX")
                                    .arg(10_000)
                                    .query_async::<Option<String>>(&mut conn)
                                    .await
                            }
                        });
                        for set in futures::future::join_all(sets).await {
                            match set {
                                Ok(Some(_)) => {}
                                other => panic!("SET: {other:?}"),
                            }
                        }
                        let dels = conns.iter().map(|conn| {
                            let mut conn = conn.clone();
                            async move {
                                release
                                    .key(key)
                                    .arg("v")
                                    .invoke_async::<i64>(&mut conn)
                                    .await
                            }
                        });
                        for del in futures::future::join_all(dels).await {
                            match del {
                                Ok(1) => {}
                                other => panic!("release: {other:?}"),
                            }
                        }
                    }
                    start.elapsed()
                })
            });
        });
        group.finish();
    }

    let healthy = redlock(&direct, Config::default());
    rt.block_on(pair(&healthy, "bench:connect"));

    {
        let mut group = c.benchmark_group("uncontended");
        let resource = fresh_resource("uncontended");
        group.bench_function("acquire+release", |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        pair(&healthy, &resource).await;
                    }
                    start.elapsed()
                })
            });
        });
        group.bench_function("acquire", |b| {
            b.iter_custom(|iters| rt.block_on(timed_acquires(&healthy, iters)));
        });
        // Fencing adds one round trip (the write-back of the token).
        let fenced = redlock(&direct, Config::default().with_fencing(true));
        rt.block_on(pair(&fenced, "bench:connect-fenced"));
        group.bench_function("acquire-fenced", |b| {
            b.iter_custom(|iters| rt.block_on(timed_acquires(&fenced, iters)));
        });
        let mut guard = match rt.block_on(healthy.try_lock(&fresh_resource("extend"), TTL)) {
            Ok(g) => g,
            Err(e) => panic!("try_lock: {e}"),
        };
        group.bench_function("extend", |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        if let Err(e) = guard.extend(TTL).await {
                            eprintln!("extend: {e}");
                        }
                    }
                    start.elapsed()
                })
            });
        });
        if let Err(e) = rt.block_on(guard.release()) {
            eprintln!("release: {e}");
        }
        group.finish();
    }

    #[cfg(feature = "metrics")]
    metrics_cost(c, &direct);
    guard_cost(c, &direct, &rt);

    {
        let mut group = c.benchmark_group("throughput");
        group.throughput(Throughput::Elements(1));
        group.bench_function("64-tasks", |b| {
            b.iter_custom(|iters| {
                let healthy = healthy.clone();
                rt.block_on(async move {
                    let per_task = iters.div_ceil(64);
                    let start = Instant::now();
                    let tasks: Vec<_> = (0..64)
                        .map(|_| {
                            let redlock = healthy.clone();
                            let resource = fresh_resource("tp");
                            tokio::spawn(async move {
                                for _ in 0..per_task {
                                    pair(&redlock, &resource).await;
                                }
                            })
                        })
                        .collect();
                    for task in tasks {
                        if let Err(e) = task.await {
                            panic!("task: {e}");
                        }
                    }
                    // Normalise to the pairs asked for.
                    start
                        .elapsed()
                        .mul_f64(iters as f64 / (per_task * 64) as f64)
                })
            });
        });
        group.finish();
    }

    {
        // Sixteen tasks take turns on one resource, each holding it for
        // 1 ms; time per hand-off.
        let contended = redlock(
            &direct,
            Config::default()
                .with_retries(u32::MAX)
                .with_retry_delay(Duration::from_millis(5))
                .with_retry_jitter(Duration::from_millis(3)),
        );
        let mut group = c.benchmark_group("contended");
        group.bench_function("16-tasks", |b| {
            b.iter_custom(|iters| {
                let contended = contended.clone();
                rt.block_on(async move {
                    let resource = fresh_resource("contended");
                    let left = Arc::new(AtomicU64::new(iters));
                    let start = Instant::now();
                    let tasks: Vec<_> = (0..16)
                        .map(|_| {
                            let (redlock, resource, left) =
                                (contended.clone(), resource.clone(), Arc::clone(&left));
                            tokio::spawn(async move {
                                while left.load(Ordering::Relaxed) > 0 {
                                    let guard = match redlock.lock(&resource, TTL).await {
                                        Ok(g) => g,
                                        Err(e) => panic!("lock: {e}"),
                                    };
                                    let counted = left
                                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                                            n.checked_sub(1)
                                        })
                                        .is_ok();
                                    if counted {
                                        tokio::time::sleep(Duration::from_millis(1)).await;
                                    }
                                    // On a loaded machine a node may miss the
                                    // node timeout; that is not what this measures.
                                    if let Err(e) = guard.release().await {
                                        eprintln!("contended release: {e}");
                                    }
                                }
                            })
                        })
                        .collect();
                    for task in tasks {
                        if let Err(e) = task.await {
                            panic!("task: {e}");
                        }
                    }
                    start.elapsed()
                })
            });
        });
        group.finish();
    }

    let Some(cluster) = nodes.local() else {
        eprintln!("REDQUORUM_NODES set: skipping the fault scenarios (they need local nodes)");
        return;
    };

    {
        let proxied = redlock(&cluster.urls(), Config::default());
        rt.block_on(pair(&proxied, "bench:connect"));
        let mut group = c.benchmark_group("proxy");
        group.bench_function("acquire-healthy", |b| {
            b.iter_custom(|iters| rt.block_on(timed_acquires(&proxied, iters)));
        });
        group.bench_function("release-healthy", |b| {
            b.iter_custom(|iters| rt.block_on(timed_releases(&proxied, iters)));
        });
        // Delay applies in each direction: 10 ms each way is 20 ms per round trip.
        cluster.set_proxy(4, ProxyMode::Delay(Duration::from_millis(10)));
        group.bench_function("acquire-one-delayed-20ms", |b| {
            b.iter_custom(|iters| rt.block_on(timed_acquires(&proxied, iters)));
        });
        // 20 ms each way: the release must not wait for this node.
        cluster.set_proxy(4, ProxyMode::Delay(Duration::from_millis(20)));
        group.bench_function("release-one-delayed-20ms-each-way", |b| {
            b.iter_custom(|iters| rt.block_on(timed_releases(&proxied, iters)));
        });
        cluster.set_proxy(4, ProxyMode::Pass);
        group.finish();
    }

    {
        let mut group = c.benchmark_group("paused");
        // The baseline of the paused node's release, on the same connections.
        group.bench_function("release-healthy", |b| {
            b.iter_custom(|iters| rt.block_on(timed_releases(&healthy, iters)));
        });
        if let Err(e) = cluster.pause(4) {
            panic!("pause: {e}");
        }
        let first = Instant::now();
        rt.block_on(pair(&healthy, &fresh_resource("first")));
        eprintln!(
            "paused/first acquire+release with node 4 paused: {:?} (node_timeout {:?})",
            first.elapsed(),
            redquorum::DEFAULT_NODE_TIMEOUT
        );
        group.bench_function("acquire-one-paused", |b| {
            b.iter_custom(|iters| rt.block_on(timed_acquires(&healthy, iters)));
        });
        group.bench_function("release-one-paused", |b| {
            b.iter_custom(|iters| rt.block_on(timed_releases(&healthy, iters)));
        });
        if let Err(e) = cluster.resume(4) {
            panic!("resume: {e}");
        }
        group.finish();
    }
}

/// The cost of the metrics: the same pair with no recorder and with a
/// Prometheus recorder, on a current-thread runtime so that every task
/// (the late calls finished in the background too) records on this
/// thread, where the recorder is installed.
#[cfg(feature = "metrics")]
fn metrics_cost(c: &mut Criterion, direct: &[String]) {
    use metrics_exporter_prometheus::PrometheusBuilder;

    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("tokio runtime: {e}"),
    };
    let seconds = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.1, 1.0,
    ];
    let recorder = match PrometheusBuilder::new().set_buckets(&seconds) {
        Ok(builder) => builder.build_recorder(),
        Err(e) => panic!("prometheus: {e}"),
    };
    let handle = recorder.handle();
    let redlock = redlock(direct, Config::default());
    rt.block_on(pair(&redlock, "bench:connect-metrics"));
    let resource = fresh_resource("metrics");
    // Pairs with and without the recorder alternate, one of each per
    // iteration, and both are timed: each sample gives a ratio measured
    // in one time window, whatever the machine's load does meanwhile.
    // Criterion reports the kind each function is named after.
    let samples = std::cell::RefCell::new(Vec::new());
    let alternating = |iters: u64, report_with_recorder: bool| {
        rt.block_on(async {
            let (mut with, mut without) = (Duration::ZERO, Duration::ZERO);
            for i in 0..iters {
                // Which kind goes first alternates too.
                for recorded in [i % 2 == 0, i % 2 == 1] {
                    let _local = recorded.then(|| metrics::set_default_local_recorder(&recorder));
                    let start = Instant::now();
                    pair(&redlock, &resource).await;
                    *(if recorded { &mut with } else { &mut without }) += start.elapsed();
                }
            }
            handle.run_upkeep();
            samples.borrow_mut().push((with, without, iters));
            if report_with_recorder { with } else { without }
        })
    };
    let mut group = c.benchmark_group("metrics");
    group.sample_size(30);
    group.bench_function("acquire+release-no-recorder", |b| {
        b.iter_custom(|iters| alternating(iters, false));
    });
    group.bench_function("acquire+release-prometheus", |b| {
        b.iter_custom(|iters| alternating(iters, true));
    });
    group.finish();
    let samples = samples.into_inner();
    report_paired("metrics", "the Prometheus recorder", &samples);
    // Nothing to check when a filter left the group out.
    if samples.iter().any(|(with, _, _)| !with.is_zero()) {
        let text = handle.render();
        let recorded = text
            .lines()
            .any(|l| l.starts_with("redquorum_lock_acquire_duration_count"));
        assert!(recorded, "the recorder saw no acquisition:\n{text}");
    }
}

/// The cost of the restart guard: the same pair on a Redlock with the
/// guard off and one with it on, alternating, both timed.
fn guard_cost(c: &mut Criterion, direct: &[String], rt: &Runtime) {
    let off = redlock(direct, Config::default());
    let on = redlock(direct, Config::default().with_restart_guard(TTL));
    let marked = rt.block_on(on.init_nodes());
    assert!(
        marked
            .iter()
            .all(|r| *r.outcome() == redquorum::NodeOutcome::Granted),
        "{marked:?}"
    );
    rt.block_on(pair(&off, "bench:connect-guard-off"));
    rt.block_on(pair(&on, "bench:connect-guard-on"));
    let resource = fresh_resource("guard");
    let samples = std::cell::RefCell::new(Vec::new());
    let alternating = |iters: u64, report_on: bool| {
        rt.block_on(async {
            let (mut with, mut without) = (Duration::ZERO, Duration::ZERO);
            for i in 0..iters {
                for guarded in [i % 2 == 0, i % 2 == 1] {
                    let start = Instant::now();
                    pair(if guarded { &on } else { &off }, &resource).await;
                    *(if guarded { &mut with } else { &mut without }) += start.elapsed();
                }
            }
            samples.borrow_mut().push((with, without, iters));
            if report_on { with } else { without }
        })
    };
    let mut group = c.benchmark_group("guard");
    group.sample_size(30);
    group.bench_function("acquire+release-off", |b| {
        b.iter_custom(|iters| alternating(iters, false));
    });
    group.bench_function("acquire+release-on", |b| {
        b.iter_custom(|iters| alternating(iters, true));
    });
    group.finish();
    report_paired("guard", "the restart guard", &samples.into_inner());
}

/// Prints `{group}/paired`: per pair with and without `what`, the median
/// of the per-sample ratios and the ratio of the totals, from samples of
/// (time with, time without, pairs of each kind).
fn report_paired(group: &str, what: &str, samples: &[(Duration, Duration, u64)]) {
    let mut ratios: Vec<f64> = samples
        .iter()
        .filter(|(_, without, _)| !without.is_zero())
        .map(|(with, without, _)| with.as_secs_f64() / without.as_secs_f64())
        .collect();
    ratios.sort_by(f64::total_cmp);
    let (with, without, pairs) = samples.iter().fold((0.0, 0.0, 0), |(w, o, n), s| {
        (w + s.0.as_secs_f64(), o + s.1.as_secs_f64(), n + s.2)
    });
    if let Some(median) = ratios.get(ratios.len() / 2) {
        eprintln!(
            "{group}/paired: {} samples, {pairs} pairs of each kind; per pair {:.1} us with \
             {what}, {:.1} us without; median of the per-sample ratios {median:.4}, ratio of \
             the totals {:.4}",
            ratios.len(),
            with / pairs as f64 * 1e6,
            without / pairs as f64 * 1e6,
            with / without
        );
    }
}

criterion_group! {
    name = group;
    config = config_from_env(Criterion::default());
    targets = benches
}
criterion_main!(group);
