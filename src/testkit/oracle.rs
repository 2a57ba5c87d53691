//! [`Oracle`]: checks the lock's central invariant from outside. A live
//! guard's deadline is never later than the moment the quorum-th
//! longest-lived copy of its key expires on the nodes.

use std::fmt;
use std::time::Duration;

use crate::{LockGuard, Redlock};

/// How long one read of one node may take before the node counts as
/// unreadable (paused, say).
const READ_TIMEOUT: Duration = Duration::from_millis(250);

/// How many times [`Oracle::check`] reads the keys while the guard's
/// deadline keeps moving before it gives up (says nothing).
const READS: usize = 3;

/// The default slack of [`Oracle::check`]: `PTTL` is whole milliseconds.
pub const ORACLE_TOLERANCE: Duration = Duration::from_millis(5);

/// What one node says of one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyLife {
    /// The key is gone from a node that answers.
    Gone,
    /// The key expires after this long.
    Expires(Duration),
    /// The key never expires, or the node could not be read (it is down,
    /// paused, or slow): nothing can be said against the guard.
    Unbounded,
}

/// An oracle's reading of a guard that broke the invariant.
#[derive(Clone, Debug)]
pub struct Violation {
    /// The resources of the guard.
    pub resources: Vec<String>,
    /// What the guard claimed was left.
    pub remaining: Duration,
    /// The quorum-th longest life of the keys (the shortest over the keys).
    pub quorum_life: Duration,
    /// Every node's answer, per key.
    pub lives: Vec<Vec<KeyLife>>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "guard of {:?} claims {:?} left, but a quorum of nodes holds its keys for only {:?} \
             (per node: {:?})",
            self.resources, self.remaining, self.quorum_life, self.lives
        )
    }
}

impl std::error::Error for Violation {}

/// Reads `PTTL` of a guard's keys on every node, on direct connections
/// (not through the fault proxies), and checks that the guard claims no
/// more than a quorum of nodes still holds.
///
/// The keys are read first and the guard after, so the check can only be
/// too lenient by the time the reads took, never too strict; when the
/// guard's deadline moved during the reads (an extension landed), the keys
/// are read again, and after three such moves the check says nothing. A node that
/// cannot be read (down, paused) counts as holding the key forever: it
/// votes for no one while it cannot answer, and a node that forgets keys
/// when it comes back (an empty restart inside the TTL) breaks Redlock's
/// assumptions, which the mutual-exclusion checker, not this one, catches.
///
/// ```no_run
/// use std::time::Duration;
/// use redquorum::Redlock;
/// use redquorum::testkit::{LocalCluster, Oracle};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let cluster = LocalCluster::start(5)?;
/// let redlock = Redlock::new(cluster.urls())?;
/// let oracle = Oracle::new(cluster.direct_urls(), redlock.quorum());
/// let guard = redlock.lock("r", Duration::from_secs(5)).await?;
/// oracle.check(&redlock, &guard).await?;
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Oracle {
    urls: Vec<String>,
    quorum: usize,
    tolerance: Duration,
    /// Put in front of every key read on node `i` (a cluster node's hash
    /// tag, `{tag}`); none when empty.
    key_prefixes: Vec<String>,
}

impl Oracle {
    /// An oracle over the nodes at `direct_urls` (bypass any proxy) for
    /// locks that need `quorum` of them.
    #[must_use]
    pub fn new(direct_urls: Vec<String>, quorum: usize) -> Self {
        Oracle {
            urls: direct_urls,
            quorum,
            tolerance: ORACLE_TOLERANCE,
            key_prefixes: Vec::new(),
        }
    }

    /// Reads node `i`'s keys as `{prefixes[i]}{key}`: on a lock over a Redis
    /// Cluster, each node's keys carry its hash tag in front
    /// (`format!("{{{tag}}}")`, with the tag of
    /// [`NodeCheck::cluster_slot`](crate::NodeCheck::cluster_slot)).
    ///
    /// ```
    /// let oracle = redquorum::testkit::Oracle::new(vec!["redis://127.0.0.1:7000/".into()], 1)
    ///     .with_key_prefixes(vec!["{rq3.0.7}".into()]);
    /// # let _ = oracle;
    /// ```
    #[must_use]
    pub fn with_key_prefixes(mut self, prefixes: Vec<String>) -> Self {
        self.key_prefixes = prefixes;
        self
    }

