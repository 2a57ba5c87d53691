//! Release notifications: a contended `lock()` wakes up as soon as the lock
//! is released instead of sleeping out its retry delay.
//!
//! Every release that deletes a key publishes the released value on the
//! resource's channel, `{prefix}released:{resource}`, on each node (the
//! RELEASE script does it; `PUBLISH` with no subscriber costs next to
//! nothing). A [`Redlock`](crate::Redlock) keeps one pub/sub connection per
//! node, opened on the first wait, shared by all its waiters and driven by
//! one background task per node. Waiters register an [`Interest`] in their
//! resources: the channels with at least one waiter are the wanted set.
//!
//! The feeds do not replay a queue of changes: a change only wakes them, and
//! each feed then brings its connection to the wanted set as it is at that
//! moment (subscribes to what is wanted and not subscribed, unsubscribes
//! from what is subscribed and no longer wanted). However many waiters come
//! and go while a node hangs, a feed has at most one reconciliation pending
//! and connects again with an exponential backoff, never once per change.
//!
//! A message wakes ONE local waiter of the resource (FIFO, through
//! [`Notify::notify_one`]), once per release whatever the number of nodes
//! that announce it: the other waiters keep their place and get the next
//! releases, so a hand-off costs one attempt, not a stampede. Everything
//! here is best effort: a node that cannot be reached, refuses `SUBSCRIBE`
//! or drops a message only means that waiters sleep their retry delay, as
//! they would without notifications. Nothing here ever delays or fails an
//! acquisition.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use futures::StreamExt;
use futures::future::{self, FutureExt};
use redis::Client;
use redis::aio::{PubSubSink, PubSubStream};
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// How many recent release values each resource remembers, to wake one
/// waiter per release although every node announces it.
const RECENT: usize = 16;

/// The pause before the first new connection attempt after a failure; it
/// doubles with each further failure, up to [`LAST_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(50);

/// The longest pause between two connection attempts of one feed.
const LAST_RETRY: Duration = Duration::from_secs(5);

/// The channel on which releases of `resource` are announced.
pub(crate) fn channel(prefix: &str, resource: &str) -> String {
    format!("{prefix}released:{resource}")
}

/// The channel of the lock key `{prefix}lock:{resource}`; empty (publish
/// nothing) for a key of another shape.
pub(crate) fn channel_of_key(prefix: &str, key: &str) -> String {
    key.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix("lock:"))
        .map_or_else(String::new, |resource| channel(prefix, resource))
}

/// The waiters of one resource.
struct Entry {
    notify: Arc<Notify>,
    waiters: usize,
    /// Release values already announced, oldest first.
    recent: VecDeque<Box<[u8]>>,
    /// Subscribed on at least one node since the entry was created.
    live: bool,
}

impl Entry {
    fn new() -> Self {
        Entry {
            notify: Arc::new(Notify::new()),
            waiters: 0,
            recent: VecDeque::with_capacity(RECENT),
            live: false,
        }
    }

    /// Records a release announcement; true the first time `value` is seen.
    fn first_announcement(&mut self, value: &[u8]) -> bool {
        if self.recent.iter().any(|v| &**v == value) {
            return false;
        }
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(value.into());
        true
    }
}

/// What a connection must do to hold exactly the wanted subscriptions.
#[derive(Debug, Default, PartialEq, Eq)]
struct Delta {
    /// Wanted and not subscribed yet.
    subscribe: Vec<String>,
    /// Subscribed and no longer wanted.
    unsubscribe: Vec<String>,
}

impl Delta {
    /// Never larger than the two sets, whatever the changes that led there.
    fn between(wanted: &HashSet<String>, subscribed: &HashSet<String>) -> Self {
        let mut subscribe: Vec<String> = wanted.difference(subscribed).cloned().collect();
        let mut unsubscribe: Vec<String> = subscribed.difference(wanted).cloned().collect();
        subscribe.sort_unstable();
        unsubscribe.sort_unstable();
        Delta {
            subscribe,
            unsubscribe,
        }
    }

    fn is_empty(&self) -> bool {
        self.subscribe.is_empty() && self.unsubscribe.is_empty()
    }
}

/// When a feed may try to connect again: exponential backoff with jitter.
/// A connection counts as healthy once it has lasted [`LAST_RETRY`]: one
/// that is lost sooner (a node that accepts and then drops every
/// connection) keeps the pauses growing.
#[derive(Debug, Default)]
struct Backoff {
    /// Failures since the last healthy connection.
    failures: u32,
    /// No attempt before this instant.
    retry_at: Option<Instant>,
    /// Since when the current connection has been in line with the wanted set.
    up_since: Option<Instant>,
}

