//! [`Nemesis`]: injects one fault at a time into a [`LocalCluster`] during a
//! run, heals it, and does it again, driven by a seed so that a failing run
//! can be replayed.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::cluster::LocalCluster;
use super::error::TestkitError;
use super::proxy::ProxyMode;

/// Environment variable read by [`Nemesis::seed_from_env`] to replay a run.
pub const SEED_ENV: &str = "REDQUORUM_SEED";

/// The kinds of fault a [`Nemesis`] can inject. All of them are within
/// Redlock's assumptions (a restarted node stays down longer than the TTL,
/// clocks are fast by less than the drift allowance), so a correct lock
/// keeps mutual exclusion through every one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FaultKind {
    /// Kill a minority, restart it empty after more than the TTL.
    KillMinority,
    /// Kill a majority, restart it empty after more than the TTL.
    KillMajority,
    /// `SIGSTOP` one node for a while.
    PauseOne,
    /// `SIGSTOP` a majority for longer than the TTL.
    PauseMajority,
    /// Add latency (a fraction of the TTL) on every node.
    DelayAll,
    /// Swallow all traffic to and from a minority.
    BlackholeMinority,
    /// Swallow all traffic to and from a majority.
    BlackholeMajority,
    /// Apply requests on a majority but swallow their replies.
    DropReplies,
    /// Reset every connection to a minority.
    ResetMinority,
    /// Make the TTLs on a minority run 0.5 % fast (within the default 1 %
    /// drift allowance).
    FastClockMinority,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 10] = [
        FaultKind::KillMinority,
        FaultKind::KillMajority,
        FaultKind::PauseOne,
        FaultKind::PauseMajority,
        FaultKind::DelayAll,
        FaultKind::BlackholeMinority,
        FaultKind::BlackholeMajority,
        FaultKind::DropReplies,
        FaultKind::ResetMinority,
        FaultKind::FastClockMinority,
    ];
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// What a [`Nemesis`] did.
#[derive(Clone, Debug, Default)]
pub struct NemesisReport {
    /// The seed of the run (pass it as `REDQUORUM_SEED` to replay).
    pub seed: u64,
    /// One line per fault, in order: offset from the start, kind, nodes.
    pub log: Vec<String>,
}

impl NemesisReport {
    /// Number of faults injected.
    #[must_use]
    pub fn faults(&self) -> usize {
        self.log.len()
    }
}

/// Schedules faults on a [`LocalCluster`]: pick a kind and nodes at random,
/// inject, hold for a while, heal, rest, repeat until the run ends; then heal
/// everything. One fault at a time.
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use redquorum::testkit::{LocalCluster, Nemesis};
///
/// # async fn run() -> Result<(), redquorum::testkit::TestkitError> {
/// let cluster = Arc::new(LocalCluster::start(5)?);
/// let seed = Nemesis::seed_from_env();
/// let nemesis = Nemesis::new(Arc::clone(&cluster), seed, Duration::from_millis(300));
/// // ... start clients on cluster.urls() ...
/// let report = nemesis.run(Duration::from_secs(5)).await?;
/// println!("seed {} injected {} faults", report.seed, report.faults());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Nemesis {
    cluster: Arc<LocalCluster>,
    seed: u64,
    rng: StdRng,
    ttl: Duration,
    kinds: Vec<FaultKind>,
    /// Killed nodes come back with their AOF instead of empty.
    durable: bool,
}

impl Nemesis {
    /// A nemesis for `cluster` whose clients lock with TTLs up to `ttl`,
    /// drawing every choice from `seed`, with every [`FaultKind`].
    #[must_use]
    pub fn new(cluster: Arc<LocalCluster>, seed: u64, ttl: Duration) -> Self {
        Nemesis {
            cluster,
            seed,
            rng: StdRng::seed_from_u64(seed),
            ttl,
            kinds: FaultKind::ALL.to_vec(),
            durable: false,
        }
    }

    /// Restricts the kinds of fault drawn (ignored if empty).
    #[must_use]
    pub fn with_kinds(mut self, kinds: &[FaultKind]) -> Self {
        if !kinds.is_empty() {
            self.kinds = kinds.to_vec();
        }
        self
    }

    /// Killed nodes come back with what they acknowledged (their AOF),
    /// fencing counters included, as nodes run with `appendonly yes` and
    /// `appendfsync always` do, instead of empty. Turn AOF on first
    /// ([`LocalCluster::enable_aof`]) on every node. Without it, a node
    /// restarted empty forgets its fencing counters, which can let a token
    /// go backwards (the documented caveat of fencing).
    #[must_use]
    pub fn with_durable_restarts(mut self) -> Self {
        self.durable = true;
        self
    }

    /// `$REDQUORUM_SEED` if set to a number, else a fresh random seed.
    #[must_use]
    pub fn seed_from_env() -> u64 {
        std::env::var(SEED_ENV)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(rand::random)
    }

