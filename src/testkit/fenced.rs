//! [`FencedResource`]: a reference storage service that checks fencing
//! tokens, as a resource protected by a lock should.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// An in-memory store that accepts a write only if its fencing token is at
/// least the highest token it has seen for that resource, and records every
/// write, accepted or rejected.
///
/// It stands for any service that takes fencing tokens (a database row
/// with a token column and a conditional update, an object store with a
/// precondition...): a holder that was paused past its lock's validity
/// comes back with an older token than the new holder's and is refused.
/// Equal tokens are accepted, so one holder can write several times.
///
/// Cheap to share behind an `Arc`; every method takes `&self`.
///
/// ```
/// use redquorum::testkit::FencedResource;
///
/// let store = FencedResource::new();
/// assert!(store.write("balance", 7, "100").is_ok());
/// assert!(store.write("balance", 8, "120").is_ok());
/// let stale = store.write("balance", 7, "90").unwrap_err();
/// assert_eq!((stale.token(), stale.highest()), (7, 8));
/// assert_eq!(store.value("balance").as_deref(), Some("120"));
/// assert_eq!(store.rejected().len(), 1);
/// ```
#[derive(Debug, Default)]
pub struct FencedResource {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Per resource: the highest token accepted, and the value written with it.
    current: HashMap<String, (u64, String)>,
    log: Vec<FencedWrite>,
}

/// One write presented to a [`FencedResource`], in the order received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FencedWrite {
    /// The resource written.
    pub resource: String,
    /// The fencing token the writer presented.
    pub token: u64,
    /// The data written.
    pub data: String,
    /// Whether the write was accepted.
    pub accepted: bool,
}

/// A write refused because a higher token had already been seen.
///
/// ```
/// use redquorum::testkit::FencedResource;
///
/// let store = FencedResource::new();
/// store.write("r", 5, "new").unwrap();
/// let err = store.write("r", 4, "old").unwrap_err();
/// assert_eq!(err.to_string(), "stale fencing token 4 for \"r\": 5 was already seen");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleToken {
    resource: String,
    token: u64,
    highest: u64,
}

impl StaleToken {
    /// The resource written.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The token that was refused.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The highest token seen for the resource when the write was refused.
    pub fn highest(&self) -> u64 {
        self.highest
    }
}

impl fmt::Display for StaleToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stale fencing token {} for {:?}: {} was already seen",
            self.token, self.resource, self.highest
        )
    }
}

impl std::error::Error for StaleToken {}

impl FencedResource {
    /// An empty store.
    pub fn new() -> Self {
        FencedResource::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `data` to `resource` with fencing token `token`.
    ///
    /// # Errors
    ///
    /// [`StaleToken`] if a higher token was already accepted for
    /// `resource`; nothing is written then (the attempt is recorded).
    pub fn write(&self, resource: &str, token: u64, data: &str) -> Result<(), StaleToken> {
        let mut state = self.state();
        let highest = state.current.get(resource).map(|(t, _)| *t);
        let accepted = highest.is_none_or(|h| token >= h);
        state.log.push(FencedWrite {
            resource: resource.to_owned(),
            token,
            data: data.to_owned(),
            accepted,
        });
        if accepted {
            state
                .current
                .insert(resource.to_owned(), (token, data.to_owned()));
            Ok(())
        } else {
            Err(StaleToken {
                resource: resource.to_owned(),
                token,
                highest: highest.unwrap_or(0),
            })
        }
    }

    /// The highest token accepted for `resource`, if any.
    pub fn highest(&self, resource: &str) -> Option<u64> {
        self.state().current.get(resource).map(|(t, _)| *t)
    }

    /// The data of the last accepted write to `resource`, if any.
    pub fn value(&self, resource: &str) -> Option<String> {
        self.state().current.get(resource).map(|(_, v)| v.clone())
    }

    /// Every write presented so far, accepted or not, in order.
    pub fn writes(&self) -> Vec<FencedWrite> {
        self.state().log.clone()
    }

    /// The accepted writes, in order.
    pub fn accepted(&self) -> Vec<FencedWrite> {
        self.writes().into_iter().filter(|w| w.accepted).collect()
    }

    /// The rejected writes, in order.
    pub fn rejected(&self) -> Vec<FencedWrite> {
        self.writes().into_iter().filter(|w| !w.accepted).collect()
    }
}
