//! [`Pending`]: per lock key, the deletes of a release of that lock not
//! yet handed to their nodes' connections: those waiting behind a slow
//! node's previous call of the lock, and a release spawned from `Drop`
//! that has not run yet. An acquisition of the same lock sends its call to
//! each node once the delete there was sent, so that it is written after
//! it and our own stale key never refuses it (which would read as "held by
//! another owner"). Deletes sent at once need no record. (A failed
//! attempt's clean-up is followed by the retries of its own `lock()`
//! only: contenders of one lock would otherwise wait on each other's
//! clean-ups.)
//!
//! A delete the node answers `NOSCRIPT` (its script cache was emptied) is
//! sent again after the script is loaded, and a call sent meanwhile can
//! then overtake it; to make that rare, loading one script on `NOSCRIPT`
//! loads the delete scripts too (see `node::call`).
//!
//! Entries are weak: once every delete of the round has been sent (its
//! openers dropped) and the round is done, the entry is dead, and dead
//! entries are swept as new ones come.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::quorum::{Gates, WeakGates};

/// Past this many entries, each insertion sweeps the dead ones.
const SWEEP_AT: usize = 64;

/// Per lock key, when each node's delete of it has been sent.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    sent: Mutex<HashMap<String, WeakGates>>,
}

impl Pending {
    /// Records that the deletes of `keys` are sent as `sent` says.
    pub(crate) fn insert(&self, keys: &[String], sent: &Gates) {
        let mut map = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= SWEEP_AT {
            map.retain(|_, weak| weak.upgrade().is_some());
        }
        for key in keys {
            map.insert(key.clone(), sent.downgrade());
        }
    }

    /// When the deletes still pending for any of `keys` have been sent, per
    /// node (the latest recorded for the first key that has one); nothing
    /// to wait for when none is.
    pub(crate) fn after(&self, keys: &[String]) -> Gates {
        let mut map = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        if map.is_empty() {
            return Gates::default();
        }
        for key in keys {
            match map.get(key).map(WeakGates::upgrade) {
                Some(Some(gates)) => return gates,
                Some(None) => {
                    map.remove(key);
                }
                None => {}
            }
        }
        Gates::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::{Duration, Instant};

    fn keys(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[tokio::test]
    async fn an_acquisition_waits_only_for_deletes_not_yet_sent() {
        let pending = Pending::default();
        assert!(!pending.after(&keys(&["a"])).any_closed());
        let sent = Gates::closed(2, Instant::now() + Duration::from_secs(3600));
        pending.insert(&keys(&["a", "b"]), &sent);
        let opener = sent.opener(1);
        drop(sent);
        // The record lives while one of its openers does.
        assert!(pending.after(&keys(&["b"])).any_closed());
        assert!(!pending.after(&keys(&["c"])).any_closed());
        drop(opener);
        assert!(!pending.after(&keys(&["a"])).any_closed());
        assert!(pending.sent.lock().unwrap().len() <= 1);
    }
}
