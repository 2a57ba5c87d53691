//! What a run records (holds, operations) and the checkers that read it:
//! no two holders overlap, fencing tokens increase per resource, a guard
//! never claims more validity than a quorum of nodes holds (the oracle).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use crate::lock::held::Status;

/// One hold: who held which resources, from when until when.
#[derive(Clone, Debug)]
pub struct Hold {
    /// The client that held it.
    pub client: usize,
    /// Who holds: the lock value, or `owner:<name>` for reentrant holds.
    pub holder: String,
    /// The resources held.
    pub resources: Vec<String>,
    /// When the acquisition returned (virtual ms).
    pub start: Duration,
    /// When the hold ended: the release began, the guard was dropped, or
    /// its validity ran out, whichever came first.
    pub end: Duration,
    /// The fencing token of each resource, when fenced.
    pub tokens: Option<Vec<u64>>,
}

/// A live guard the oracle checks: its keys, value and claimed deadline.
#[derive(Clone, Debug)]
pub(crate) struct Live {
    pub(crate) keys: Vec<String>,
    pub(crate) value: String,
    /// The guard's own status: its deadline as of now, moved by every
    /// round (an explicit extension's or the watchdog's), not as the
    /// workload last read it.
    pub(crate) status: watch::Receiver<Status>,
    pub(crate) quorum: usize,
    /// When its acquisition began, so before any node wrote its keys
    /// (data lost on a node since counts as held there when the restart
    /// guard is on: the node refuses to vote). A node may grant, then
    /// lose the key (a failover to a lagging replica) before the round
    /// returns.
    pub(crate) since: Duration,
    /// An extension is in flight: the nodes may already hold a shorter TTL
    /// than the guard claims until its reply comes (the caller, inside
    /// `extend`, cannot act on the old deadline meanwhile).
    pub(crate) extending: bool,
}

/// Everything a run records.
#[derive(Default)]
pub struct Record {
    /// Finished holds.
    pub holds: Vec<Hold>,
    /// One JSON line per operation and fault.
    pub history: Vec<String>,
    /// What the checkers found.
    pub violations: Vec<String>,
    pub(crate) live: BTreeMap<u64, Live>,
    next_live: u64,
    /// Operations that finished.
    pub ops: usize,
    /// Holds of plain locks the workload ended, by what its call gave:
    /// `released`, `expired`, `unconfirmed` or `dropped`.
    pub(crate) ended: BTreeMap<&'static str, u64>,
}

impl Record {
    /// Registers a live guard; returns its id.
    pub(crate) fn go_live(&mut self, live: Live) -> u64 {
        self.next_live += 1;
        self.live.insert(self.next_live, live);
        self.next_live
    }

    /// Marks a live guard's extension as over.
    pub(crate) fn extended(&mut self, id: u64) {
        if let Some(live) = self.live.get_mut(&id) {
            live.extending = false;
        }
    }

    /// Marks a live guard's extension as in flight.
    pub(crate) fn extending(&mut self, id: u64) {
        if let Some(live) = self.live.get_mut(&id) {
            live.extending = true;
        }
    }

    /// Appends one history line.
    pub(crate) fn log(&mut self, line: String) {
        self.history.push(line);
    }

    /// Adds a violation.
    pub(crate) fn violation(&mut self, what: String) {
        self.violations.push(what);
    }

