//! The simulated links: each (client, node) pair is one FIFO connection,
//! carried by two tasks (commands to the node, replies back), so that a
//! command sent is applied in order whatever becomes of its caller; or,
//! for a client whose calls go over several connections, one task per
//! command.

use std::sync::Arc;

use redis::{Cmd, RedisError, RedisFuture, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::world::{self, Delivery, Fate, Shared};
use crate::node::link::SimEndpoint;

/// A command on its way to a node.
struct Outbound {
    args: Vec<Vec<u8>>,
    arrives: Instant,
    reply: oneshot::Sender<Answer>,
}

/// A reply on its way back.
struct Inbound {
    at: Instant,
    answer: Answer,
    reply: oneshot::Sender<Answer>,
}

/// What a caller gets: the reply, or a broken connection.
enum Answer {
    Reply(redis::RedisResult<Value>),
    Broken,
}

/// One client's end of the link to one node.
pub(crate) struct Endpoint {
    pub(super) world: Shared,
    pub(super) client: usize,
    pub(super) node: usize,
    outbound: mpsc::UnboundedSender<Outbound>,
    /// Callers of unordered calls whose replies were lost.
    unanswered: Arc<std::sync::Mutex<Vec<oneshot::Sender<Answer>>>>,
}

impl Endpoint {
    /// Opens the link from `client` to `node`, spawning its two tasks on
    /// the current runtime.
    pub(crate) fn open(world: &Shared, client: usize, node: usize) -> Arc<Self> {
        let (outbound, commands) = mpsc::unbounded_channel();
        let (inbound, replies) = mpsc::unbounded_channel();
        tokio::spawn(carry_commands(
            world.clone(),
            client,
            node,
            commands,
            inbound,
        ));
        tokio::spawn(carry_replies(replies));
        Arc::new(Endpoint {
            world: world.clone(),
            client,
            node,
            outbound,
            unanswered: Arc::default(),
        })
    }
}

/// Delivers commands in order: waits for each one's arrival (and for a
/// stopped node to resume), applies it, and hands the reply to the
/// reply task.
async fn carry_commands(
    world: Shared,
    client: usize,
    node: usize,
    mut commands: mpsc::UnboundedReceiver<Outbound>,
    replies: mpsc::UnboundedSender<Inbound>,
) {
    // Callers whose replies were lost: kept, so that they wait (and time
    // out) as on a real connection whose replies never come.
    let mut unanswered = Vec::new();
    while let Some(command) = commands.recv().await {
        match apply(&world, (client, node), command).await {
            Ok(inbound) => {
                let _ = replies.send(inbound);
            }
            Err(reply) => unanswered.push(reply),
        }
    }
}

/// Waits for `command`'s arrival (and for a stopped node to resume),
/// applies it, and says when its reply reaches the client; `Err`: the
/// reply is lost (the caller is given back, to wait forever).
async fn apply(
    world: &Shared,
    (client, node): (usize, usize),
    command: Outbound,
) -> Result<Inbound, oneshot::Sender<Answer>> {
    tokio::time::sleep_until(command.arrives).await;
    let answer = loop {
        let delivery = world::lock(world).deliver(node, &command.args);
        match delivery {
            Delivery::Reply(reply) => break Answer::Reply(reply),
            Delivery::Gone => break Answer::Broken,
            Delivery::Wait(resumed) => resumed.notified().await,
        }
    };
    let at = match answer {
        Answer::Broken => Some(Instant::now()),
        Answer::Reply(_) => world::lock(world).reply_at(client, node),
    };
    match at {
        Some(at) => Ok(Inbound {
            at,
            answer,
            reply: command.reply,
        }),
        None => Err(command.reply),
    }
}

/// Carries one command of an unordered link on its own, as over a
/// connection of its own.
async fn carry_alone(
    world: Shared,
    (client, node): (usize, usize),
    command: Outbound,
    unanswered: Arc<std::sync::Mutex<Vec<oneshot::Sender<Answer>>>>,
) {
    match apply(&world, (client, node), command).await {
        Ok(inbound) => {
            tokio::time::sleep_until(inbound.at).await;
            let _ = inbound.reply.send(inbound.answer);
        }
        Err(reply) => unanswered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(reply),
    }
}

/// Delivers replies in order, each at its instant.
async fn carry_replies(mut replies: mpsc::UnboundedReceiver<Inbound>) {
    while let Some(reply) = replies.recv().await {
        tokio::time::sleep_until(reply.at).await;
        let _ = reply.reply.send(reply.answer);
    }
}

pub(super) fn io_error(kind: std::io::ErrorKind, message: &'static str) -> RedisError {
    RedisError::from(std::io::Error::new(kind, message))
}

/// A connection that broke under its caller.
pub(super) fn broken() -> RedisError {
    io_error(std::io::ErrorKind::BrokenPipe, "Broken pipe (os error 32)")
}

impl SimEndpoint for Endpoint {
    fn name(&self) -> String {
        format!("sim-{}:6379", self.node)
    }

    fn subscriber(&self) -> RedisFuture<'_, Box<dyn crate::node::link::SimSubscriber>> {
        self.open_subscriber()
    }

    fn call<'a>(&'a self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let args: Vec<Vec<u8>> = cmd
            .args_iter()
            .filter_map(|arg| match arg {
                redis::Arg::Simple(bytes) => Some(bytes.to_vec()),
                _ => None,
            })
            .collect();
        let fate = world::lock(&self.world).send(self.client, self.node);
        let (reply, answer) = oneshot::channel();
        let sent = match fate {
            Fate::Fail(kind, message) => Err(io_error(kind, message)),
            Fate::Lost => Ok(false),
            Fate::Arrives(arrives) => Ok(self
                .outbound
                .send(Outbound {
                    args,
                    arrives,
                    reply,
                })
                .is_ok()),
            Fate::Unordered(arrives) => {
                let command = Outbound {
                    args,
                    arrives,
                    reply,
                };
                let at = (self.client, self.node);
                let unanswered = self.unanswered.clone();
                tokio::spawn(carry_alone(self.world.clone(), at, command, unanswered));
                Ok(true)
            }
        };
        Box::pin(async move {
            if !sent? {
                std::future::pending::<()>().await;
            }
            match answer.await {
                Ok(Answer::Reply(reply)) => reply?.extract_error(),
                Ok(Answer::Broken) | Err(_) => Err(broken()),
            }
        })
    }
}