impl Backoff {
    /// The pause after `failures` failures, `unit` in [0, 1) choosing where
    /// in the upper half of the nominal pause it falls.
    fn pause(failures: u32, unit: f64) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let doublings = (failures - 1).min(16);
        let nominal = FIRST_RETRY.saturating_mul(1 << doublings).min(LAST_RETRY);
        nominal.div_f64(2.0) + nominal.div_f64(2.0).mul_f64(unit.clamp(0.0, 1.0))
    }

    /// A connection attempt failed, or the connection was lost.
    fn failed(&mut self) {
        if self
            .up_since
            .take()
            .is_some_and(|since| since.elapsed() >= LAST_RETRY)
        {
            self.failures = 0;
        }
        self.failures = self.failures.saturating_add(1);
        let pause = Self::pause(self.failures, rand::random::<f64>());
        self.retry_at = Some(Instant::now() + pause);
    }

    /// The connection is in line with the wanted set.
    fn succeeded(&mut self) {
        self.retry_at = None;
        self.up_since.get_or_insert_with(Instant::now);
    }

    /// Waits until the next attempt is due.
    async fn wait(&self) {
        if let Some(at) = self.retry_at {
            tokio::time::sleep_until(at).await;
        }
    }
}

/// One node's background feed.
struct Feed {
    /// Wakes the feed when the wanted set has changed. A wake-up that finds
    /// the feed busy is kept (one permit), never queued.
    changed: Arc<Notify>,
    task: Option<AbortHandle>,
}

struct Inner {
    clients: Vec<Client>,
    timeout: Duration,
    /// Waiters per channel: its keys are the wanted set.
    entries: Mutex<HashMap<String, Entry>>,
    /// Started on the first wait.
    feeds: Mutex<Vec<Feed>>,
    /// Connection attempts made by the feeds (tests).
    #[cfg(test)]
    connects: std::sync::atomic::AtomicUsize,
}

impl Inner {
    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // A panic while holding the lock cannot leave the map inconsistent
        // (every update is a single step), so a poisoned lock is used as is.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn feeds(&self) -> MutexGuard<'_, Vec<Feed>> {
        self.feeds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The wanted set has changed: every feed reconciles when it can.
    fn changed(&self) {
        for feed in self.feeds().iter() {
            feed.changed.notify_one();
        }
    }

    /// A release of `value` was announced on `channel`: wakes one waiter,
    /// once per release.
    fn announce(&self, channel: &str, value: &[u8]) {
        if let Some(entry) = self.entries().get_mut(channel) {
            if entry.first_announcement(value) {
                entry.notify.notify_one();
            }
        }
    }

    /// `channel` is now subscribed on a node. The first time, one waiter
    /// tries again at once: a release between its failed attempt and the
    /// subscription would otherwise go unheard.
    fn subscribed(&self, channel: &str) {
        if let Some(entry) = self.entries().get_mut(channel) {
            if !entry.live {
                entry.live = true;
                entry.notify.notify_one();
            }
        }
    }

    /// `channel` is subscribed again on a node whose connection was lost:
    /// one waiter tries again at once, as a release may have gone unheard
    /// meanwhile.
    fn resubscribed(&self, channel: &str) {
        if let Some(entry) = self.entries().get_mut(channel) {
            entry.live = true;
            entry.notify.notify_one();
        }
    }

    /// The channels with waiters.
    fn wanted(&self) -> HashSet<String> {
        self.entries().keys().cloned().collect()
    }

