//! Checkers for tests under faults: [`History`] finds overlapping holds
//! (mutual exclusion), [`Counter`] finds lost updates.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

/// One holder's claim: exclusive from `start` to `end`, on the monotonic
/// clock of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hold {
    /// Who held it (a task or client number chosen by the test).
    pub holder: usize,
    /// When the acquisition started (the lock's TTL started no earlier).
    pub start: Instant,
    /// `min(valid_until, release called)`.
    pub end: Instant,
}

/// Records holds from many tasks and finds overlaps between different
/// holders. Cheap to clone; clones share the record.
///
/// Record `start` as the instant `lock()` returned (not when it was called:
/// a caller that waited for the previous holder would seem to overlap it),
/// `valid_until` from the guard, and the instant `release()` was called.
///
/// ```
/// use std::time::Duration;
/// use redquorum::testkit::History;
/// use tokio::time::Instant;
///
/// let history = History::default();
/// let t = Instant::now();
/// let ms = Duration::from_millis;
/// history.record(1, t, t + ms(10), t + ms(50));      // held until t+10
/// history.record(2, t + ms(10), t + ms(90), t + ms(20));
/// assert!(history.overlaps().is_empty());
/// history.record(3, t + ms(15), t + ms(30), t + ms(30));
/// assert_eq!(history.overlaps().len(), 1);
/// ```
#[derive(Clone, Debug, Default)]
pub struct History {
    holds: Arc<Mutex<Vec<Hold>>>,
}

impl History {
    /// Records that `holder` held the lock from `start` until the earlier of
    /// `valid_until` and `released_at`.
    pub fn record(
        &self,
        holder: usize,
        start: Instant,
        valid_until: Instant,
        released_at: Instant,
    ) {
        let end = valid_until.min(released_at);
        self.holds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Hold { holder, start, end });
    }

    /// Every hold recorded so far.
    #[must_use]
    pub fn holds(&self) -> Vec<Hold> {
        self.holds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many holds were recorded.
    #[must_use]
    pub fn len(&self) -> usize {
        self.holds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// `true` if nothing was recorded.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pairs of holds by different holders whose intervals intersect
    /// (touching ends do not count).
    #[must_use]
    pub fn overlaps(&self) -> Vec<(Hold, Hold)> {
        let mut holds = self.holds();
        holds.sort_by_key(|h| h.start);
        let mut found = Vec::new();
        for (i, a) in holds.iter().enumerate() {
            for b in &holds[i + 1..] {
                if b.start >= a.end {
                    // Sorted by start: every later hold starts even later.
                    break;
                }
                if a.holder != b.holder {
                    found.push((*a, *b));
                }
            }
        }
        found
    }
}

/// The lost-update checker: a counter kept outside the lock nodes, read,
/// held for a while and written back under the lock. If the lock is
/// exclusive, the final value equals the number of acknowledged increments.
///
/// ```
/// use redquorum::testkit::Counter;
///
/// let counter = Counter::default();
/// let seen = counter.read();
/// // ... hold the lock, sleep, check the guard is still valid ...
/// counter.write(seen + 1);
/// counter.acknowledge();
/// assert_eq!(counter.lost_updates(), 0);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Counter {
    inner: Arc<CounterInner>,
}

#[derive(Debug, Default)]
struct CounterInner {
    value: AtomicU64,
    acknowledged: AtomicU64,
}

impl Counter {
    /// The current value (the "read" of read-modify-write).
    #[must_use]
    pub fn read(&self) -> u64 {
        self.inner.value.load(Ordering::SeqCst)
    }

    /// Overwrites the value (the "write" of read-modify-write).
    pub fn write(&self, value: u64) {
        self.inner.value.store(value, Ordering::SeqCst);
    }

    /// Counts one increment as done (call after a write made under a valid lock).
    pub fn acknowledge(&self) {
        self.inner.acknowledged.fetch_add(1, Ordering::SeqCst);
    }

    /// Increments acknowledged so far.
    #[must_use]
    pub fn acknowledged(&self) -> u64 {
        self.inner.acknowledged.load(Ordering::SeqCst)
    }

    /// How many acknowledged increments are missing from the value (0 when
    /// the lock kept every read-modify-write exclusive).
    #[must_use]
    pub fn lost_updates(&self) -> u64 {
        self.acknowledged().saturating_sub(self.read())
    }
}
