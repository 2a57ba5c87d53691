//! Many tasks contending for one resource: no two holders ever overlap.
#![cfg(feature = "testkit")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_contending_tasks_never_overlap_and_all_make_progress() {
    let nodes = nodes();
    let config = fast_config()
        .with_retries(1_000)
        .with_retry_delay(Duration::from_millis(5))
        .with_retry_jitter(Duration::from_millis(5));
    let redlock = redlock(&nodes.urls(), config);
    let resource = unique("contended");
    let history = History::default();
    let counter = Arc::new(AtomicU64::new(0));
    let run_until = Instant::now() + Duration::from_secs(4);
    let mut tasks = Vec::new();
    for worker in 0..16 {
        let (redlock, resource, history, counter) = (
            redlock.clone(),
            resource.clone(),
            history.clone(),
            Arc::clone(&counter),
        );
        tasks.push(tokio::spawn(async move {
            let mut held = 0u32;
            while Instant::now() < run_until {
                let guard = match redlock.lock(&resource, Duration::from_millis(500)).await {
                    Ok(guard) => guard,
                    Err(e) => panic!("worker {worker}: {e}"),
                };
                let start = Instant::now();
                // Read-modify-write with a pause in between: a lost update
                // shows a second holder inside our interval.
                let seen = counter.load(Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(rand::random_range(0..4))).await;
                counter.store(seen + 1, Ordering::SeqCst);
                let valid_until = guard.valid_until();
                let released_at = Instant::now();
                let released = guard.release().await;
                assert!(released.is_ok(), "worker {worker}: {released:?}");
                history.record(worker, start, valid_until, released_at);
                held += 1;
                tokio::task::yield_now().await;
            }
            held
        }));
    }
    let mut per_worker = Vec::new();
    for task in tasks {
        per_worker.push(task.await.expect("worker panicked"));
    }
    let total: u32 = per_worker.iter().sum();
    println!("acquisitions per worker: {per_worker:?}, total {total}");
    assert!(
        per_worker.iter().all(|&n| n > 0),
        "a worker starved: {per_worker:?}"
    );
    assert_eq!(
        history.overlaps().len(),
        0,
        "overlapping holds: {:?}",
        history.overlaps()
    );
    assert_eq!(
        counter.load(Ordering::SeqCst),
        u64::from(total),
        "lost updates"
    );
}

#[test]
fn checker_sees_an_overlap_between_two_holders() {
    // Negative control: the checker is not blind.
    let history = History::default();
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    history.record(0, t0, t0 + ms(100), t0 + ms(50));
    history.record(1, t0 + ms(49), t0 + ms(200), t0 + ms(120));
    history.record(1, t0 + ms(130), t0 + ms(300), t0 + ms(140));
    history.record(2, t0 + ms(140), t0 + ms(300), t0 + ms(150));
    let overlaps = history.overlaps();
    assert_eq!(overlaps.len(), 1, "{overlaps:?}");
    assert_eq!((overlaps[0].0.holder, overlaps[0].1.holder), (0, 1));
}
