//! `--rss`: resident memory of this process over many acquire+release
//! pairs of redquorum (64 tasks, one reused resource per task).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::libs::{Lib, fresh};

const TASKS: u64 = 64;

/// `VmRSS` of this process in kB (0 if unreadable).
fn vm_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Where RSS is sampled: after `total / 20` pairs, then every `total / 4`
/// (for 200,000: 10k, 50k, 100k, 150k, 200k).
fn checkpoints(total: u64) -> Vec<u64> {
    let mut points = vec![(total / 20).max(1)];
    points.extend((1..=4).map(|i| total * i / 4));
    points.dedup();
    points
}

/// Runs `n` pairs spread over 64 tasks, each on its own resource.
async fn run(lib: &Lib, resources: &Arc<Vec<String>>, n: u64) {
    let left = Arc::new(AtomicU64::new(n));
    let tasks: Vec<_> = (0..TASKS as usize)
        .map(|t| {
            let (lib, left, resources) = (lib.clone(), Arc::clone(&left), Arc::clone(resources));
            tokio::spawn(async move {
                while left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(1))
                    .is_ok()
                {
                    lib.pair(&resources[t]).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
}

/// (pairs done, VmRSS kB) at each checkpoint.
pub async fn rss(lib: &Lib, total: u64) -> Vec<(u64, u64)> {
    let resources = Arc::new((0..TASKS).map(|_| fresh("rss")).collect::<Vec<_>>());
    let (mut done, mut samples) = (0, Vec::new());
    for point in checkpoints(total) {
        run(lib, &resources, point - done).await;
        done = point;
        samples.push((done, vm_rss_kb()));
    }
    samples
}

/// Prints the samples, first/last and the largest growth over the first.
pub fn report(samples: &[(u64, u64)], json: Option<&str>) {
    println!("redquorum RSS, {TASKS} tasks, one resource per task, acquire+release pairs");
    println!("| pairs | VmRSS kB |");
    println!("|---:|---:|");
    for (pairs, kb) in samples {
        println!("| {pairs} | {kb} |");
    }
    let first = samples.first().map_or(0, |s| s.1);
    let last = samples.last().map_or(0, |s| s.1);
    let max = samples.iter().map(|s| s.1).max().unwrap_or(0);
    let growth = max.saturating_sub(first);
    println!(
        "first {first} kB, last {last} kB, max growth over first {growth} kB ({:+.1} %)",
        growth as f64 * 100.0 / first.max(1) as f64
    );
    if let Some((pairs, second)) = samples.get(1) {
        println!(
            "from {pairs} pairs to the last: {:+} kB",
            last as i64 - *second as i64
        );
    }
    if let Some(path) = json {
        let points: Vec<String> = samples
            .iter()
            .map(|(p, kb)| format!("    {{\"pairs\": {p}, \"vm_rss_kb\": {kb}}}"))
            .collect();
        let body = format!(
            "{{\n  \"scenario\": \"redquorum RSS (64 tasks)\",\n  \"first_kb\": {first},\n  \"last_kb\": {last},\n  \"max_growth_kb\": {growth},\n  \"samples\": [\n{}\n  ]\n}}\n",
            points.join(",\n")
        );
        std::fs::write(path, body).expect("write json");
        println!("wrote {path}");
    }
}
