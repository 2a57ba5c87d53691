//! The two libraries under test behind one interface.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redquorum::{Config, Redlock};
use rslock::LockManager;

use crate::floor::{self, Floor, Raw};

pub const TTL: Duration = Duration::from_secs(10);

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A resource name no other scenario of this process uses.
pub fn fresh(prefix: &str) -> String {
    format!(
        "peers:{prefix}:{}:{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The config every redquorum client of the bench starts from. rslock has
/// no per-call timeout; ours gets a generous one so that a starved machine
/// does not turn slow answers into failed pairs.
pub fn base_config() -> Config {
    let mut config = Config::default().with_node_timeout(Duration::from_secs(2));
    if let Some(q) = std::env::var("PEERS_QUORUM")
        .ok()
        .and_then(|q| q.parse().ok())
    {
        config = config.with_quorum(q);
    }
    config
}

pub fn ours(urls: &[String], config: Config) -> Lib {
    Lib::Ours(Redlock::with_config(urls.iter().map(String::as_str), config).expect("redquorum"))
}

pub fn peer(urls: &[String]) -> Lib {
    Lib::Peer(Arc::new(LockManager::new(urls.to_vec())))
}

/// One library under test, or one of the floors (sequential pairs only).
#[derive(Clone)]
pub enum Lib {
    Ours(Redlock),
    Peer(Arc<LockManager>),
    Floor(Arc<Floor>),
    Raw(Arc<Raw>),
}

impl Lib {
    pub async fn pair(&self, resource: &str) {
        self.timed_pair(resource).await;
    }

    /// One acquire+release pair: (acquire time, release time).
    pub async fn timed_pair(&self, resource: &str) -> (Duration, Duration) {
        let start = Instant::now();
        match self {
            Lib::Ours(r) => {
                let guard = r.try_lock(resource, TTL).await.expect("redquorum try_lock");
                let acquired = Instant::now();
                guard.release().await.expect("redquorum release");
                (acquired - start, acquired.elapsed())
            }
            Lib::Peer(m) => {
                let lock = m.lock(resource, TTL).await.expect("rslock lock");
                let acquired = Instant::now();
                m.unlock(&lock).await;
                (acquired - start, acquired.elapsed())
            }
            // The floors' pairs are not split into acquire and release.
            Lib::Floor(f) => {
                f.pair(resource, floor::VALUE).await;
                (start.elapsed(), Duration::ZERO)
            }
            Lib::Raw(r) => {
                r.pair(resource, floor::VALUE).await;
                (start.elapsed(), Duration::ZERO)
            }
        }
    }

    /// Runs `n` pairs on fresh resources, to open every connection.
    pub async fn warm(&self, n: usize) {
        for _ in 0..n {
            self.pair(&fresh("warm")).await;
        }
    }

    /// Mean time of one `extend` of a held lock, over `n` calls (zero for
    /// the floors, which have no extend).
    pub async fn extends(&self, n: u32) -> Duration {
        let resource = fresh("extend");
        match self {
            Lib::Floor(_) | Lib::Raw(_) => Duration::ZERO,
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