    /// The seed of this nemesis.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Injects faults for `duration`, then heals every node (a killed node
    /// is restarted only once the TTL has passed) and returns what it did.
    ///
    /// # Errors
    ///
    /// A [`TestkitError`] if a node cannot be killed, paused or restarted.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future may leave a fault in place.
    pub async fn run(mut self, duration: Duration) -> Result<NemesisReport, TestkitError> {
        let started = tokio::time::Instant::now();
        let end = started + duration;
        let mut report = NemesisReport {
            seed: self.seed,
            log: Vec::new(),
        };
        let n = self.cluster.len();
        let minority = (n - 1) / 2;
        let majority = n / 2 + 1;
        while tokio::time::Instant::now() < end && !self.kinds.is_empty() {
            let rest = self.between(self.ttl / 4, self.ttl);
            tokio::time::sleep(rest).await;
            let kind = self.kinds[self.rng.random_range(0..self.kinds.len())];
            let count = match kind {
                FaultKind::PauseOne => 1,
                FaultKind::DelayAll => n,
                FaultKind::KillMajority
                | FaultKind::PauseMajority
                | FaultKind::BlackholeMajority
                | FaultKind::DropReplies => majority,
                _ => minority.max(1),
            };
            let nodes = self.pick(n, count);
            report.log.push(format!(
                "{:>7.3}s {kind} on nodes {nodes:?}",
                started.elapsed().as_secs_f64()
            ));
            self.inject(kind, &nodes).await?;
        }
        Ok(report)
    }

    /// A random duration in `[low, high]`.
    fn between(&mut self, low: Duration, high: Duration) -> Duration {
        let (low, high) = (low.as_micros() as u64, high.as_micros() as u64);
        Duration::from_micros(self.rng.random_range(low..=high.max(low)))
    }

    /// `count` distinct node indices out of `n`.
    fn pick(&mut self, n: usize, count: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..n).collect();
        for i in 0..all.len() {
            let j = self.rng.random_range(i..all.len());
            all.swap(i, j);
        }
        all.truncate(count.min(n));
        all.sort_unstable();
        all
    }

    async fn inject(&mut self, kind: FaultKind, nodes: &[usize]) -> Result<(), TestkitError> {
        let ttl = self.ttl;
        let hold = self.between(ttl / 2, ttl * 2);
        let delay = self.between(ttl / 50, ttl / 8);
        let cluster = Arc::clone(&self.cluster);
        let set_all = |mode: ProxyMode| {
            for &i in nodes {
                cluster.set_proxy(i, mode);
            }
        };
        match kind {
            FaultKind::KillMinority | FaultKind::KillMajority => {
                self.blocking(nodes, |c, i| c.kill(i)).await?;
                // Down longer than any key it held could live.
                tokio::time::sleep(hold.max(ttl + ttl / 2)).await;
                if self.durable {
                    self.blocking(nodes, |c, i| c.restart_with_aof(i)).await?;
                } else {
                    self.blocking(nodes, |c, i| c.restart_empty(i)).await?;
                }
            }
            FaultKind::PauseOne | FaultKind::PauseMajority => {
                self.blocking(nodes, |c, i| c.pause(i)).await?;
                let hold = if kind == FaultKind::PauseMajority {
                    hold.max(ttl + ttl / 2)
                } else {
                    hold
                };
                tokio::time::sleep(hold).await;
                self.blocking(nodes, |c, i| c.resume(i)).await?;
            }
            FaultKind::DelayAll => {
                set_all(ProxyMode::Delay(delay));
                tokio::time::sleep(hold).await;
                set_all(ProxyMode::Pass);
            }
            FaultKind::BlackholeMinority | FaultKind::BlackholeMajority => {
                set_all(ProxyMode::Blackhole);
                tokio::time::sleep(hold).await;
                set_all(ProxyMode::Pass);
            }
            FaultKind::DropReplies => {
                set_all(ProxyMode::DropReplies);
                tokio::time::sleep(hold).await;
                set_all(ProxyMode::Pass);
            }
            FaultKind::ResetMinority => {
                set_all(ProxyMode::Reset);
                tokio::time::sleep(hold / 4).await;
                set_all(ProxyMode::Pass);
            }
            FaultKind::FastClockMinority => {
                set_all(ProxyMode::FastClock { per_mille: 1005 });
                tokio::time::sleep(hold).await;
                set_all(ProxyMode::Pass);
            }
        }
        Ok(())
    }

    /// Runs a blocking cluster operation on each node, off the async threads.
    async fn blocking(
        &self,
        nodes: &[usize],
        op: fn(&LocalCluster, usize) -> Result<(), TestkitError>,
    ) -> Result<(), TestkitError> {
        let cluster = Arc::clone(&self.cluster);
        let nodes = nodes.to_vec();
        let joined = tokio::task::spawn_blocking(move || {
            nodes.into_iter().try_for_each(|i| op(&cluster, i))
        })
        .await;
        match joined {
            Ok(result) => result,
            Err(join) => Err(TestkitError::Io {
                context: "running a fault on a blocking thread".to_owned(),
                source: std::io::Error::other(join.to_string()),
            }),
        }
    }
}
