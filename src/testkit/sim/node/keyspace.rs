//! [`Keyspace`]: the keys of one simulated node, with expiry on the node's
//! clock and a history that gives back the keyspace as it was at any
//! earlier virtual time (for snapshots and failovers).

use std::collections::BTreeMap;
use std::time::Duration;

/// A key's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Data {
    /// A string.
    Str(Vec<u8>),
    /// A hash, its fields in insertion order (as a small Redis hash keeps
    /// them: `HGETALL` answers in this order).
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
}

impl Data {
    /// What `TYPE` answers.
    pub(super) fn type_name(&self) -> &'static str {
        match self {
            Data::Str(_) => "string",
            Data::Hash(_) => "hash",
        }
    }
}

/// A key's value and expiry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) data: Data,
    /// When the key expires, node clock in ms; `None`: never.
    pub(super) expire_at: Option<i64>,
}

impl Entry {
    /// An entry without expiry.
    pub(super) fn new(data: Data) -> Entry {
        Entry {
            data,
            expire_at: None,
        }
    }

    /// Alive at node time `now_ms`: it expires once the clock reaches
    /// `expire_at`.
    pub(super) fn alive(&self, now_ms: i64) -> bool {
        self.expire_at.is_none_or(|at| now_ms < at)
    }
}

/// One change, kept so that it can be undone: the key and what it held
/// before, at virtual time `at`.
#[derive(Debug)]
struct Undo {
    at: Duration,
    key: Vec<u8>,
    before: Option<Entry>,
}

/// The keys and their history.
#[derive(Debug, Default)]
pub(super) struct Keyspace {
    map: BTreeMap<Vec<u8>, Entry>,
    history: Vec<Undo>,
    /// Changes since the last `SAVE` (or start).
    pub(super) dirty: u64,
    /// Changes since the start: readers that keep what they read know
    /// whether it still holds.
    pub(super) changes: u64,
}

impl Keyspace {
    /// The live entry of `key` at node time `now_ms`.
    pub(super) fn get(&self, key: &[u8], now_ms: i64) -> Option<&Entry> {
        self.map.get(key).filter(|e| e.alive(now_ms))
    }

    /// The entry of `key`, expired or not.
    pub(super) fn stored(&self, key: &[u8]) -> Option<&Entry> {
        self.map.get(key)
    }

    /// Sets `key` to `entry` at virtual time `at`.
    pub(super) fn put(&mut self, key: &[u8], entry: Entry, at: Duration) {
        let before = self.map.insert(key.to_vec(), entry);
        self.record(at, key, before);
    }

    /// Removes `key` at virtual time `at`; true when it was alive at node
    /// time `now_ms`.
    pub(super) fn delete(&mut self, key: &[u8], now_ms: i64, at: Duration) -> bool {
        match self.map.remove(key) {
            Some(before) => {
                let alive = before.alive(now_ms);
                self.record(at, key, Some(before));
                alive
            }
            None => false,
        }
    }

    fn record(&mut self, at: Duration, key: &[u8], before: Option<Entry>) {
        self.dirty += 1;
        self.changes += 1;
        // Virtual time never goes back: keep the history in order.
        let at = self.history.last().map_or(at, |last| at.max(last.at));
        self.history.push(Undo {
            at,
            key: key.to_vec(),
            before,
        });
    }

    /// The live keys at node time `now_ms`, in order.
    pub(super) fn live(&self, now_ms: i64) -> impl Iterator<Item = (&Vec<u8>, &Entry)> {
        self.map.iter().filter(move |(_, e)| e.alive(now_ms))
    }

    /// The keyspace as it was at virtual time `at`: every change made
    /// after `at` undone (changes made at `at` itself are kept).
    pub(super) fn as_of(&self, at: Duration) -> BTreeMap<Vec<u8>, Entry> {
        let mut map = self.map.clone();
        for undo in self.history.iter().rev().take_while(|u| u.at > at) {
            match &undo.before {
                Some(entry) => map.insert(undo.key.clone(), entry.clone()),
                None => map.remove(&undo.key),
            };
        }
        map
    }

    /// Replaces every key by `map`'s at virtual time `at`, leaving out the
    /// keys expired at node time `now_ms`; each change goes into the
    /// history.
    pub(super) fn replace(&mut self, mut map: BTreeMap<Vec<u8>, Entry>, now_ms: i64, at: Duration) {
        map.retain(|_, e| e.alive(now_ms));
        let old = std::mem::take(&mut self.map);
        for (key, before) in &old {
            if map.get(key) != Some(before) {
                self.record(at, key, Some(before.clone()));
            }
        }
        for key in map.keys() {
            if !old.contains_key(key) {
                self.record(at, key, None);
            }
        }
        self.map = map;
    }
}
