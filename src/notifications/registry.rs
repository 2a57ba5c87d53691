//! The waiters of each resource and the feeds' shared state: who waits
//! for which channel (the wanted set), and the wake-ups a release brings.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::HandOff;
use crate::gates::{Gates, Opener};

/// How many recent release values each resource remembers, to wake one
/// waiter per release and to open its hand-off's gates as more nodes
/// announce it.
pub(super) const RECENT: usize = 16;

/// The most hand-offs in a row from a lock's holder to a waiter of the
/// same [`Redlock`](crate::Redlock) ([`Inner::released_here`]): the next
/// release is left to the nodes' announcements, which waiters in other
/// processes hear as soon as this one's.
pub(crate) const IN_A_ROW: u8 = 4;

/// One release heard on a resource's channel.
pub(super) struct Release {
    value: Box<[u8]>,
    /// Per node: it announced this release.
    heard: Box<[bool]>,
    /// Per node not heard yet, the opener of its gate in the hand-off
    /// offered for this release; all dropped (every gate open) once a
    /// quorum of nodes has announced it.
    openers: Vec<Option<Opener>>,
}

/// The waiters of one resource.
pub(super) struct Entry {
    pub(super) notify: Arc<Notify>,
    pub(super) waiters: usize,
    /// Releases announced, oldest first.
    pub(super) recent: VecDeque<Release>,
    /// The hand-offs offered to the waiters woken, newest last: per node,
    /// a gate that opens once that node has announced the release (see
    /// [`Entry::announcement`]).
    pub(super) offered: VecDeque<HandOff>,
    /// Subscribed on at least one node since the entry was created.
    pub(super) live: bool,
}

impl Entry {
    pub(super) fn new() -> Self {
        Entry {
            notify: Arc::new(Notify::new()),
            waiters: 0,
            recent: VecDeque::with_capacity(RECENT),
            offered: VecDeque::new(),
            live: false,
        }
    }

    /// Records node `node`'s announcement of the release of `value` (of
    /// `nodes`, `quorum` of them needed to grant the lock); true on the
    /// first announcement of a release, never again for the same release:
    /// one waiter is then woken, with a hand-off. Its gates open node by
    /// node as each node announces the release, all of them once a quorum
    /// has, and at the latest at `until`: the waiter's `SET` goes to each
    /// node as soon as that node has deleted the lock.
    pub(super) fn announcement(
        &mut self,
        node: usize,
        value: &[u8],
        (nodes, quorum): (usize, usize),
        until: Instant,
    ) -> bool {
        if let Some(release) = self.recent.iter_mut().find(|r| &*r.value == value) {
            release.heard_from(node, quorum);
            return false;
        }
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        let gates = Gates::closed(nodes, until);
        let mut release = Release {
            value: value.into(),
            heard: vec![false; nodes].into(),
            openers: (0..nodes).map(|index| Some(gates.opener(index))).collect(),
        };
        release.heard_from(node, quorum);
        self.recent.push_back(release);
        if self.offered.len() == RECENT {
            self.offered.pop_front();
        }
        self.offered.push_back(HandOff { gates, in_a_row: 0 });
        true
    }

    /// The hand-off for a waiter just woken: the newest offered, unless
    /// its gates have all opened at their bound already (none then).
    pub(super) fn take_offer(&mut self) -> Option<HandOff> {
        self.offered
            .pop_back()
            .filter(|offer| !offer.gates.expired())
    }
}

impl Release {
    /// Opens `node`'s gate; every gate once a quorum of nodes is heard.
    fn heard_from(&mut self, node: usize, quorum: usize) {
        if let Some(heard) = self.heard.get_mut(node) {
            *heard = true;
        }
        if let Some(opener) = self.openers.get_mut(node) {
            *opener = None;
        }
        if self.heard.iter().filter(|heard| **heard).count() >= quorum {
            self.openers.clear();
        }
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
    /// Announcements of one release that free the lock on a quorum.
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

    /// Node `node` announced the release of `value` on `channel`: the
    /// first announcement of a release wakes one waiter, with a hand-off
    /// ([`Entry::announcement`]) whose unheard gates open at the latest
    /// half a node timeout from now.
    pub(super) fn announce(&self, node: usize, channel: &str, value: &[u8]) {
        let nodes = (self.sources.len(), self.quorum);
        let until = Instant::now() + self.timeout / 2;
        if let Some(entry) = self.entries().get_mut(channel)
            && entry.announcement(node, value, nodes, until)
        {
            entry.notify.notify_one();
        }
    }

    /// This `Redlock` has sent the deletes of its lock of `value`, the
    /// `in_a_row`-th hand-off in a row within it: as if every node had
    /// announced the release, one waiter of `channel` here is woken at
    /// once, its gates all open. Its `SET`s go out on the same
    /// connections, after the deletes. Past [`IN_A_ROW`], nothing: the
    /// nodes' announcements wake waiters here and elsewhere alike.
    pub(super) fn released_here(&self, channel: &str, value: &[u8], in_a_row: u8) {
        if in_a_row >= IN_A_ROW {
            return;
        }
        let nodes = (self.sources.len(), self.quorum);
        let until = Instant::now() + self.timeout / 2;
        let mut entries = self.entries();
        let Some(entry) = entries.get_mut(channel) else {
            return;
        };
        let mut first = false;
        for node in 0..nodes.0 {
            first |= entry.announcement(node, value, nodes, until);
        }
        if let Some(offer) = entry.offered.back_mut().filter(|_| first) {
            offer.in_a_row = in_a_row + 1;
            entry.notify.notify_one();
        }
    }

    /// The hand-off for a waiter of `channel` just woken (none: it tries
    /// every node at once).
    pub(super) fn take_offer(&self, channel: &str) -> Option<HandOff> {
        self.entries().get_mut(channel).and_then(Entry::take_offer)
    }

    /// `channel` is now subscribed on a node. The first time, one waiter
    /// tries again at once: a release between its failed attempt and the
    /// subscription would otherwise go unheard.
    pub(super) fn subscribed(&self, channel: &str) {
        if let Some(entry) = self.entries().get_mut(channel)
            && !entry.live
        {
            entry.live = true;
            entry.offered.clear();
            entry.notify.notify_one();
        }
    }

    /// `channel` is subscribed again on a node whose connection was lost:
    /// one waiter tries again at once, as a release may have gone unheard
    /// meanwhile.
    pub(super) fn resubscribed(&self, channel: &str) {
        if let Some(entry) = self.entries().get_mut(channel) {
            entry.live = true;
            entry.offered.clear();
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
