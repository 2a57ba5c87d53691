//! Simulated pub/sub: each client's subscriber connections to a node, the
//! channels each holds, and the messages a node's `PUBLISH` sends down
//! them after the link's delays and faults. A connection breaks when its
//! node dies, restarts or fails over (another process: the `run_id`
//! changes) or its link resets; a blackholed link or one that drops
//! replies loses the messages and keeps the connection, like a TCP
//! connection nobody closed.

use std::collections::BTreeSet;
use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::{Msg, RedisFuture, RedisResult, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::net::{Endpoint, broken, io_error};
use super::world::{self, Delivery, Fate, Shared};
use crate::node::link::SimSubscriber;

/// A message on its way to a subscriber.
#[derive(Debug)]
pub(crate) struct Push {
    at: Instant,
    channel: Vec<u8>,
    payload: Vec<u8>,
}

/// One open subscriber connection, as the world sees it.
struct Subscriber {
    id: u64,
    client: usize,
    node: usize,
    /// The process it connected to.
    run_id: String,
    channels: BTreeSet<Vec<u8>>,
    pushes: mpsc::UnboundedSender<Push>,
    /// When the last message sent down it arrives (FIFO).
    last: Instant,
}

/// Every open subscriber connection of a run.
#[derive(Default)]
pub(crate) struct Subscribers {
    next_id: u64,
    open: Vec<Subscriber>,
}

impl Subscribers {
    /// Opens a connection from `client` to `node`, whose process is
    /// `run_id`.
    pub(crate) fn open(
        &mut self,
        client: usize,
        node: usize,
        run_id: &str,
    ) -> (u64, mpsc::UnboundedReceiver<Push>) {
        let (pushes, received) = mpsc::unbounded_channel();
        self.next_id += 1;
        self.open.push(Subscriber {
            id: self.next_id,
            client,
            node,
            run_id: run_id.to_owned(),
            channels: BTreeSet::new(),
            pushes,
            last: Instant::now(),
        });
        (self.next_id, received)
    }

    /// The client closed connection `id`.
    pub(crate) fn close(&mut self, id: u64) {
        self.open.retain(|s| s.id != id);
    }

    /// Every connection to `node` breaks.
    pub(crate) fn break_node(&mut self, node: usize) {
        self.open.retain(|s| s.node != node);
    }

    /// Every connection from `client` to `node` breaks.
    pub(crate) fn break_link(&mut self, client: usize, node: usize) {
        self.open.retain(|s| (s.client, s.node) != (client, node));
    }

    /// Connection `id`'s channels, while it is open to process `run_id`
    /// (a connection to an earlier process broke with it).
    pub(crate) fn channels(&mut self, id: u64, run_id: &str) -> Option<&mut BTreeSet<Vec<u8>>> {
        let at = self.open.iter().position(|s| s.id == id)?;
        if self.open[at].run_id != run_id {
            self.open.remove(at);
            return None;
        }
        Some(&mut self.open[at].channels)
    }

    /// The clients whose connections to `node` (process `run_id`) hold
    /// `channel`, with each connection's id.
    pub(crate) fn listening(&self, node: usize, run_id: &str, channel: &[u8]) -> Vec<(u64, usize)> {
        self.open
            .iter()
            .filter(|s| s.node == node && s.run_id == run_id && s.channels.contains(channel))
            .map(|s| (s.id, s.client))
            .collect()
    }

    /// Sends a message down connection `id`, arriving `after` from now
    /// and after the one sent before it, not before `not_before`.
    pub(crate) fn push(
        &mut self,
        id: u64,
        after: Duration,
        not_before: Option<Instant>,
        (channel, payload): (&[u8], &[u8]),
    ) {
        let Some(subscriber) = self.open.iter_mut().find(|s| s.id == id) else {
            return;
        };
        let mut at = (Instant::now() + after).max(subscriber.last);
        if let Some(until) = not_before {
            at = at.max(until);
        }
        subscriber.last = at;
        let _ = subscriber.pushes.send(Push {
            at,
            channel: channel.to_vec(),
            payload: payload.to_vec(),
        });
    }
}

/// A client's end of one subscriber connection.
pub(crate) struct Subscription {
    world: Shared,
    client: usize,
    node: usize,
    id: u64,
    pushes: mpsc::UnboundedReceiver<Push>,
    /// Received and not yet arrived (kept across cancellations).
    next: Option<Push>,
}

impl Endpoint {
    /// Opens a subscriber connection: refused by a dead node, after the
    /// link's delay otherwise.
    pub(crate) fn open_subscriber(&self) -> RedisFuture<'_, Box<dyn SimSubscriber>> {
        let (world, client, node) = (self.world.clone(), self.client, self.node);
        Box::pin(async move {
            arrive(&world, client, node).await?;
            let opened = world::lock(&world).open_subscriber(client, node);
            let Some((id, pushes)) = opened else {
                return Err(io_error(
                    std::io::ErrorKind::ConnectionRefused,
                    "Connection refused (os error 111)",
                ));
            };
            Ok(Box::new(Subscription {
                world,
                client,
                node,
                id,
                pushes,
                next: None,
            }) as Box<dyn SimSubscriber>)
        })
    }
}

/// Waits for a command sent now from `client` to arrive at `node` (for
/// ever if the link loses it).
async fn arrive(world: &Shared, client: usize, node: usize) -> RedisResult<()> {
    let fate = world::lock(world).send(client, node);
    match fate {
        Fate::Fail(kind, message) => Err(io_error(kind, message)),
        Fate::Lost => std::future::pending().await,
        Fate::Arrives(at) | Fate::Unordered(at) => {
            tokio::time::sleep_until(at).await;
            Ok(())
        }
    }
}

