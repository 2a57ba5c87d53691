//! [`Node::send`]: sends a [`Request`] on the node's connection.
//!
//! A script is sent as `EVALSHA`; a node that answers `NOSCRIPT` (restarted,
//! or after `SCRIPT FLUSH`) is given the script with `SCRIPT LOAD` and asked
//! again, within the same call, so its calls stay in order.

use redis::{ErrorKind, FromRedisValue, RedisError, ServerErrorKind, Value};

use super::reentrant::REENTRANT_RELEASE;
use super::request::Request;
use super::script::Lua;
use super::scripts::RELEASE;
use super::{Node, NodeError, NodeResult};
use crate::error::failure::is_script_denied;

/// Loads `script` on a node that answered `NOSCRIPT`, and the delete
/// scripts with it, in one round trip: the node forgot them all
/// (restarted, or `SCRIPT FLUSH`), and a delete that follows this call
/// (a failed attempt's clean-up, a release) must not need a second trip
/// of its own, which a later call, sent once the delete was handed to the
/// connection, could overtake.
async fn load_with_deletes(script: &Lua, conn: &super::link::Link) -> redis::RedisResult<()> {
    let deletes = [&*RELEASE, &*REENTRANT_RELEASE];
    let others = deletes
        .into_iter()
        .filter(|delete| delete.get_hash() != script.get_hash());
    let loads = std::iter::once(script).chain(others).map(|script| {
        let mut conn = conn.clone();
        async move { script.load_async(&mut conn).await }
    });
    futures_util::future::try_join_all(loads).await.map(drop)
}

/// An I/O error of `kind`, for a call that ended without an answer.
fn io_error(kind: std::io::ErrorKind) -> RedisError {
    RedisError::from(std::io::Error::from(kind))
}

/// Runs `call`; `Err` when it fails with an I/O error as it is first
/// polled, before it could wait for anything: the connection refused the
/// command without writing it (its writer had stopped, or it never
/// connected). Any other end is `Ok`, with the call's own result.
async fn unsent<T>(
    call: impl Future<Output = redis::RedisResult<T>>,
) -> Result<redis::RedisResult<T>, RedisError> {
    let mut call = std::pin::pin!(call);
    let mut first = true;
    std::future::poll_fn(|cx| {
        let poll = call.as_mut().poll(cx);
        let was_first = std::mem::replace(&mut first, false);
        poll.map(|answer| match answer {
            Err(e) if was_first && e.is_io_error() => Err(e),
            answer => Ok(answer),
        })
    })
    .await
}

impl Node {
    /// Sends `request`, true when the reply grants it. Not bounded by a
    /// timeout: the round's deadline bounds it.
    pub(crate) async fn vote(&self, request: &Request) -> NodeResult<bool> {
        let reply: Value = self.send(request).await?;
        Ok(request.grant.granted(&reply))
    }

    /// Sends `request` and reads its reply as a `T`. Not bounded by a
    /// timeout: the round's deadline bounds it
    /// ([`send_bounded`](Self::send_bounded) outside a round).
    ///
    /// A connection that is known dead (the node restarted, or a connect
    /// failed) refuses a command before writing it: the call fails at
    /// once, as it is first polled, with an I/O error. Such a command was
    /// provably never written, so it is sent once more, on the connection
    /// opened in its place. A command that failed later may have been
    /// written and run: it is not sent again, since a second copy could
    /// land out of order with the calls that follow it; its error is the
    /// answer, and the next call uses the new connection.
    pub(crate) async fn send<T: FromRedisValue>(&self, request: &Request) -> NodeResult<T> {
        // The cheap flag first: on a healthy node no call compares hashes.
        if self.doubts_scripts()
            && let Some(script) = request.script.filter(|_| request.deletes())
        {
            return Box::pin(self.send_after_load(request, script)).await;
        }
        let mut conn = self.connection()?;
        match unsent(request.cmd.query_async(&mut conn)).await {
            Ok(Ok(reply)) => Ok(reply),
            // Rare: boxed, so that the common call stays a small future.
            Ok(Err(e)) => Box::pin(self.recover(request, conn, e)).await,
            Err(_) => Box::pin(self.send_again(request)).await,
        }
    }

    /// [`send`](Self::send) of a delete to a node that may have lost its
    /// scripts ([`Node::doubts_scripts`]): `SCRIPT LOAD` of the delete
    /// script, then the delete, written one after the other without
    /// waiting for the load's answer. The node runs both in that order
    /// even if nobody reads their answers (a slow node's `NOSCRIPT` would
    /// come after the call gave up, and the delete would never run).
    async fn send_after_load<T: FromRedisValue>(
        &self,
        request: &Request,
        script: &'static Lua,
    ) -> NodeResult<T> {
        let conn = self.connection()?;
        let (mut for_load, mut for_delete) = (conn.clone(), conn.clone());
        let load = script.load_async(&mut for_load);
        let delete = request.cmd.query_async::<T>(&mut for_delete);
        let (loaded, answer) = futures_util::future::join(load, delete).await;
        if loaded.is_ok() {
            self.set_doubts_scripts(false);
        }
        match answer {
            Ok(reply) => Ok(reply),
            Err(e) => Box::pin(self.recover(request, conn, e)).await,
        }
    }

