//! The waiters of each resource and the feeds' shared state: who waits
//! for which channel (the wanted set), and the wake-ups a release brings.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::AbortHandle;

/// How many recent release values each resource remembers, to wake one
/// waiter per release, once a quorum of nodes announced it.
pub(super) const RECENT: usize = 16;

/// The waiters of one resource.
pub(super) struct Entry {
    pub(super) notify: Arc<Notify>,
    pub(super) waiters: usize,
    /// Release values announced, oldest first, with how many nodes did.
    pub(super) recent: VecDeque<(Box<[u8]>, usize)>,
    /// Subscribed on at least one node since the entry was created.
    pub(super) live: bool,
}

impl Entry {
    pub(super) fn new() -> Self {
        Entry {
            notify: Arc::new(Notify::new()),
            waiters: 0,
            recent: VecDeque::with_capacity(RECENT),
            live: false,
        }
    }

    /// Records one node's announcement of the release of `value`; true
    /// when it is the `needed`-th (the lock is then free on a quorum, and
    /// an attempt can get it), never again for the same release.
    pub(super) fn announcement(&mut self, value: &[u8], needed: usize) -> bool {
        if let Some((_, count)) = self.recent.iter_mut().find(|(v, _)| &**v == value) {
            *count += 1;
            return *count == needed;
        }
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back((value.into(), 1));
        needed <= 1
    }
}

/// One node's background feed.
pub(super) struct Feed {
    /// Wakes the feed when the wanted set has changed. A wake-up that finds
    /// the feed busy is kept (one permit), never queued.
    pub(super) changed: Arc<Notify>,
    pub(super) task: Option<AbortHandle>,
}

pub(super) struct Inner {
    pub(super) sources: Vec<super::Source>,
    pub(super) timeout: Duration,
    /// The bound on opening a pub/sub connection.
    pub(super) connect_timeout: Duration,
    /// Announcements of one release that wake a waiter.
    pub(super) quorum: usize,
    /// Waiters per channel: its keys are the wanted set.
    pub(super) entries: Mutex<HashMap<String, Entry>>,
    /// Started on the first wait.
    pub(super) feeds: Mutex<Vec<Feed>>,
    /// Connection attempts made by the feeds (tests).
    #[cfg(test)]
    pub(super) connects: std::sync::atomic::AtomicUsize,
}

impl Inner {
    pub(super) fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // A panic while holding the lock cannot leave the map inconsistent
        // (every update is a single step), so a poisoned lock is used as is.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn feeds(&self) -> MutexGuard<'_, Vec<Feed>> {
        self.feeds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The wanted set has changed: every feed reconciles when it can.
    pub(super) fn changed(&self) {
        for feed in self.feeds().iter() {
            feed.changed.notify_one();
        }
    }

    /// A node announced the release of `value` on `channel`: once a
    /// quorum of nodes did, wakes one waiter, once per release.
    pub(super) fn announce(&self, channel: &str, value: &[u8]) {
        if let Some(entry) = self.entries().get_mut(channel)
            && entry.announcement(value, self.quorum)
        {
            entry.notify.notify_one();
        }
    }

    /// `channel` is now subscribed on a node. The first time, one waiter
    /// tries again at once: a release between its failed attempt and the
    /// subscription would otherwise go unheard.
    pub(super) fn subscribed(&self, channel: &str) {
        if let Some(entry) = self.entries().get_mut(channel)
            && !entry.live
        {
            entry.live = true;
            entry.notify.notify_one();
        }
    }

    /// `channel` is subscribed again on a node whose connection was lost:
    /// one waiter tries again at once, as a release may have gone unheard
    /// meanwhile.
    pub(super) fn resubscribed(&self, channel: &str) {
        if let Some(entry) = self.entries().get_mut(channel) {
            entry.live = true;
            entry.notify.notify_one();
        }
    }

    /// The channels with waiters.
    pub(super) fn wanted(&self) -> HashSet<String> {
        self.entries().keys().cloned().collect()
    }

    pub(super) fn leave(&self, channels: &[String]) {
        let mut gone = false;
        {
            let mut entries = self.entries();
            for channel in channels {
                if let Some(entry) = entries.get_mut(channel) {
                    entry.waiters = entry.waiters.saturating_sub(1);
                    if entry.waiters == 0 {
                        entries.remove(channel);
                        gone = true;
                    }
                }
            }
        }
        if gone {
            self.changed();
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let feeds = self
            .feeds
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for feed in feeds.iter() {
            if let Some(task) = &feed.task {
                task.abort();
            }
        }
    }
}