impl Subscription {
    /// `SUBSCRIBE` (`on`) or `UNSUBSCRIBE` `channels`: the node checks
    /// it (ACL), the connection's channels change, the confirmation comes
    /// back over the link.
    async fn command(&mut self, channels: &[String], on: bool) -> RedisResult<()> {
        let word = if on { "SUBSCRIBE" } else { "UNSUBSCRIBE" };
        let args: Vec<Vec<u8>> = std::iter::once(word)
            .chain(channels.iter().map(String::as_str))
            .map(|w| w.as_bytes().to_vec())
            .collect();
        arrive(&self.world, self.client, self.node).await?;
        let reply = loop {
            let delivery = world::lock(&self.world).subscription(self.id, self.node, &args, on);
            match delivery {
                Delivery::Reply(reply) => break reply,
                Delivery::Gone => return Err(broken()),
                Delivery::Wait(resumed) => resumed.notified().await,
            }
        };
        let at = world::lock(&self.world).reply_at(self.client, self.node);
        match at {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
        reply?.extract_error().map(drop)
    }
}

impl SimSubscriber for Subscription {
    fn subscribe<'a>(&'a mut self, channels: &'a [String]) -> RedisFuture<'a, ()> {
        Box::pin(self.command(channels, true))
    }

    fn unsubscribe<'a>(&'a mut self, channels: &'a [String]) -> RedisFuture<'a, ()> {
        Box::pin(self.command(channels, false))
    }

    fn next(&mut self) -> BoxFuture<'_, Option<Msg>> {
        Box::pin(async move {
            if self.next.is_none() {
                self.next = Some(self.pushes.recv().await?);
            }
            let at = self.next.as_ref()?.at;
            tokio::time::sleep_until(at).await;
            let push = self.next.take()?;
            Msg::from_owned_value(Value::Array(vec![
                Value::BulkString(b"message".to_vec()),
                Value::BulkString(push.channel),
                Value::BulkString(push.payload),
            ]))
        })
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        world::lock(&self.world).subscribers.close(self.id);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::node::link::SimEndpoint;
    use crate::testkit::sim::node::Persistence;
    use crate::testkit::sim::world::{LinkMode, World};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
    }

    async fn publish(endpoint: &Endpoint, channel: &str, message: &str) {
        let cmd = redis::cmd("PUBLISH").arg(channel).arg(message).clone();
        endpoint.call(&cmd).await.unwrap();
    }

    async fn next_within(
        subscriber: &mut Box<dyn SimSubscriber>,
        wait: Duration,
    ) -> Option<Option<(String, Vec<u8>)>> {
        let message = tokio::time::timeout(wait, subscriber.next()).await.ok()?;
        Some(message.map(|m| {
            (
                m.get_channel_name().to_owned(),
                m.get_payload_bytes().to_vec(),
            )
        }))
    }

    /// One node, two clients: the first subscribed to channel `a`, the
    /// second's link to publish on.
    async fn listening_on_a() -> (Shared, Arc<Endpoint>, Box<dyn SimSubscriber>) {
        let world: Shared = Arc::new(Mutex::new(World::new(7, 1, 2)));
        let (listener, publisher) = (Endpoint::open(&world, 0, 0), Endpoint::open(&world, 1, 0));
        let mut subscriber = listener.open_subscriber().await.unwrap();
        subscriber.subscribe(&["a".to_owned()]).await.unwrap();
        (world, publisher, subscriber)
    }

    #[test]
    fn a_message_published_on_a_node_reaches_a_subscriber_of_its_channel_only() {
        runtime().block_on(async {
            let (_world, publisher, mut subscriber) = listening_on_a().await;
            publish(&publisher, "b", "other").await;
            publish(&publisher, "a", "free").await;
            let got = next_within(&mut subscriber, Duration::from_secs(1)).await;
            assert_eq!(got, Some(Some(("a".to_owned(), b"free".to_vec()))));
            subscriber.unsubscribe(&["a".to_owned()]).await.unwrap();
            publish(&publisher, "a", "again").await;
            assert_eq!(
                next_within(&mut subscriber, Duration::from_secs(1)).await,
                None
            );
        });
    }

    #[test]
    fn a_subscriber_connection_breaks_when_its_node_restarts() {
        runtime().block_on(async {
            let world: Shared = Arc::new(Mutex::new(World::new(7, 1, 1)));
            let endpoint = Endpoint::open(&world, 0, 0);
            let mut subscriber = endpoint.open_subscriber().await.unwrap();
            subscriber.subscribe(&["a".to_owned()]).await.unwrap();
            world::lock(&world).restart(0, Persistence::None);
            let got = next_within(&mut subscriber, Duration::from_secs(1)).await;
            assert_eq!(got, Some(None), "the connection must end");
            assert!(subscriber.subscribe(&["a".to_owned()]).await.is_err());
        });
    }

    #[test]
    fn a_blackholed_link_loses_the_messages_and_keeps_the_connection() {
        runtime().block_on(async {
            let (world, publisher, mut subscriber) = listening_on_a().await;
            world::lock(&world).set_link(0, 0, LinkMode::Blackhole);
            publish(&publisher, "a", "lost").await;
            assert_eq!(
                next_within(&mut subscriber, Duration::from_secs(1)).await,
                None
            );
            world::lock(&world).set_link(0, 0, LinkMode::Pass);
            publish(&publisher, "a", "heard").await;
            let got = next_within(&mut subscriber, Duration::from_secs(1)).await;
            assert_eq!(got, Some(Some(("a".to_owned(), b"heard".to_vec()))));
        });
    }
}
