//! Release notifications: a contended `lock()` wakes up as soon as the lock
//! is released instead of sleeping out its retry delay.
//!
//! A release that deletes a key publishes the released value on the
//! resource's channel, `{prefix}released:{resource}`, on each node where a
//! waiter marked the lock: the clean-up of a `lock()` attempt that lost
//! appends `+` to the holder's value (every script reads both as the same
//! holder). The RELEASE script publishes only a marked value, so a release
//! nobody waits for costs no `PUBLISH` and no extra call: a marker key
//! checked on every release, or the channel passed along, measured as a
//! quarter of the release's server work. A [`Redlock`](crate::Redlock) keeps one pub/sub connection per
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
//! A release wakes ONE local waiter of the resource (FIFO, through
//! [`Notify::notify_one`]) at its first node's announcement, with a
//! hand-off: per node, a gate that opens once that node has announced the
//! release (every gate once a quorum of nodes has, and at the latest half
//! a node timeout after the first announcement; the waiter's attempt waits
//! no longer than the pause it interrupted would have lasted). The waiter's next
//! attempt sends its `SET` to each node as its gate opens, so a hot lock
//! changes hands in about one round after the release reaches the nodes,
//! not two: the `SET`s overlap the release's own round, and none lands on
//! a node that still holds the old lock (such an attempt could fail, and
//! leave the waiter asleep). The other waiters keep their place and get
//! the next releases, so a hand-off costs one attempt, not a stampede.
//! A release by this `Redlock` itself does not wait for the nodes: once its
//! deletes are handed to the nodes' connections, one waiter here is woken
//! as if every node had announced it ([`Notifications::released_here`]),
//! and its `SET`s follow the deletes on the same connections; at most
//! `registry::IN_A_ROW` hand-offs in a row, so that waiters of other
//! processes, who hear only the nodes, get their turn.
//! Where no node can deliver messages (they refuse `SUBSCRIBE`), waiters
//! of other processes wake on their retry delay. Everything
//! here is best effort: a node that cannot be reached, refuses `SUBSCRIBE`
//! or drops a message only means that waiters sleep their retry delay, as
//! they would without notifications. Nothing here ever delays or fails an
//! acquisition.

mod feed;
mod registry;
mod source;

pub(crate) use source::Source;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::{self, FutureExt};
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::gates::Gates;
use registry::{Entry, Feed, Inner};