    /// Sets the slack allowed between the guard's claim and the nodes'
    /// (default [`ORACLE_TOLERANCE`]).
    #[must_use]
    pub fn with_tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// What every node says of `key`, in node order.
    pub async fn lives(&self, key: &str) -> Vec<KeyLife> {
        let reads = self.urls.iter().enumerate().map(|(i, url)| {
            let prefix = self.key_prefixes.get(i).map_or("", String::as_str);
            read_life(url, format!("{prefix}{key}"))
        });
        futures_util::future::join_all(reads).await
    }

    /// The quorum-th longest life of `key` over the nodes.
    pub async fn quorum_life(&self, key: &str) -> Option<Duration> {
        quorum_life(&self.lives(key).await, self.quorum)
    }

    /// Checks `guard` (of `redlock`, which names its keys).
    ///
    /// # Errors
    ///
    /// The [`Violation`] when the guard claims more validity than a quorum
    /// of nodes holds its keys for (plus the tolerance).
    pub async fn check(&self, redlock: &Redlock, guard: &LockGuard) -> Result<(), Violation> {
        // An extension that lands while the keys are read (the watchdog's)
        // would compare the old TTLs with the new deadline: read again.
        for _ in 0..READS {
            let before = guard.valid_until();
            let mut lives = Vec::with_capacity(guard.resources().len());
            let mut shortest: Option<Duration> = None;
            for resource in guard.resources() {
                let key = redlock.lock_key(resource);
                let key_lives = self.lives(&key).await;
                if let Some(life) = quorum_life(&key_lives, self.quorum) {
                    shortest = Some(shortest.map_or(life, |s| s.min(life)));
                }
                lives.push(key_lives);
            }
            if guard.valid_until() != before {
                continue;
            }
            // Read after the nodes: the guard's claim can only have shrunk.
            let remaining = guard.remaining();
            let Some(quorum_life) = shortest else {
                return Ok(());
            };
            if remaining > quorum_life + self.tolerance {
                return Err(Violation {
                    resources: guard.resources().to_vec(),
                    remaining,
                    quorum_life,
                    lives,
                });
            }
            return Ok(());
        }
        // The deadline kept moving: nothing can be said this time.
        Ok(())
    }
}

/// The quorum-th longest of `lives`; `None` when that one is unbounded.
#[must_use]
pub fn quorum_life(lives: &[KeyLife], quorum: usize) -> Option<Duration> {
    let mut bounded: Vec<Option<Duration>> = lives
        .iter()
        .map(|life| match life {
            KeyLife::Gone => Some(Duration::ZERO),
            KeyLife::Expires(d) => Some(*d),
            KeyLife::Unbounded => None,
        })
        .collect();
    // Longest first, unbounded (None) before everything.
    bounded.sort_by(|a, b| match (a, b) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (Some(x), Some(y)) => y.cmp(x),
    });
    match quorum.checked_sub(1).and_then(|i| bounded.get(i)) {
        Some(life) => *life,
        None => Some(Duration::ZERO),
    }
}

async fn read_life(url: &str, key: String) -> KeyLife {
    let read = async {
        let client = redis::Client::open(url)?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("PTTL")
            .arg(key)
            .query_async::<i64>(&mut conn)
            .await
    };
    match tokio::time::timeout(READ_TIMEOUT, read).await {
        Ok(Ok(-2)) => KeyLife::Gone,
        Ok(Ok(ms)) if ms < 0 => KeyLife::Unbounded,
        Ok(Ok(ms)) => KeyLife::Expires(Duration::from_millis(ms.unsigned_abs())),
        // Down, paused or cut off: a node that cannot answer votes for no
        // one. Whether it comes back with the key, or only after the key
        // would have expired, is up to its restart (the faults' business);
        // nothing can be said against the guard.
        Ok(Err(_)) | Err(_) => KeyLife::Unbounded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_quorum_th_longest_life_counts_unreadable_nodes_as_unbounded() {
        use KeyLife::*;
        let lives = [
            Expires(100 * MS),
            Gone,
            Expires(300 * MS),
            Unbounded,
            Expires(50 * MS),
        ];
        assert_eq!(quorum_life(&lives, 1), None);
        assert_eq!(quorum_life(&lives, 2), Some(300 * MS));
        assert_eq!(quorum_life(&lives, 3), Some(100 * MS));
        assert_eq!(quorum_life(&lives, 5), Some(Duration::ZERO));
        assert_eq!(quorum_life(&lives[..2], 3), Some(Duration::ZERO));
    }
}
