//! [`Link`]: the connection a node call goes out on. Normally redis's
//! [`ConnectionManager`]; under the simulator (feature `sim`) a simulated
//! link to a simulated node. Both are a [`ConnectionLike`], so commands and
//! scripts (`EVALSHA`, `NOSCRIPT`, `SCRIPT LOAD`) go out exactly alike.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// One node's connection, cheap to clone.
#[derive(Clone)]
pub(crate) enum Link {
    /// A real connection.
    Real(ConnectionManager),
    /// A simulated link (feature `sim`).
    #[cfg(feature = "sim")]
    Sim(std::sync::Arc<dyn SimEndpoint>),
    /// A real connection to a cluster master whose keys carry a hash tag
    /// (feature `cluster`, [`tagged`](super::tagged)).
    #[cfg(feature = "cluster")]
    Tagged(ConnectionManager, std::sync::Arc<str>),
    /// A simulated link to a node keyed as a cluster master: the keys carry
    /// the node's hash tag, as over [`Link::Tagged`].
    #[cfg(feature = "sim")]
    SimTagged(std::sync::Arc<dyn SimEndpoint>, std::sync::Arc<str>),
}

/// The far end of a simulated link: takes a command, answers as a Redis
/// server would, after the link's delays and faults.
#[cfg(feature = "sim")]
pub(crate) trait SimEndpoint: Send + Sync {
    /// Sends `cmd` and waits for its reply.
    fn call<'a>(&'a self, cmd: &'a Cmd) -> RedisFuture<'a, Value>;

    /// The node's name, for spans.
    fn name(&self) -> String;

    /// Opens a pub/sub connection to the node.
    fn subscriber(&self) -> RedisFuture<'_, Box<dyn SimSubscriber>>;
}

/// A simulated pub/sub connection (feature `sim`).
#[cfg(feature = "sim")]
pub(crate) trait SimSubscriber: Send {
    /// Subscribes to `channels`, once the node confirms.
    fn subscribe<'a>(&'a mut self, channels: &'a [String]) -> RedisFuture<'a, ()>;

    /// Unsubscribes from `channels`, once the node confirms.
    fn unsubscribe<'a>(&'a mut self, channels: &'a [String]) -> RedisFuture<'a, ()>;

    /// The next message, as redis's pub/sub stream gives it; `None` once
    /// the connection is lost. Cancel safe.
    fn next(&mut self) -> futures_util::future::BoxFuture<'_, Option<redis::Msg>>;
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Link::Real(manager) => manager.req_packed_command(cmd),
            #[cfg(feature = "sim")]
            Link::Sim(endpoint) => endpoint.call(cmd),
            #[cfg(feature = "cluster")]
            Link::Tagged(manager, tag) => {
                let cmd = super::tagged::tag_keys(cmd, tag);
                Box::pin(async move { manager.req_packed_command(&cmd).await })
            }
            #[cfg(feature = "sim")]
            Link::SimTagged(endpoint, tag) => {
                let cmd = super::tagged::tag_keys(cmd, tag);
                Box::pin(async move { endpoint.call(&cmd).await })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Link::Real(manager) => manager.req_packed_commands(pipeline, offset, count),
            #[cfg(feature = "sim")]
            Link::Sim(_) | Link::SimTagged(..) => Box::pin(async {
                Err(redis::RedisError::from((
                    redis::ErrorKind::Client,
                    "pipelines are not simulated",
                )))
            }),
            #[cfg(feature = "cluster")]
            Link::Tagged(..) => Box::pin(async {
                Err(redis::RedisError::from((
                    redis::ErrorKind::Client,
                    "pipelines are not tagged",
                )))
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Link::Real(manager) => manager.get_db(),
            #[cfg(feature = "sim")]
            Link::Sim(_) | Link::SimTagged(..) => 0,
            #[cfg(feature = "cluster")]
            Link::Tagged(manager, _) => manager.get_db(),
        }
    }
}