    /// A hash of the history, to compare two runs of one seed.
    pub fn history_hash(&self) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for line in &self.history {
            for byte in line.bytes().chain(std::iter::once(b'\n')) {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        hash
    }
}

/// Pairs of holds by different holders of one resource that overlap.
pub fn overlaps(holds: &[Hold]) -> Vec<String> {
    let mut by_resource: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for hold in holds.iter().filter(|h| h.end > h.start) {
        for resource in &hold.resources {
            by_resource.entry(resource).or_default().push(hold);
        }
    }
    let mut found = Vec::new();
    for (resource, mut list) in by_resource {
        list.sort_by_key(|h| h.start);
        for (i, a) in list.iter().enumerate() {
            for b in &list[i + 1..] {
                if b.start >= a.end {
                    break;
                }
                if a.holder != b.holder {
                    found.push(format!(
                        "overlap on {resource}: client {} held {:?}..{:?} and client {} held \
                         {:?}..{:?}",
                        a.client, a.start, a.end, b.client, b.start, b.end
                    ));
                }
            }
        }
    }
    found
}

/// Fenced holds of one resource whose tokens do not strictly increase in
/// the order the holds began.
pub fn fencing_disorder(holds: &[Hold]) -> Vec<String> {
    let mut by_resource: BTreeMap<&str, Vec<(Duration, u64, usize)>> = BTreeMap::new();
    for hold in holds {
        let Some(tokens) = &hold.tokens else { continue };
        for (resource, token) in hold.resources.iter().zip(tokens) {
            by_resource
                .entry(resource)
                .or_default()
                .push((hold.start, *token, hold.client));
        }
    }
    let mut found = Vec::new();
    for (resource, mut list) in by_resource {
        list.sort_by_key(|&(start, token, _)| (start, token));
        for pair in list.windows(2) {
            let ((s1, t1, c1), (s2, t2, c2)) = (pair[0], pair[1]);
            if t2 <= t1 {
                found.push(format!(
                    "fencing on {resource}: client {c1} got token {t1} at {s1:?}, then client \
                     {c2} got token {t2} at {s2:?}"
                ));
            }
        }
    }
    found
}

/// How long a key lives on from now, in virtual time, given its PTTL in
/// node ms and the node clock's rate (`None`: gone, or not expiring).
pub(crate) fn lives_for(pttl: i64, rate: f64) -> Option<Duration> {
    match pttl {
        -2 => None,
        -1 => Some(Duration::MAX),
        ms => Some(Duration::from_secs_f64(
            (ms.max(0) as f64 / rate.max(1e-9)) / 1000.0,
        )),
    }
}

/// The stored value `stored` is the holder `value`'s (plain, or marked by
/// a waiter).
pub(crate) fn is_ours(stored: &[u8], value: &str) -> bool {
    let stored = stored.strip_suffix(b"+").unwrap_or(stored);
    stored == value.as_bytes()
}

/// A one-line JSON string value.
pub(crate) fn json(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The record, locked.
pub(crate) fn record(record: &Mutex<Record>) -> MutexGuard<'_, Record> {
    record.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(client: usize, holder: &str, start: u64, end: u64, token: Option<u64>) -> Hold {
        Hold {
            client,
            holder: holder.to_owned(),
            resources: vec!["r".to_owned()],
            start: Duration::from_millis(start),
            end: Duration::from_millis(end),
            tokens: token.map(|t| vec![t]),
        }
    }

    #[test]
    fn the_overlap_checker_sees_two_holders_at_once_and_not_one_after_the_other() {
        let apart = [hold(0, "a", 0, 10, None), hold(1, "b", 10, 20, None)];
        assert!(overlaps(&apart).is_empty());
        let same_holder = [hold(0, "a", 0, 10, None), hold(0, "a", 5, 20, None)];
        assert!(overlaps(&same_holder).is_empty());
        let at_once = [hold(0, "a", 0, 10, None), hold(1, "b", 9, 20, None)];
        assert_eq!(overlaps(&at_once).len(), 1);
    }

    #[test]
    fn the_fencing_checker_sees_a_token_that_does_not_increase() {
        let rising = [hold(0, "a", 0, 10, Some(1)), hold(1, "b", 10, 20, Some(2))];
        assert!(fencing_disorder(&rising).is_empty());
        let repeated = [hold(0, "a", 0, 10, Some(2)), hold(1, "b", 10, 20, Some(2))];
        assert_eq!(fencing_disorder(&repeated).len(), 1);
    }

    #[test]
    fn a_marked_value_is_still_its_holders() {
        assert!(is_ours(b"abc+", "abc"));
        assert!(is_ours(b"abc", "abc"));
        assert!(!is_ours(b"abd", "abc"));
        assert_eq!(lives_for(-2, 1.0), None);
        assert_eq!(lives_for(1000, 2.0), Some(Duration::from_millis(500)));
    }
}
