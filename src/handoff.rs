//! Release notifications: a contended `lock()` wakes up as soon as the lock
//! is released instead of sleeping out its retry delay.
//!
//! Every release that deletes a key publishes the released value on the
//! resource's channel, `{prefix}released:{resource}`, on each node (the
//! RELEASE script does it; `PUBLISH` with no subscriber costs next to
//! nothing). A [`Redlock`](crate::Redlock) keeps one pub/sub connection per
//! node, opened on the first wait, shared by all its waiters and driven by
//! one background task per node. Waiters register an [`Interest`] in their
//! resources: the first waiter of a resource subscribes to its channel on
//! every node, the last one to leave unsubscribes.
//!
//! A message wakes ONE local waiter of the resource (FIFO, through
//! [`Notify::notify_one`]), once per release whatever the number of nodes
//! that announce it: the other waiters keep their place and get the next
//! releases, so a hand-off costs one attempt, not a stampede. Everything
//! here is best effort: a node that cannot be reached, refuses `SUBSCRIBE`
//! or drops a message only means that waiters sleep their retry delay, as
//! they would without notifications. Nothing here ever delays or fails an
//! acquisition.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use futures::StreamExt;
use futures::future::{self, FutureExt};
use redis::Client;
use redis::aio::{PubSubSink, PubSubStream};
use tokio::sync::{Notify, mpsc};
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// How many recent release values each resource remembers, to wake one
/// waiter per release although every node announces it.
const RECENT: usize = 16;

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

/// A subscription change for one node's feed.
#[derive(Debug, PartialEq, Eq)]
enum Command {
    Subscribe(String),
    Unsubscribe(String),
}

/// One node's background feed.
struct Feed {
    commands: mpsc::UnboundedSender<Command>,
    task: Option<AbortHandle>,
}

struct Inner {
    clients: Vec<Client>,
    timeout: Duration,
    /// Waiters per channel.
    entries: Mutex<HashMap<String, Entry>>,
    /// Started on the first wait.
    feeds: Mutex<Vec<Feed>>,
}

impl Inner {
    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // A panic while holding the lock cannot leave the map inconsistent
        // (every update is a single step), so a poisoned lock is used as is.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn send(&self, command: impl Fn() -> Command) {
        let feeds = self
            .feeds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for feed in feeds.iter() {
            // A feed that has stopped just misses the change: harmless.
            let _ = feed.commands.send(command());
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

    /// The channels with waiters, to subscribe again after a reconnection.
    fn wanted(&self) -> Vec<String> {
        self.entries().keys().cloned().collect()
    }

    fn leave(&self, channels: &[String]) {
        let mut gone = Vec::new();
        {
            let mut entries = self.entries();
            for channel in channels {
                if let Some(entry) = entries.get_mut(channel) {
                    entry.waiters = entry.waiters.saturating_sub(1);
                    if entry.waiters == 0 {
                        entries.remove(channel);
                        gone.push(channel.clone());
                    }
                }
            }
        }
        for channel in gone {
            self.send(|| Command::Unsubscribe(channel.clone()));
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
            }),
        }
    }

    /// Registers a waiter for `channels` (one per resource), subscribing to
    /// each channel on every node if it is the first waiter. Must run
    /// inside a tokio runtime (the feeds are spawned on it).
    pub(crate) fn interest(&self, channels: Vec<String>) -> Interest {
        self.start_feeds();
        let mut notifies = Vec::with_capacity(channels.len());
        let mut new = Vec::new();
        {
            let mut entries = self.inner.entries();
            for channel in &channels {
                let entry = entries.entry(channel.clone()).or_insert_with(Entry::new);
                entry.waiters += 1;
                if entry.waiters == 1 {
                    new.push(channel.clone());
                }
                notifies.push(Arc::clone(&entry.notify));
            }
        }
        for channel in new {
            self.inner.send(|| Command::Subscribe(channel.clone()));
        }
        Interest {
            inner: Arc::clone(&self.inner),
            channels,
            notifies,
        }
    }

    fn start_feeds(&self) {
        let mut feeds = self
            .inner
            .feeds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !feeds.is_empty() {
            return;
        }
        let runtime = tokio::runtime::Handle::try_current().ok();
        for (index, client) in self.inner.clients.iter().enumerate() {
            let (commands, receiver) = mpsc::unbounded_channel();
            let task = runtime.as_ref().map(|runtime| {
                runtime
                    .spawn(run_feed(
                        index,
                        client.clone(),
                        self.inner.timeout,
                        Arc::downgrade(&self.inner),
                        receiver,
                    ))
                    .abort_handle()
            });
            feeds.push(Feed { commands, task });
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

/// One node's feed: applies subscription changes in order and turns
/// messages into wake-ups. Ends when the registry is dropped.
async fn run_feed(
    index: usize,
    client: Client,
    timeout: Duration,
    inner: Weak<Inner>,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    let mut conn: Option<Connection> = None;
    loop {
        let command = match conn.as_mut() {
            Some((_, stream)) => tokio::select! {
                message = stream.next() => {
                    match message {
                        Some(message) => {
                            let Some(inner) = inner.upgrade() else { return };
                            inner.announce(message.get_channel_name(), message.get_payload_bytes());
                        }
                        None => {
                            tracing::debug!(node = index, "release notifications: connection lost");
                            conn = None;
                        }
                    }
                    continue;
                }
                command = commands.recv() => command,
            },
            None => commands.recv().await,
        };
        let Some(command) = command else { return };
        match command {
            Command::Subscribe(channel) => {
                let Some(registry) = inner.upgrade() else {
                    return;
                };
                if conn.is_none() {
                    // A fresh connection subscribes to everything wanted.
                    conn = connect(index, &client, timeout).await;
                    if let Some((sink, _)) = conn.as_mut() {
                        let wanted = registry.wanted();
                        if !wanted.is_empty() && !subscribe(index, sink, &wanted, timeout).await {
                            conn = None;
                            continue;
                        }
                        for channel in &wanted {
                            registry.subscribed(channel);
                        }
                    }
                } else if let Some((sink, _)) = conn.as_mut() {
                    if subscribe(index, sink, std::slice::from_ref(&channel), timeout).await {
                        registry.subscribed(&channel);
                    } else {
                        conn = None;
                    }
                }
            }
            Command::Unsubscribe(channel) => {
                if let Some((sink, _)) = conn.as_mut() {
                    let done = tokio::time::timeout(timeout, sink.unsubscribe(&channel)).await;
                    if !matches!(done, Ok(Ok(()))) {
                        // Closing the connection drops its subscriptions.
                        conn = None;
                    }
                }
            }
        }
    }
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

async fn subscribe(
    index: usize,
    sink: &mut PubSubSink,
    channels: &[String],
    timeout: Duration,
) -> bool {
    match tokio::time::timeout(timeout, sink.subscribe(channels)).await {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            tracing::debug!(node = index, error = %e, "release notifications: SUBSCRIBE failed");
            false
        }
        Err(_) => {
            tracing::debug!(node = index, "release notifications: SUBSCRIBE timed out");
            false
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
