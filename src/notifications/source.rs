//! Where a node's pub/sub connection comes from: redis's client, or under
//! the simulator (feature `sim`) a simulated node. Both give a
//! [`Connection`] that subscribes, unsubscribes and yields messages; the
//! feed above drives either the same way.

use futures_util::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use redis::{Client, Msg, RedisResult};

/// Opens one node's pub/sub connections.
// The second variant exists only in simulation builds, where a few bytes
// per node do not matter; a real build has one variant and no box.
#[cfg_attr(feature = "sim", allow(clippy::large_enum_variant))]
#[derive(Clone)]
pub(crate) enum Source {
    /// A real server.
    Real(Client),
    /// A simulated node (feature `sim`).
    #[cfg(feature = "sim")]
    Sim(std::sync::Arc<dyn crate::node::link::SimEndpoint>),
    /// A master of a Redis Cluster, whose channels carry the node's hash
    /// tag as its keys do (feature `cluster`).
    #[cfg(feature = "cluster")]
    Tagged(Client, std::sync::Arc<str>),
    /// A simulated node keyed as a cluster master (feature `sim`).
    #[cfg(feature = "sim")]
    SimTagged(
        std::sync::Arc<dyn crate::node::link::SimEndpoint>,
        std::sync::Arc<str>,
    ),
}

impl From<Client> for Source {
    fn from(client: Client) -> Self {
        Source::Real(client)
    }
}

impl Source {
    /// The node's address, for spans.
    pub(super) fn addr(&self) -> String {
        match self {
            Source::Real(client) => client.get_connection_info().addr().to_string(),
            #[cfg(feature = "sim")]
            Source::Sim(endpoint) | Source::SimTagged(endpoint, _) => endpoint.name(),
            #[cfg(feature = "cluster")]
            Source::Tagged(client, _) => client.get_connection_info().addr().to_string(),
        }
    }

    /// `channel` as the lock names it: without the hash tag a cluster
    /// node's channels carry.
    pub(super) fn untagged<'a>(&self, channel: &'a str) -> &'a str {
        #[cfg(feature = "sim")]
        if let Source::SimTagged(_, tag) = self {
            return untag(channel, tag);
        }
        #[cfg(feature = "cluster")]
        if let Source::Tagged(_, tag) = self {
            return untag(channel, tag);
        }
        channel
    }

    /// Opens a pub/sub connection.
    pub(super) async fn connect(&self) -> RedisResult<Connection> {
        match self {
            Source::Real(client) => {
                let (sink, stream) = client.get_async_pubsub().await?.split();
                Ok(Connection::Real(sink, stream))
            }
            #[cfg(feature = "sim")]
            Source::Sim(endpoint) => Ok(Connection::Sim(endpoint.subscriber().await?)),
            #[cfg(feature = "sim")]
            Source::SimTagged(endpoint, tag) => Ok(Connection::SimTagged(
                endpoint.subscriber().await?,
                tag.clone(),
            )),
            #[cfg(feature = "cluster")]
            Source::Tagged(client, tag) => {
                let (sink, stream) = client.get_async_pubsub().await?.split();
                Ok(Connection::Tagged(sink, stream, tag.clone()))
            }
        }
    }
}

/// `channel` without `{tag}` in front, if it has it.
#[cfg(feature = "cluster")]
fn untag<'a>(channel: &'a str, tag: &str) -> &'a str {
    channel
        .strip_prefix('{')
        .and_then(|c| c.strip_prefix(tag))
        .and_then(|c| c.strip_prefix('}'))
        .unwrap_or(channel)
}

/// One open pub/sub connection.
pub(super) enum Connection {
    Real(PubSubSink, PubSubStream),
    #[cfg(feature = "sim")]
    Sim(Box<dyn crate::node::link::SimSubscriber>),
    #[cfg(feature = "cluster")]
    Tagged(PubSubSink, PubSubStream, std::sync::Arc<str>),
    #[cfg(feature = "sim")]
    SimTagged(
        Box<dyn crate::node::link::SimSubscriber>,
        std::sync::Arc<str>,
    ),
}

/// `channels` with `tag` in front: `{tag}channel`.
#[cfg(feature = "cluster")]
fn tagged(channels: &[String], tag: &str) -> Vec<String> {
    channels.iter().map(|c| format!("{{{tag}}}{c}")).collect()
}

impl Connection {
    pub(super) async fn subscribe(&mut self, channels: &[String]) -> RedisResult<()> {
        match self {
            Connection::Real(sink, _) => sink.subscribe(channels).await,
            #[cfg(feature = "sim")]
            Connection::Sim(sim) => sim.subscribe(channels).await,
            #[cfg(feature = "sim")]
            Connection::SimTagged(sim, tag) => sim.subscribe(&tagged(channels, tag)).await,
            #[cfg(feature = "cluster")]
            Connection::Tagged(sink, _, tag) => sink.subscribe(tagged(channels, tag)).await,
        }
    }

    pub(super) async fn unsubscribe(&mut self, channels: &[String]) -> RedisResult<()> {
        match self {
            Connection::Real(sink, _) => sink.unsubscribe(channels).await,
            #[cfg(feature = "sim")]
            Connection::Sim(sim) => sim.unsubscribe(channels).await,
            #[cfg(feature = "sim")]
            Connection::SimTagged(sim, tag) => sim.unsubscribe(&tagged(channels, tag)).await,
            #[cfg(feature = "cluster")]
            Connection::Tagged(sink, _, tag) => sink.unsubscribe(tagged(channels, tag)).await,
        }
    }

    /// The next message; `None` once the connection is lost.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a message is never half taken.
    pub(super) async fn next(&mut self) -> Option<Msg> {
        match self {
            Connection::Real(_, stream) => stream.next().await,
            #[cfg(feature = "sim")]
            Connection::Sim(sim) | Connection::SimTagged(sim, _) => sim.next().await,
            #[cfg(feature = "cluster")]
            Connection::Tagged(_, stream, _) => stream.next().await,
        }
    }
}
