//! Serves redquorum's metrics as Prometheus text while workers contend for
//! two locks on five local Redis nodes and a nemesis faults the nodes
//! (kills, pauses, latency, blackholes, lost replies), then prints a few
//! lines of what it served.
//!
//! ```sh
//! cargo run --release --features testkit,metrics --example metrics
//! cargo run --release --features testkit,metrics --example metrics -- --secs 60 --listen 127.0.0.1:9464
//! curl -s http://127.0.0.1:9464/metrics     # while it runs
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use redquorum::testkit::{LocalCluster, Nemesis};
use redquorum::{Config, Redlock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

const WORKERS: usize = 6;
const TTL: Duration = Duration::from_millis(800);
const RESOURCES: [&str; 2] = ["report", "billing"];

struct Args {
    secs: u64,
    listen: SocketAddr,
}

fn args() -> Result<Args, Box<dyn std::error::Error>> {
    let mut args = Args {
        secs: 20,
        listen: "127.0.0.1:9464".parse()?,
    };
    let mut given = std::env::args().skip(1);
    while let Some(arg) = given.next() {
        let value = given.next().ok_or(format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--secs" => args.secs = value.parse()?,
            "--listen" => args.listen = value.parse()?,
            _ => return Err(format!("unknown argument {arg}; use --secs N, --listen ADDR").into()),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = args()?;
    let seconds = [
        0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    ];
    let (recorder, exporter) = PrometheusBuilder::new()
        // Prometheus names: the unit in the name, `_total` on counters.
        .with_recommended_naming(true)
        .with_http_listener(args.listen)
        .set_buckets_for_metric(Matcher::Suffix("duration".into()), &seconds)?
        .set_buckets_for_metric(Matcher::Suffix("margin".into()), &seconds)?
        .set_buckets_for_metric(
            Matcher::Suffix("attempts".into()),
            &[1.0, 2.0, 3.0, 5.0, 10.0],
        )?
        .build()?;
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder)?;
    redquorum::metrics::describe();
    tokio::spawn(exporter);
    println!("serving Prometheus text on http://{}/metrics", args.listen);

    let cluster = Arc::new(LocalCluster::start(5)?);
    let config = Config::default()
        .with_node_timeout(Duration::from_millis(50))
        .with_retries(20)
        .with_retry_delay(Duration::from_millis(30))
        .with_retry_jitter(Duration::from_millis(20))
        // Two fixed names: a label per resource stays bounded.
        .with_metrics_resource_label(true);
    let redlock = Redlock::with_config(cluster.urls(), config)?;
    if let Err(e) = redlock.check().await {
        println!("start-up check: {e}");
    }
    let run = Duration::from_secs(args.secs);
    let started = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..WORKERS {
        let redlock = redlock.clone();
        workers.push(tokio::spawn(async move {
            let resource = RESOURCES[worker % RESOURCES.len()];
            while started.elapsed() < run {
                // Every third worker's jobs outlive the TTL: the watchdog
                // extends them, and loses some to the nemesis.
                let work = match worker % 3 {
                    2 => Duration::from_millis(rand::random_range(500..1_500)),
                    _ => Duration::from_millis(rand::random_range(5..40)),
                };
                let job =
                    redlock.with_lock(resource, TTL, async |_guard| tokio::time::sleep(work).await);
                if job.await.is_err() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }));
    }
    let seed = Nemesis::seed_from_env();
    let nemesis = Nemesis::new(Arc::clone(&cluster), seed, TTL);
    let report = nemesis.run(run).await?;
    for worker in workers {
        worker.await?;
    }
    redlock.shutdown().await;
    println!("nemesis (seed {}):", report.seed);
    for line in &report.log {
        println!("  {line}");
    }

    // What a scraper gets: ask our own endpoint, as Prometheus would.
    let text = scrape(args.listen).await.unwrap_or_else(|e| {
        println!("scrape failed ({e}); rendering directly");
        handle.render()
    });
    println!("\nfrom http://{}/metrics:", args.listen);
    let mut lines: Vec<&str> = text.lines().filter(|l| shown(l)).collect();
    lines.sort_unstable();
    for line in lines {
        println!("{line}");
    }
    Ok(())
}

/// `GET /metrics` over plain HTTP/1.0; the body.
async fn scrape(addr: SocketAddr) -> std::io::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    Ok(body.to_owned())
}

/// The lines worth a look: counts and sums, votes, losses, node problems.
fn shown(line: &str) -> bool {
    let family = |name: &str| line.starts_with(name);
    (family("redquorum_lock_acquire_duration_count")
        || family("redquorum_lock_wait_duration_sum")
        || family("redquorum_lock_hold_duration_count")
        || family("redquorum_lock_extensions")
        || family("redquorum_lock_lost")
        || family("redquorum_node_votes")
        || family("redquorum_node_misconfigured")
        || line.starts_with("# HELP redquorum_lock_acquire_duration"))
        && !line.contains("db_operation_name=\"release\"")
        && !line.contains("db_operation_name=\"extend\"")
}