    fn leave(&self, channels: &[String]) {
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

impl Inner {
    /// Starts every feed that is not running on the current runtime: all of
    /// them the first time, and again any whose task has ended, e.g. with
    /// the runtime it was spawned on (a `Redlock` shared across runtimes).
    /// Without a runtime, nothing starts until a later call has one.
    fn start_feeds(this: &Arc<Inner>) {
        let mut feeds = this.feeds();
        if feeds.is_empty() {
            feeds.extend(this.clients.iter().map(|_| Feed {
                changed: Arc::new(Notify::new()),
                task: None,
            }));
        }
        let dead = |feed: &Feed| feed.task.as_ref().is_none_or(AbortHandle::is_finished);
        if !feeds.iter().any(dead) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        for (index, (feed, client)) in feeds.iter_mut().zip(&this.clients).enumerate() {
            if !dead(feed) {
                continue;
            }
            let resumed = feed.task.is_some();
            if resumed {
                tracing::debug!(
                    node = index,
                    "release notifications: feed ended, starting it again"
                );
            }
            let task = runtime.spawn(run_feed(
                index,
                client.clone(),
                this.timeout,
                Arc::downgrade(this),
                Arc::clone(&feed.changed),
                resumed,
            ));
            feed.task = Some(task.abort_handle());
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

/// The release-notification registry of one [`Redlock`](crate::Redlock).
pub(crate) struct Handoff {
    inner: Arc<Inner>,
}

impl Handoff {
    /// A registry over the nodes of `clients`; no I/O until the first wait.
    pub(crate) fn new(clients: Vec<Client>, timeout: Duration) -> Self {
        Handoff {
            inner: Arc::new(Inner {
                clients,
                timeout,
                entries: Mutex::new(HashMap::new()),
                feeds: Mutex::new(Vec::new()),
                #[cfg(test)]
                connects: std::sync::atomic::AtomicUsize::new(0),
            }),
        }
    }

    /// Registers a waiter for `channels` (one per resource), subscribing to
    /// each channel on every node if it is the first waiter. Must run
    /// inside a tokio runtime (the feeds are spawned on it).
    pub(crate) fn interest(&self, channels: Vec<String>) -> Interest {
        Inner::start_feeds(&self.inner);
        let mut notifies = Vec::with_capacity(channels.len());
        let mut new = false;
        {
            let mut entries = self.inner.entries();
            for channel in &channels {
                let entry = entries.entry(channel.clone()).or_insert_with(Entry::new);
                entry.waiters += 1;
                new |= entry.waiters == 1;
                notifies.push(Arc::clone(&entry.notify));
            }
        }
        if new {
            self.inner.changed();
        }
        Interest {
            inner: Arc::clone(&self.inner),
            channels,
            notifies,
        }
    }

    /// Waiters registered for `channel` (tests).
    #[cfg(test)]
    fn waiters(&self, channel: &str) -> usize {
        self.inner.entries().get(channel).map_or(0, |e| e.waiters)
    }
}

/// One waiter's registration; dropping it unregisters (and unsubscribes
/// when it was the last waiter of a resource).
pub(crate) struct Interest {
    inner: Arc<Inner>,
    channels: Vec<String>,
    notifies: Vec<Arc<Notify>>,
}

impl Interest {
    /// Sleeps until `deadline` or until a release of one of the resources
    /// is heard; true when woken by a release.
    pub(crate) async fn wait_until(&self, deadline: Instant) -> bool {
        // A waiter that outlived the runtime of the feeds brings them back.
        Inner::start_feeds(&self.inner);
        let woken = future::select_all(self.notifies.iter().map(|n| n.notified().boxed()));
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => false,
            _ = woken => true,
        }
    }
}

impl Drop for Interest {
    fn drop(&mut self) {
        self.inner.leave(&self.channels);
    }
}

type Connection = (PubSubSink, PubSubStream);

/// One node's feed: keeps its connection's subscriptions in line with the
/// wanted set and turns messages into wake-ups. Ends when the registry is
/// dropped. `resumed`: it replaces a feed that ended, whose subscriptions
/// are gone.
async fn run_feed(
    index: usize,
    client: Client,
    timeout: Duration,
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
                Some((_, stream)) => tokio::select! {
                    message = stream.next() => match message {
                        Some(message) => {
                            let Some(inner) = inner.upgrade() else { return };
                            inner.announce(message.get_channel_name(), message.get_payload_bytes());
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
            conn = connect(index, &client, timeout).await;
            if conn.is_none() {
                backoff.failed();
                continue;
            }
        }
        let delta = Delta::between(&wanted, &subscribed);
        let Some((sink, _)) = conn.as_mut() else {
            continue;
        };
        if reconcile(index, sink, &delta, timeout).await {
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
async fn reconcile(index: usize, sink: &mut PubSubSink, delta: &Delta, timeout: Duration) -> bool {
    if delta.is_empty() {
        return true;
    }
    if !delta.subscribe.is_empty() {
        match tokio::time::timeout(timeout, sink.subscribe(&delta.subscribe)).await {
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
        let done = tokio::time::timeout(timeout, sink.unsubscribe(&delta.unsubscribe)).await;
        if !matches!(done, Ok(Ok(()))) {
            tracing::debug!(node = index, "release notifications: UNSUBSCRIBE failed");
            return false;
        }
    }
    true
}

async fn connect(index: usize, client: &Client, timeout: Duration) -> Option<Connection> {
    match tokio::time::timeout(timeout, client.get_async_pubsub()).await {
        Ok(Ok(pubsub)) => Some(pubsub.split()),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Handoff {
        // Port 1 refuses at once: the feeds never connect.
        let clients = vec![Client::open("redis://127.0.0.1:1/").unwrap()];
        Handoff::new(clients, Duration::from_millis(50))
    }

    #[test]
    fn channel_names_follow_the_prefix_and_resource() {
        assert_eq!(channel("rq:", "jobs"), "rq:released:jobs");
        assert_eq!(channel_of_key("rq:", "rq:lock:jobs"), "rq:released:jobs");
        assert_eq!(
            channel_of_key("rq:", "rq:lock:a:lock:b"),
            "rq:released:a:lock:b"
        );
        assert_eq!(channel_of_key("rq:", "other:lock:jobs"), "");
    }

    #[test]
    fn a_release_announced_by_every_node_counts_once() {
        let mut entry = Entry::new();
        assert!(entry.first_announcement(b"v1"));
        assert!(!entry.first_announcement(b"v1"));
        assert!(entry.first_announcement(b"v2"));
        for i in 0..RECENT {
            assert!(entry.first_announcement(format!("x{i}").as_bytes()));
        }
        assert_eq!(entry.recent.len(), RECENT);
        // Forgotten after RECENT newer releases.
        assert!(entry.first_announcement(b"v1"));
    }

    #[tokio::test]
    async fn waiters_are_counted_and_the_last_one_to_leave_removes_the_entry() {
        let handoff = registry();
        let a = handoff.interest(vec!["c".to_owned()]);
        let b = handoff.interest(vec!["c".to_owned(), "d".to_owned()]);
        assert_eq!(handoff.waiters("c"), 2);
        assert_eq!(handoff.waiters("d"), 1);
        drop(a);
        assert_eq!(handoff.waiters("c"), 1);
        drop(b);
        assert_eq!(handoff.waiters("c"), 0);
        assert!(handoff.inner.entries().is_empty());
    }

    #[tokio::test]
    async fn an_announcement_wakes_exactly_one_waiter_per_release() {
        let handoff = registry();
        let first = handoff.interest(vec!["c".to_owned()]);
        let second = handoff.interest(vec!["c".to_owned()]);
        let far = Instant::now() + Duration::from_secs(30);
        let (mut w1, mut w2) = (
            Box::pin(first.wait_until(far)),
            Box::pin(second.wait_until(far)),
        );
        // Register both waiters (in this order) before the announcement.
        assert!(futures::poll!(&mut w1).is_pending());
        assert!(futures::poll!(&mut w2).is_pending());
        for _node in 0..5 {
            handoff.inner.announce("c", b"value-1");
        }
        assert!(matches!(
            futures::poll!(&mut w1),
            std::task::Poll::Ready(true)
        ));
        assert!(futures::poll!(&mut w2).is_pending());
        handoff.inner.announce("c", b"value-2");
        assert!(matches!(
            futures::poll!(&mut w2),
            std::task::Poll::Ready(true)
        ));
    }

    #[tokio::test]
    async fn an_announcement_for_a_resource_nobody_awaits_is_ignored() {
        let handoff = registry();
        handoff.inner.announce("nobody", b"v");
        assert!(handoff.inner.entries().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn without_an_announcement_the_wait_ends_at_the_deadline() {
        let handoff = registry();
        let interest = handoff.interest(vec!["c".to_owned()]);
        let start = Instant::now();
        let woken = interest
            .wait_until(start + Duration::from_millis(200))
            .await;
        assert!(!woken);
        assert!(start.elapsed() >= Duration::from_millis(200));
    }

    #[tokio::test]
    async fn the_first_subscription_wakes_one_waiter_once() {
        let handoff = registry();
        let interest = handoff.interest(vec!["c".to_owned()]);
        handoff.inner.subscribed("c");
        handoff.inner.subscribed("c");
        let soon = Instant::now() + Duration::from_secs(30);
        assert!(interest.wait_until(soon).await);
        let mut again = Box::pin(interest.wait_until(soon));
        assert!(futures::poll!(&mut again).is_pending());
    }

    #[tokio::test]
    async fn dropping_the_registry_stops_its_feeds() {
        let handoff = registry();
        drop(handoff.interest(vec!["c".to_owned()]));
        let task = handoff.inner.feeds.lock().unwrap()[0].task.clone().unwrap();
        drop(handoff);
        tokio::task::yield_now().await;
        assert!(task.is_finished());
    }

    fn set(channels: &[&str]) -> HashSet<String> {
        channels.iter().map(|c| (*c).to_owned()).collect()
    }

    #[test]
    fn a_reconciliation_subscribes_to_what_is_missing_and_drops_what_is_no_longer_wanted() {
        let delta = Delta::between(&set(&["a", "b", "c"]), &set(&["b", "d"]));
        assert_eq!(delta.subscribe, ["a", "c"]);
        assert_eq!(delta.unsubscribe, ["d"]);
        assert!(Delta::between(&set(&["a"]), &set(&["a"])).is_empty());
        // A fresh connection subscribes to the whole wanted set.
        let fresh = Delta::between(&set(&["a", "b"]), &HashSet::new());
        assert_eq!(fresh.subscribe, ["a", "b"]);
    }

    #[test]
    fn a_reconciliation_is_bounded_by_the_sets_not_by_the_changes_that_led_there() {
        let subscribed = set(&["keep", "old"]);
        let mut wanted = set(&["keep"]);
        for i in 0..10_000 {
            wanted.insert(format!("gone-{i}"));
            wanted.remove(&format!("gone-{i}"));
        }
        let delta = Delta::between(&wanted, &subscribed);
        assert!(delta.subscribe.is_empty());
        assert_eq!(delta.unsubscribe, ["old"]);
    }

    #[test]
    fn reconnection_pauses_double_from_50_ms_up_to_5_s_with_jitter_in_the_upper_half() {
        assert_eq!(Backoff::pause(0, 0.7), Duration::ZERO);
        assert_eq!(Backoff::pause(1, 0.0), Duration::from_millis(25));
        assert_eq!(Backoff::pause(1, 1.0), Duration::from_millis(50));
        assert_eq!(Backoff::pause(2, 1.0), Duration::from_millis(100));
        assert_eq!(Backoff::pause(3, 0.5), Duration::from_millis(150));
        assert_eq!(Backoff::pause(8, 1.0), LAST_RETRY);
        assert_eq!(Backoff::pause(u32::MAX, 1.0), LAST_RETRY);
        assert!(Backoff::pause(u32::MAX, 0.0) >= LAST_RETRY / 2);
        let mut backoff = Backoff::default();
        backoff.failed();
        backoff.failed();
        assert_eq!(backoff.failures, 2);
        assert!(backoff.retry_at.is_some());
        backoff.succeeded();
        assert!(backoff.retry_at.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_connection_that_lasted_resets_the_reconnection_pauses() {
        let mut backoff = Backoff::default();
        backoff.failed();
        backoff.failed();
        // Up, then lost at once: the pauses keep growing.
        backoff.succeeded();
        tokio::time::advance(Duration::from_millis(100)).await;
        backoff.failed();
        assert_eq!(backoff.failures, 3);
        // Up for long enough: the next loss starts again from the first pause.
        backoff.succeeded();
        tokio::time::advance(LAST_RETRY).await;
        backoff.succeeded();
        backoff.failed();
        assert_eq!(backoff.failures, 1);
        let pause = backoff.retry_at.unwrap() - Instant::now();
        assert!(pause <= FIRST_RETRY, "{pause:?}");
    }

    #[tokio::test]
    async fn every_resubscription_after_a_lost_connection_wakes_one_waiter() {
        let handoff = registry();
        let interest = handoff.interest(vec!["c".to_owned()]);
        handoff.inner.subscribed("c");
        let soon = Instant::now() + Duration::from_secs(30);
        assert!(interest.wait_until(soon).await);
        for _reconnection in 0..2 {
            handoff.inner.resubscribed("c");
            assert!(interest.wait_until(soon).await);
        }
        let mut again = Box::pin(interest.wait_until(soon));
        assert!(futures::poll!(&mut again).is_pending());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn thousands_of_changes_with_an_unreachable_node_cost_a_few_connection_attempts() {
        let handoff = registry();
        let _keep = handoff.interest(vec!["keep".to_owned()]);
        for i in 0..2_000 {
            drop(handoff.interest(vec![format!("gone-{i}")]));
            if i % 10 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let connects = handoff
            .inner
            .connects
            .load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            (1..=20).contains(&connects),
            "{connects} connection attempts for 4000 changes"
        );
    }

    fn feed_task(handoff: &Handoff) -> AbortHandle {
        handoff.inner.feeds()[0].task.clone().unwrap()
    }

    #[test]
    fn a_feed_that_ended_with_its_runtime_is_started_again_by_the_next_waiter() {
        let handoff = registry();
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
        };
        let first = runtime().block_on(async {
            drop(handoff.interest(vec!["c".to_owned()]));
            feed_task(&handoff)
        });
        assert!(first.is_finished(), "the feed outlived its runtime");
        runtime().block_on(async {
            let interest = handoff.interest(vec!["c".to_owned()]);
            let second = feed_task(&handoff);
            assert!(!second.is_finished(), "no feed on the second runtime");
            // A waiter that outlives the feed's task brings it back too.
            second.abort();
            tokio::task::yield_now().await;
            assert!(second.is_finished());
            interest
                .wait_until(Instant::now() + Duration::from_millis(1))
                .await;
            assert!(!feed_task(&handoff).is_finished());
        });
    }

    #[test]
    fn outside_a_runtime_no_feed_starts_and_the_next_waiter_inside_one_starts_them() {
        let handoff = registry();
        drop(handoff.interest(vec!["c".to_owned()]));
        assert!(handoff.inner.feeds()[0].task.is_none());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let _interest = handoff.interest(vec!["c".to_owned()]);
            assert!(!feed_task(&handoff).is_finished());
        });
    }

    /// Tests against local redis-server nodes (feature `testkit`).
    #[cfg(feature = "testkit")]
    mod live {
        use super::*;
        use crate::testkit::{LocalCluster, ProxyMode};

        fn query<T: redis::FromRedisValue>(url: &str, cmd: &redis::Cmd) -> T {
            let client = Client::open(url).unwrap();
            let mut con = client
                .get_connection_with_timeout(Duration::from_secs(2))
                .unwrap();
            con.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            cmd.query(&mut con).unwrap()
        }

        /// Subscribers of `channel` on the node at `url`.
        fn subscribers(url: &str, channel: &str) -> i64 {
            let (_, count): (String, i64) =
                query(url, redis::cmd("PUBSUB").arg("NUMSUB").arg(channel));
            count
        }

        /// SUBSCRIBE commands the node at `url` has executed so far.
        fn subscribe_calls(url: &str) -> u64 {
            let info: String = query(url, redis::cmd("INFO").arg("commandstats"));
            info.lines()
                .find_map(|line| line.strip_prefix("cmdstat_subscribe:calls="))
                .and_then(|rest| rest.split(',').next())
                .map_or(0, |calls| calls.parse().unwrap())
        }

        async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
            let give_up = Instant::now() + limit;
            while !cond() {
                if Instant::now() >= give_up {
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            true
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn waiters_coming_and_going_while_a_node_hangs_cost_one_resubscription_not_one_per_change()
         {
            let cluster = LocalCluster::start(1).unwrap();
            let direct = cluster.direct_url(0);
            let clients = vec![Client::open(cluster.url(0)).unwrap()];
            let handoff = Handoff::new(clients, Duration::from_millis(200));
            let _keep = handoff.interest(vec!["keep".to_owned()]);
            let subscribed = eventually(Duration::from_secs(10), || {
                subscribers(&direct, "keep") == 1
            })
            .await;
            assert!(subscribed, "the feed never subscribed");

            cluster.set_proxy(0, ProxyMode::Blackhole);
            let before = subscribe_calls(&direct);
            const CHANGES: usize = 2_000;
            for i in 0..CHANGES {
                drop(handoff.interest(vec![format!("gone-{i}")]));
                if i % 100 == 0 {
                    // Let the feed run meanwhile, as real waiters would.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            // The feed keeps trying while the node hangs.
            tokio::time::sleep(Duration::from_secs(2)).await;
            cluster.set_proxy(0, ProxyMode::Pass);

            // Only "keep" is still wanted: one fresh subscription serves it.
            let back = eventually(Duration::from_secs(20), || {
                subscribe_calls(&direct) > before && subscribers(&direct, "keep") == 1
            })
            .await;
            assert!(
                back,
                "the feed never subscribed again after the node healed"
            );
            // A backlog of changes would be replayed now.
            tokio::time::sleep(Duration::from_secs(1)).await;
            let calls = subscribe_calls(&direct) - before;
            assert!(
                calls <= 5,
                "{calls} SUBSCRIBE commands after {CHANGES} changes while the node hung, \
                 for one channel still wanted"
            );
        }
    }
}
