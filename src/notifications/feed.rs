//! One node's feed: a pub/sub connection kept in line with the wanted set,
//! reconnected with backoff, turning messages into wake-ups.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::registry::Inner;
use super::source::{Connection, Source};

/// The pause before the first new connection attempt after a failure; it
/// doubles with each further failure, up to [`LAST_RETRY`].
pub(super) const FIRST_RETRY: Duration = Duration::from_millis(50);

/// The longest pause between two connection attempts of one feed.
pub(super) const LAST_RETRY: Duration = Duration::from_secs(5);

/// What a connection must do to hold exactly the wanted subscriptions.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Delta {
    /// Wanted and not subscribed yet.
    pub(super) subscribe: Vec<String>,
    /// Subscribed and no longer wanted.
    pub(super) unsubscribe: Vec<String>,
}

impl Delta {
    /// Never larger than the two sets, whatever the changes that led there.
    pub(super) fn between(wanted: &HashSet<String>, subscribed: &HashSet<String>) -> Self {
        let mut subscribe: Vec<String> = wanted.difference(subscribed).cloned().collect();
        let mut unsubscribe: Vec<String> = subscribed.difference(wanted).cloned().collect();
        subscribe.sort_unstable();
        unsubscribe.sort_unstable();
        Delta {
            subscribe,
            unsubscribe,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.subscribe.is_empty() && self.unsubscribe.is_empty()
    }
}

/// When a feed may try to connect again: exponential backoff with jitter.
/// A connection counts as healthy once it has lasted [`LAST_RETRY`]: one
/// that is lost sooner (a node that accepts and then drops every
/// connection) keeps the pauses growing.
#[derive(Debug, Default)]
pub(super) struct Backoff {
    /// Failures since the last healthy connection.
    pub(super) failures: u32,
    /// No attempt before this instant.
    pub(super) retry_at: Option<Instant>,
    /// Since when the current connection has been in line with the wanted set.
    pub(super) up_since: Option<Instant>,
}

impl Backoff {
    /// The pause after `failures` failures, `unit` in [0, 1) choosing where
    /// in the upper half of the nominal pause it falls.
    pub(super) fn pause(failures: u32, unit: f64) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let doublings = (failures - 1).min(16);
        let nominal = FIRST_RETRY.saturating_mul(1 << doublings).min(LAST_RETRY);
        nominal.div_f64(2.0) + nominal.div_f64(2.0).mul_f64(unit.clamp(0.0, 1.0))
    }

    /// A connection attempt failed, or the connection was lost.
    pub(super) fn failed(&mut self) {
        if self
            .up_since
            .take()
            .is_some_and(|since| since.elapsed() >= LAST_RETRY)
        {
            self.failures = 0;
        }
        self.failures = self.failures.saturating_add(1);
        let pause = Self::pause(self.failures, crate::rng::unit());
        self.retry_at = Some(Instant::now() + pause);
    }

    /// The connection is in line with the wanted set.
    pub(super) fn succeeded(&mut self) {
        self.retry_at = None;
        self.up_since.get_or_insert_with(Instant::now);
    }

    /// Waits until the next attempt is due.
    pub(super) async fn wait(&self) {
        if let Some(at) = self.retry_at {
            tokio::time::sleep_until(at).await;
        }
    }
}

/// One node's feed: keeps its connection's subscriptions in line with the
/// wanted set and turns messages into wake-ups. Ends when the registry is
/// dropped. `resumed`: it replaces a feed that ended, whose subscriptions
/// are gone.
pub(super) async fn run_feed(
    index: usize,
    source: Source,
    timeout: Duration,
    connect_timeout: Duration,
    inner: Weak<Inner>,
    changed: Arc<Notify>,
    resumed: bool,
) {
    let mut conn: Option<Connection> = None;
    // What `conn` is subscribed to.
    let mut subscribed: HashSet<String> = HashSet::new();
    let mut backoff = Backoff::default();
    // The connection may not match the wanted set.
    let mut stale = true;
    // A connection was lost since the last one was in line.
    let mut was_lost = resumed;
    let mut had_connection = false;
    loop {
        if !stale {
            match conn.as_mut() {
                // Biased (messages first): the order never depends on the
                // runtime's draw.
                Some(connection) => tokio::select! {
                    biased;
                    message = connection.next() => match message {
                        Some(message) => {
                            let Some(inner) = inner.upgrade() else { return };
                            inner.announce(index, source.untagged(message.get_channel_name()), message.get_payload_bytes());
                        }
                        None => {
                            // Node restarted, connection killed: connect
                            // again if anything is still wanted.
                            tracing::debug!(node = index, "release notifications: connection lost");
                            conn = None;
                            subscribed.clear();
                            backoff.failed();
                            was_lost = true;
                            stale = true;
                        }
                    },
                    () = changed.notified() => stale = true,
                },
                None => {
                    changed.notified().await;
                    stale = true;
                }
            }
            continue;
        }
        backoff.wait().await;
        let Some(wanted) = inner.upgrade().map(|registry| registry.wanted()) else {
            return;
        };
        if conn.is_none() && wanted.is_empty() {
            // Nothing to subscribe to: connect on the next wait.
            stale = false;
            continue;
        }
        if conn.is_none() {
            #[cfg(test)]
            if let Some(registry) = inner.upgrade() {
                registry
                    .connects
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            conn = connect(index, &source, connect_timeout).await;
            if conn.is_none() {
                backoff.failed();
                continue;
            }
        }
        let delta = Delta::between(&wanted, &subscribed);
        let Some(connection) = conn.as_mut() else {
            continue;
        };
        if reconcile(index, connection, &delta, timeout).await {
            subscribed = wanted;
            backoff.succeeded();
            stale = false;
            let Some(registry) = inner.upgrade() else {
                return;
            };
            for channel in &delta.subscribe {
                if was_lost {
                    registry.resubscribed(channel);
                } else {
                    registry.subscribed(channel);
                }
            }
            had_connection = true;
            was_lost = false;
        } else {
            // Closing the connection drops its subscriptions.
            conn = None;
            subscribed.clear();
            backoff.failed();
            was_lost |= had_connection;
        }
    }
}

/// Applies `delta` on a connection; false if the connection is to be
/// dropped.
pub(super) async fn reconcile(
    index: usize,
    connection: &mut Connection,
    delta: &Delta,
    timeout: Duration,
) -> bool {
    if delta.is_empty() {
        return true;
    }
    if !delta.subscribe.is_empty() {
        match tokio::time::timeout(timeout, connection.subscribe(&delta.subscribe)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!(node = index, error = %e, "release notifications: SUBSCRIBE failed");
                return false;
            }
            Err(_) => {
                tracing::debug!(node = index, "release notifications: SUBSCRIBE timed out");
                return false;
            }
        }
    }
    if !delta.unsubscribe.is_empty() {
        let done = tokio::time::timeout(timeout, connection.unsubscribe(&delta.unsubscribe)).await;
        if !matches!(done, Ok(Ok(()))) {
            tracing::debug!(node = index, "release notifications: UNSUBSCRIBE failed");
            return false;
        }
    }
    true
}

pub(super) async fn connect(
    index: usize,
    source: &Source,
    timeout: Duration,
) -> Option<Connection> {
    match tokio::time::timeout(timeout, source.connect()).await {
        Ok(Ok(connection)) => Some(connection),
        Ok(Err(e)) => {
            tracing::debug!(node = index, error = %e, "release notifications: cannot connect");
            None
        }
        Err(_) => {
            tracing::debug!(node = index, "release notifications: connect timed out");
            None
        }
    }
}