    /// [`send`](Self::send) once more, after the first try was refused
    /// unwritten: the connection reopens by itself after such an error.
    async fn send_again<T: FromRedisValue>(&self, request: &Request) -> NodeResult<T> {
        let mut conn = self.connection()?;
        match request.cmd.query_async(&mut conn).await {
            Ok(reply) => Ok(reply),
            Err(e) => self.recover(request, conn, e).await,
        }
    }

    /// [`send`](Self::send) bounded by the node timeout.
    pub(crate) async fn send_bounded<T: FromRedisValue>(&self, request: &Request) -> NodeResult<T> {
        match tokio::time::timeout(self.timeout(), self.send(request)).await {
            Ok(answer) => answer,
            Err(_) => Err(NodeError::TimedOut),
        }
    }

    /// After `NOSCRIPT`: loads `script` (and the delete scripts) and sends
    /// `request` again. The loads, and for a delete the second send too,
    /// run in a task of their own, bounded by twice the node timeout from
    /// when it starts: the round that waits for them may give up at its
    /// deadline, but the node still learns its scripts (or its next call
    /// would be answered `NOSCRIPT` again), and a delete still runs. A
    /// vote is sent again only within its round: a `SET` nobody waits for
    /// could land after the clean-up that follows the round; and, for a
    /// request with [`Request::resent_by`], only up to that instant.
    async fn reload<T: FromRedisValue>(
        &self,
        request: &Request,
        script: &'static Lua,
        mut conn: super::link::Link,
    ) -> redis::RedisResult<T> {
        let bound = self.timeout() * 2;
        let again = request.deletes().then(|| request.cmd.clone());
        let detached = {
            let mut conn = conn.clone();
            async move {
                let work = async {
                    load_with_deletes(script, &conn).await?;
                    match again {
                        Some(cmd) => cmd.query_async::<Value>(&mut conn).await.map(Some),
                        None => Ok(None),
                    }
                };
                let answer = tokio::time::timeout(bound, work).await;
                answer.unwrap_or_else(|_| Err(io_error(std::io::ErrorKind::TimedOut)))
            }
        };
        let answer = match tokio::runtime::Handle::try_current() {
            Ok(runtime) => runtime
                .spawn(detached)
                .await
                .unwrap_or_else(|_| Err(io_error(std::io::ErrorKind::Interrupted))),
            Err(_) => detached.await,
        };
        match answer? {
            Some(reply) => T::from_redis_value(reply).map_err(RedisError::from),
            None if request
                .resend_by
                .is_some_and(|by| tokio::time::Instant::now() >= by) =>
            {
                Err(RedisError::from((
                    ErrorKind::Server(ServerErrorKind::NoScript),
                    "NOSCRIPT",
                    "the script was loaded past the middle of the round: not sent again".to_owned(),
                )))
            }
            None => request.cmd.query_async(&mut conn).await,
        }
    }

    /// After `error`: loads a script the node does not know and asks again;
    /// names the command of a script the ACL refuses.
    async fn recover<T: FromRedisValue>(
        &self,
        request: &Request,
        conn: super::link::Link,
        error: RedisError,
    ) -> NodeResult<T> {
        let Some(script) = request.script else {
            return Err(NodeError::redis(&error));
        };
        let error = if error.kind() == ErrorKind::Server(ServerErrorKind::NoScript) {
            match self.reload(request, script, conn).await {
                Ok(reply) => return Ok(reply),
                Err(e) => e,
            }
        } else {
            error
        };
        let failure = match self.guard_refusal(NodeError::redis(&error)) {
            NodeError::Failed(failure) => failure,
            other => return Err(other),
        };
        if is_script_denied(failure.message()) {
            let keys = request.keys();
            return Err(NodeError::Failed(
                self.diagnose(script, &keys, failure).await,
            ));
        }
        Err(NodeError::Failed(failure))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io_error() -> RedisError {
        RedisError::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }

    #[tokio::test]
    async fn only_an_io_error_at_the_first_poll_is_unsent() {
        let refused = unsent(async { Err::<(), _>(io_error()) }).await;
        assert!(refused.is_err());
        let later = unsent(async {
            tokio::task::yield_now().await;
            Err::<(), _>(io_error())
        })
        .await;
        assert!(matches!(later, Ok(Err(_))));
        let server = unsent(async {
            Err::<(), _>(RedisError::from((
                ErrorKind::Server(ServerErrorKind::NoScript),
                "NOSCRIPT",
            )))
        })
        .await;
        assert!(matches!(server, Ok(Err(_))));
        assert!(matches!(unsent(async { Ok(1) }).await, Ok(Ok(1))));
    }
}