/// Starts every feed that is not running on the current runtime: all of
/// them the first time, and again any whose task has ended, e.g. with
/// the runtime it was spawned on (a `Redlock` shared across runtimes).
/// Without a runtime, nothing starts until a later call has one.
fn start_feeds(this: &Arc<Inner>) {
    let mut feeds = this.feeds();
    if feeds.is_empty() {
        feeds.extend(this.sources.iter().map(|_| Feed {
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
    for (index, (feed, source)) in feeds.iter_mut().zip(&this.sources).enumerate() {
        if !dead(feed) {
            continue;
        }
        let resumed = feed.task.is_some();
        let span = crate::spans::feed(&source.addr());
        if resumed {
            let _inside = span.enter();
            tracing::debug!("release notifications: feed ended, starting it again");
        }
        let run = feed::run_feed(
            index,
            source.clone(),
            this.timeout,
            this.connect_timeout,
            Arc::downgrade(this),
            Arc::clone(&feed.changed),
            resumed,
        );
        let task = runtime.spawn(tracing::Instrument::instrument(run, span));
        feed.task = Some(task.abort_handle());
    }
}

/// What wakes a waiter: the gates its next attempt's call to each node
/// waits for, and how many releases in a row this
/// [`Redlock`](crate::Redlock) handed on before this one (0: the nodes
/// announced it).
#[derive(Default)]
pub(crate) struct HandOff {
    pub(crate) gates: Gates,
    pub(crate) in_a_row: u8,
}

/// The release-notification registry of one [`Redlock`](crate::Redlock).
pub(crate) struct Notifications {
    inner: Arc<Inner>,
}

impl Notifications {
    /// A registry over the nodes of `sources`; no I/O until the first wait.
    /// `quorum`: how many nodes must announce a release before a waiter is
    /// woken (the lock is then free on a quorum, so its attempt can succeed).
    /// `timeout` bounds each call, `connect_timeout` opening a connection.
    pub(crate) fn new(
        sources: impl IntoIterator<Item = impl Into<Source>>,
        timeout: Duration,
        connect_timeout: Duration,
        quorum: usize,
    ) -> Self {
        Notifications {
            inner: Arc::new(Inner {
                sources: sources.into_iter().map(Into::into).collect(),
                timeout,
                connect_timeout,
                quorum,
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
        start_feeds(&self.inner);
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

    /// Feeds whose task is running (feature `sim`).
    #[cfg(feature = "sim")]
    pub(crate) fn running_feeds(&self) -> usize {
        let running = |f: &&Feed| f.task.as_ref().is_some_and(|t| !t.is_finished());
        self.inner.feeds().iter().filter(running).count()
    }

    /// This `Redlock` released `value` on the channels of `resources`, its
    /// deletes handed to the nodes' connections (or waiting where the
    /// waiter's `SET`s will follow them), the `in_a_row`-th
    /// hand-off in a row within it (0: its lock was not handed on): one
    /// waiter here of each resource is woken at once, its `SET`s following
    /// the deletes on the same connections, up to `registry::IN_A_ROW` in
    /// a row.
    pub(crate) fn released_here(
        &self,
        channels: impl Iterator<Item = String>,
        value: &str,
        in_a_row: u8,
    ) {
        // Nobody waits here (the usual release): no channel name is built.
        if in_a_row >= registry::IN_A_ROW || self.inner.entries().is_empty() {
            return;
        }
        for channel in channels {
            self.inner
                .released_here(&channel, value.as_bytes(), in_a_row);
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
    /// Sleeps until `deadline` (`None`) or until a release of one of the
    /// resources is heard: then `Some` of the hand-off, with the gates the
    /// next attempt's call to each node waits for (open once that node
    /// has announced the release; the rounds' `Chain::after_heard`). A
    /// waiter of several resources, or one woken by a (re)subscription,
    /// gets gates that wait for nothing.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a wake-up is taken only when this returns it.
    pub(crate) async fn wait_until(&self, deadline: Instant) -> Option<HandOff> {
        // A waiter that outlived the runtime of the feeds brings them back.
        start_feeds(&self.inner);
        let woken = future::select_all(self.notifies.iter().map(|n| n.notified().boxed()));
        // Biased: a release heard at the very instant the pause ends wakes
        // the waiter, whatever the runtime's draw (a replay sees the same).
        tokio::select! {
            biased;
            _ = woken => {
                let offer = match &*self.channels {
                    [channel] => self.inner.take_offer(channel),
                    _ => None,
                };
                Some(offer.unwrap_or_default())
            }
            () = tokio::time::sleep_until(deadline) => None,
        }
    }
}

impl Drop for Interest {
    fn drop(&mut self) {
        self.inner.leave(&self.channels);
    }
}

#[cfg(test)]
mod tests {
    use redis::Client;

    use super::feed::*;
    use super::registry::*;
    use super::*;
    use std::collections::HashSet;

    fn registry() -> Notifications {
        // Port 1 refuses at once: the feeds never connect.
        let clients = vec![Client::open("redis://127.0.0.1:1/").unwrap()];
        Notifications::new(
            clients,
            Duration::from_millis(50),
            Duration::from_secs(1),
            1,
        )
    }

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    #[tokio::test]
    async fn a_release_here_wakes_one_waiter_with_every_gate_open_up_to_a_streak() {
        let notifications = registry();
        let interest = notifications.interest(vec!["c".to_owned()]);
        let soon = || Instant::now() + Duration::from_millis(50);
        let here = |value: &str, in_a_row| {
            notifications.released_here(std::iter::once("c".to_owned()), value, in_a_row);
        };
        for in_a_row in 0..registry::IN_A_ROW {
            here(&format!("v{in_a_row}"), in_a_row);
            let woken = interest.wait_until(soon()).await.expect("woken at once");
            assert!(woken.gates.is_open(0));
            assert_eq!(woken.in_a_row, in_a_row + 1);
            // The node's own announcement of it wakes nobody else.
            notifications
                .inner
                .announce(0, "c", format!("v{in_a_row}").as_bytes());
            assert!(interest.wait_until(soon()).await.is_none());
        }
        here("v-last", registry::IN_A_ROW);
        assert!(
            interest.wait_until(soon()).await.is_none(),
            "one too many in a row"
        );
        // The nodes' announcement of that release wakes the waiter, anew.
        notifications.inner.announce(0, "c", b"v-last");
        let woken = interest
            .wait_until(soon())
            .await
            .expect("woken by the node");
        assert_eq!(woken.in_a_row, 0);
    }

    #[tokio::test]
    async fn a_release_announced_by_every_node_counts_once() {
        let mut entry = Entry::new();
        assert!(entry.announcement(0, b"v1", (5, 3), later()));
        for node in 0..5 {
            assert!(!entry.announcement(node, b"v1", (5, 3), later()));
        }
        assert!(entry.announcement(0, b"v2", (5, 3), later()));
        for i in 0..RECENT {
            assert!(entry.announcement(1, format!("x{i}").as_bytes(), (5, 3), later()));
        }
        assert_eq!(entry.recent.len(), RECENT);
        assert_eq!(entry.offered.len(), RECENT);
        // Forgotten after RECENT newer releases.
        assert!(entry.announcement(0, b"v1", (5, 3), later()));
    }

    #[tokio::test]
    async fn a_hand_off_opens_each_nodes_gate_when_that_node_announces_and_all_at_a_quorum() {
        let mut entry = Entry::new();
        assert!(entry.announcement(2, b"v", (5, 3), later()));
        let gates = entry.take_offer().unwrap().gates;
        let open = |gates: &Gates| (0..5).map(|n| gates.is_open(n)).collect::<Vec<_>>();
        assert_eq!(open(&gates), [false, false, true, false, false]);
        assert!(!entry.announcement(0, b"v", (5, 3), later()));
        assert_eq!(open(&gates), [true, false, true, false, false]);
        // A node heard twice is still one node.
        assert!(!entry.announcement(0, b"v", (5, 3), later()));
        assert_eq!(open(&gates), [true, false, true, false, false]);
        // The third node: the lock is free on a quorum, every gate opens.
        assert!(!entry.announcement(4, b"v", (5, 3), later()));
        assert_eq!(open(&gates), [true; 5]);
        assert!(entry.take_offer().is_none(), "one hand-off per release");
    }

    #[tokio::test(start_paused = true)]
    async fn a_node_never_heard_from_gets_the_set_at_the_hand_offs_bound() {
        let mut entry = Entry::new();
        let until = Instant::now() + Duration::from_millis(50);
        assert!(entry.announcement(1, b"v", (5, 3), until));
        let gates = entry.take_offer().unwrap().gates;
        gates.opened(3).await;
        assert_eq!(Instant::now(), until);
        assert!(!gates.is_open(3) && gates.expired());
        // An offer past its bound waits for nothing: none is handed out.
        assert!(entry.announcement(1, b"w", (5, 3), until));
        assert!(entry.take_offer().is_none());
    }

    #[tokio::test]
    async fn waiters_are_counted_and_the_last_one_to_leave_removes_the_entry() {
        let notifications = registry();
        let a = notifications.interest(vec!["c".to_owned()]);
        let b = notifications.interest(vec!["c".to_owned(), "d".to_owned()]);
        assert_eq!(notifications.waiters("c"), 2);
        assert_eq!(notifications.waiters("d"), 1);
        drop(a);
        assert_eq!(notifications.waiters("c"), 1);
        drop(b);
        assert_eq!(notifications.waiters("c"), 0);
        assert!(notifications.inner.entries().is_empty());
    }

    #[tokio::test]
    async fn an_announcement_wakes_exactly_one_waiter_per_release() {
        let notifications = registry();
        let first = notifications.interest(vec!["c".to_owned()]);
        let second = notifications.interest(vec!["c".to_owned()]);
        let far = Instant::now() + Duration::from_secs(30);
        let (mut w1, mut w2) = (
            Box::pin(first.wait_until(far)),
            Box::pin(second.wait_until(far)),
        );
        // Register both waiters (in this order) before the announcement.
        assert!(futures_util::poll!(&mut w1).is_pending());
        assert!(futures_util::poll!(&mut w2).is_pending());
        for node in 0..5 {
            notifications.inner.announce(node, "c", b"value-1");
        }
        assert!(matches!(
            futures_util::poll!(&mut w1),
            std::task::Poll::Ready(Some(_))
        ));
        assert!(futures_util::poll!(&mut w2).is_pending());
        notifications.inner.announce(0, "c", b"value-2");
        assert!(matches!(
            futures_util::poll!(&mut w2),
            std::task::Poll::Ready(Some(_))
        ));
    }

    #[tokio::test]
    async fn a_release_wakes_a_waiter_at_its_first_announcement_with_that_nodes_gate_open() {
        // Five nodes, quorum three: the waiter's SET goes to each node once
        // that node has deleted the lock, not to all at once.
        let clients: Vec<Client> = (1..=5)
            .map(|port| Client::open(format!("redis://127.0.0.1:{port}/")).unwrap())
            .collect();
        let notifications = Notifications::new(
            clients,
            Duration::from_millis(50),
            Duration::from_secs(1),
            3,
        );
        let interest = notifications.interest(vec!["c".to_owned()]);
        let mut waiting = Box::pin(interest.wait_until(later()));
        assert!(futures_util::poll!(&mut waiting).is_pending());
        notifications.inner.announce(3, "c", b"value-1");
        let std::task::Poll::Ready(Some(HandOff { gates, .. })) = futures_util::poll!(&mut waiting)
        else {
            panic!("not woken by the first announcement");
        };
        assert!(gates.is_open(3));
        assert!(!gates.is_open(0) && !gates.is_open(4));
        notifications.inner.announce(0, "c", b"value-1");
        assert!(gates.is_open(0) && !gates.is_open(4));
    }

    #[tokio::test]
    async fn a_waiter_of_several_resources_gets_a_hand_off_that_waits_for_nothing() {
        let notifications = registry();
        let interest = notifications.interest(vec!["c".to_owned(), "d".to_owned()]);
        notifications.inner.announce(0, "d", b"v");
        let gates = interest.wait_until(later()).await.unwrap().gates;
        assert!(gates.is_open(0) && gates.is_open(1));
    }

    #[tokio::test]
    async fn an_announcement_for_a_resource_nobody_awaits_is_ignored() {
        let notifications = registry();
        notifications.inner.announce(0, "nobody", b"v");
        assert!(notifications.inner.entries().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn without_an_announcement_the_wait_ends_at_the_deadline() {
        let notifications = registry();
        let interest = notifications.interest(vec!["c".to_owned()]);
        let start = Instant::now();
        let woken = interest
            .wait_until(start + Duration::from_millis(200))
            .await;
        assert!(woken.is_none());
        assert!(start.elapsed() >= Duration::from_millis(200));
    }

    #[tokio::test]
    async fn the_first_subscription_wakes_one_waiter_once() {
        let notifications = registry();
        let interest = notifications.interest(vec!["c".to_owned()]);
        notifications.inner.subscribed("c");
        notifications.inner.subscribed("c");
        let soon = Instant::now() + Duration::from_secs(30);
        assert!(interest.wait_until(soon).await.is_some());
        let mut again = Box::pin(interest.wait_until(soon));
        assert!(futures_util::poll!(&mut again).is_pending());
    }

    #[tokio::test]
    async fn dropping_the_registry_stops_its_feeds() {
        let notifications = registry();
        drop(notifications.interest(vec!["c".to_owned()]));
        let task = notifications.inner.feeds.lock().unwrap()[0]
            .task
            .clone()
            .unwrap();
        drop(notifications);
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
        let notifications = registry();
        let interest = notifications.interest(vec!["c".to_owned()]);
        notifications.inner.subscribed("c");
        let soon = Instant::now() + Duration::from_secs(30);
        assert!(interest.wait_until(soon).await.is_some());
        for _reconnection in 0..2 {
            notifications.inner.resubscribed("c");
            assert!(interest.wait_until(soon).await.is_some());
        }
        let mut again = Box::pin(interest.wait_until(soon));
        assert!(futures_util::poll!(&mut again).is_pending());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn thousands_of_changes_with_an_unreachable_node_cost_a_few_connection_attempts() {
        let notifications = registry();
        let _keep = notifications.interest(vec!["keep".to_owned()]);
        for i in 0..2_000 {
            drop(notifications.interest(vec![format!("gone-{i}")]));
            if i % 10 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let connects = notifications
            .inner
            .connects
            .load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            (1..=20).contains(&connects),
            "{connects} connection attempts for 4000 changes"
        );
    }

    fn feed_task(notifications: &Notifications) -> AbortHandle {
        notifications.inner.feeds()[0].task.clone().unwrap()
    }

    #[test]
    fn a_feed_that_ended_with_its_runtime_is_started_again_by_the_next_waiter() {
        let notifications = registry();
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
        };
        let first = runtime().block_on(async {
            drop(notifications.interest(vec!["c".to_owned()]));
            feed_task(&notifications)
        });
        assert!(first.is_finished(), "the feed outlived its runtime");
        runtime().block_on(async {
            let interest = notifications.interest(vec!["c".to_owned()]);
            let second = feed_task(&notifications);
            assert!(!second.is_finished(), "no feed on the second runtime");
            // A waiter that outlives the feed's task brings it back too.
            second.abort();
            tokio::task::yield_now().await;
            assert!(second.is_finished());
            interest
                .wait_until(Instant::now() + Duration::from_millis(1))
                .await;
            assert!(!feed_task(&notifications).is_finished());
        });
    }

    #[test]
    fn outside_a_runtime_no_feed_starts_and_the_next_waiter_inside_one_starts_them() {
        let notifications = registry();
        drop(notifications.interest(vec!["c".to_owned()]));
        assert!(notifications.inner.feeds()[0].task.is_none());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let _interest = notifications.interest(vec!["c".to_owned()]);
            assert!(!feed_task(&notifications).is_finished());
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
            let notifications = Notifications::new(
                clients,
                Duration::from_millis(200),
                Duration::from_secs(1),
                1,
            );
            let _keep = notifications.interest(vec!["keep".to_owned()]);
            let subscribed = eventually(Duration::from_secs(10), || {
                subscribers(&direct, "keep") == 1
            })
            .await;
            assert!(subscribed, "the feed never subscribed");

            cluster.set_proxy(0, ProxyMode::Blackhole);
            let before = subscribe_calls(&direct);
            const CHANGES: usize = 2_000;
            for i in 0..CHANGES {
                drop(notifications.interest(vec![format!("gone-{i}")]));
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
