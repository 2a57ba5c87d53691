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
            Source::Sim(endpoint) => endpoint.name(),
        }
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
        }
    }
}

/// One open pub/sub connection.
pub(super) enum Connection {
    Real(PubSubSink, PubSubStream),
    #[cfg(feature = "sim")]
    Sim(Box<dyn crate::node::link::SimSubscriber>),
}

impl Connection {
    pub(super) async fn subscribe(&mut self, channels: &[String]) -> RedisResult<()> {
        match self {
            Connection::Real(sink, _) => sink.subscribe(channels).await,
            #[cfg(feature = "sim")]
            Connection::Sim(sim) => sim.subscribe(channels).await,
        }
    }

    pub(super) async fn unsubscribe(&mut self, channels: &[String]) -> RedisResult<()> {
        match self {
            Connection::Real(sink, _) => sink.unsubscribe(channels).await,
            #[cfg(feature = "sim")]
            Connection::Sim(sim) => sim.unsubscribe(channels).await,
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
            Connection::Sim(sim) => sim.next().await,
        }
    }
}
