//! One Redis master: a lazily opened, self-healing connection and a
//! timeout on every call. The lock commands are in [`commands`], their
//! scripts in [`scripts`].

pub(crate) mod acl;
#[cfg(test)]
mod acl_docs;
pub(crate) mod batch;
mod call;
pub(crate) mod commands;
pub(crate) mod kind;
pub(crate) mod link;
#[cfg(test)]
mod lua_portable;
pub(crate) mod observe;
pub(crate) mod reentrant;
#[cfg(any(test, feature = "testkit"))]
pub(crate) mod registry;
pub(crate) mod request;
pub(crate) mod restart_guard;
pub(crate) mod script;
pub(crate) mod scripts;
#[cfg(feature = "cluster")]
pub(crate) mod tagged;
mod tls;

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use self::link::Link;
use redis::{Client, ConnectionInfo, IntoConnectionInfo, RedisError};

use self::acl::DIAGNOSE;
use self::script::Lua;
use crate::config::Connect;
use crate::error::failure::{FailureKind, NodeFailure};
use crate::error::{NodeOutcome, Result};

/// Why one call to one node did not give an answer.
#[derive(Clone, Debug)]
pub(crate) enum NodeError {
    /// No answer within the node timeout.
    TimedOut,
    /// Connection or server error, sorted into a kind.
    Failed(NodeFailure),
    /// The restart guard refused the vote for this long.
    Quarantined(Duration),
    /// The restart guard refused: the node keeps another quarantine than
    /// this client announces.
    QuarantineMismatch {
        /// The quarantine the node keeps.
        kept: Duration,
        /// The quarantine this client announces.
        ours: Duration,
    },
    /// With the restart guard on, the node's fence counters are not known
    /// intact: it is no vote in the fenced read.
    CountersUnknown,
}

impl NodeError {
    /// The outcome to report for this error.
    pub(crate) fn outcome(&self) -> NodeOutcome {
        match self {
            NodeError::TimedOut => NodeOutcome::TimedOut,
            NodeError::Failed(failure) => NodeOutcome::Failed(failure.clone()),
            NodeError::Quarantined(left) => NodeOutcome::Quarantined { left: *left },
            NodeError::QuarantineMismatch { kept, ours } => NodeOutcome::QuarantineMismatch {
                kept: *kept,
                ours: *ours,
            },
            NodeError::CountersUnknown => NodeOutcome::CountersUnknown,
        }
    }

    pub(super) fn redis(e: &RedisError) -> Self {
        NodeError::Failed(NodeFailure::from_redis(e))
    }
}

/// The answer of one node call.
pub(crate) type NodeResult<T> = std::result::Result<T, NodeError>;

/// Where a node's connections go, and the ones open.
struct Conns {
    client: Client,
    /// One per runtime, see [`Node::conn`].
    open: Vec<Connection>,
}

/// A connection and a task that lives as long as the runtime it is on.
struct Connection {
    manager: ConnectionManager,
    /// The runtime the connection's driver runs on.
    id: tokio::runtime::Id,
    runtime: tokio::task::JoinHandle<()>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.runtime.abort();
    }
}

/// The error for a node call made outside a tokio runtime.
fn no_runtime() -> RedisError {
    RedisError::from((
        redis::ErrorKind::Io,
        "no tokio runtime",
        "call redquorum from inside a tokio runtime".to_owned(),
    ))
}

/// One independent Redis master.
pub(crate) struct Node {
    /// Address (and database when not 0), never credentials: for messages.
    name: String,
    /// The server's address alone, normalised: two nodes with the same one
    /// are one server, whatever their databases or credentials.
    server: String,
    /// The client, and its connections: one per runtime that calls the
    /// node, opened on first use inside it, so that construction does no
    /// I/O and needs no runtime, and a call never waits on a driver that
    /// another runtime (idle, or busy) would have to run; forgotten once
    /// their runtime has shut down.
    conn: Mutex<Conns>,
    timeout: Duration,
    /// The bound on opening a connection, which may exceed `timeout`.
    connect_timeout: Duration,
    /// The labels of this node's metrics.
    pub(crate) labels: crate::metrics::NodeLabels,
    /// Which answer the reachability gauge last took.
    newest_answer: observe::NewestAnswer,
    /// A call timed out or its connection failed since the node last took
    /// our delete script: it may have restarted or be too slow to read a
    /// `NOSCRIPT` in time, so deletes are sent after the script's load
    /// ([`Node::send`]).
    doubts_scripts: std::sync::atomic::AtomicBool,
    /// Extensions waiting to be sent together ([`batch`]).
    batch: batch::Queue,
    /// The restart guard, when it is on.
    pub(crate) restart_guard: Option<restart_guard::RestartGuard>,
    /// The simulated node this one talks to instead (feature `sim`).
    #[cfg(feature = "sim")]
    sim: Option<std::sync::Arc<dyn link::SimEndpoint>>,
    /// The hash tag of this node's keys, on a Redis Cluster (feature
    /// `cluster`).
    #[cfg(feature = "cluster")]
    pub(crate) cluster: Option<tagged::ClusterNode>,
}

impl Node {
    /// Parses one node address. `index` is its position in the list given,
    /// for messages. `timeout` bounds each call; `connect` says how
    /// connections open (their bound, certificates for `rediss://`).
    pub(crate) fn new(
        index: usize,
        info: impl IntoConnectionInfo,
        timeout: Duration,
        connect: &Connect,
    ) -> Result<Self> {
        let info = info
            .into_connection_info()
            .map_err(|e| tls::unusable_url(index, &e))?;
        let name = display_name(&info);
        let server = server_of(info.addr());
        let client = tls::client(index, info, &name, connect)?;
        Ok(Node {
            name,
            labels: crate::metrics::NodeLabels::new(&server),
            newest_answer: observe::NewestAnswer::default(),
            doubts_scripts: std::sync::atomic::AtomicBool::new(false),
            batch: batch::Queue::default(),
            server,
            conn: Mutex::new(Conns {
                client,
                open: Vec::new(),
            }),
            timeout,
            connect_timeout: connect.timeout(),
            restart_guard: None,
            #[cfg(feature = "sim")]
            sim: None,
            #[cfg(feature = "cluster")]
            cluster: None,
        })
    }

    /// A node whose calls go to the simulated `endpoint` (feature `sim`),
    /// named `sim-{index}`. Its client (for pub/sub) leads nowhere.
    #[cfg(feature = "sim")]
    pub(crate) fn simulated(
        index: usize,
        endpoint: std::sync::Arc<dyn link::SimEndpoint>,
        timeout: Duration,
        connect: &Connect,
    ) -> Result<Self> {
        let mut node = Node::new(
            index,
            format!("redis://sim-{index}:6379/"),
            timeout,
            connect,
        )?;
        node.sim = Some(endpoint);
        Ok(node)
    }

    /// This node with the restart guard on (`Some`) or off.
    pub(crate) fn with_restart_guard(mut self, guard: Option<restart_guard::RestartGuard>) -> Self {
        self.restart_guard = guard;
        self
    }

    /// On a lock over a Redis Cluster, the node's hash tag and slot.
    pub(crate) fn cluster_slot(&self) -> Option<(String, u16)> {
        #[cfg(feature = "cluster")]
        if let Some(cluster) = &self.cluster {
            return Some((cluster.tag.to_string(), cluster.slot));
        }
        None
    }

    /// The node's address without credentials.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The server's normalised address (no database, no credentials).
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// Whether the node may have lost our delete script since it last
    /// took it: deletes then go out after a `SCRIPT LOAD`.
    pub(crate) fn doubts_scripts(&self) -> bool {
        self.doubts_scripts
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records that the node may have lost the delete script (`true`), or
    /// that it has just taken it (`false`); see
    /// [`doubts_scripts`](Self::doubts_scripts).
    pub(crate) fn set_doubts_scripts(&self, doubt: bool) {
        self.doubts_scripts
            .store(doubt, std::sync::atomic::Ordering::Relaxed);
    }

    /// The limit on one call to this node.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The bound on opening a connection to this node.
    pub(crate) fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// Where this node's release notifications come from.
    pub(crate) fn feed_source(&self) -> crate::notifications::Source {
        #[cfg(feature = "sim")]
        if let Some(endpoint) = &self.sim {
            if let Some(cluster) = &self.cluster {
                let tag = cluster.tag.clone();
                return crate::notifications::Source::SimTagged(endpoint.clone(), tag);
            }
            return crate::notifications::Source::Sim(endpoint.clone());
        }
        let conns = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        #[cfg(feature = "cluster")]
        if let Some(cluster) = &self.cluster {
            return crate::notifications::Source::Tagged(conns.client.clone(), cluster.tag.clone());
        }
        crate::notifications::Source::Real(conns.client.clone())
    }

    pub(super) fn connection(&self) -> NodeResult<Link> {
        #[cfg(feature = "sim")]
        if let Some(endpoint) = &self.sim {
            if let Some(cluster) = &self.cluster {
                return Ok(Link::SimTagged(endpoint.clone(), cluster.tag.clone()));
            }
            return Ok(Link::Sim(endpoint.clone()));
        }
        let handle =
            tokio::runtime::Handle::try_current().map_err(|_| NodeError::redis(&no_runtime()))?;
        let id = handle.id();
        let mut conns = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(live) = conns
            .open
            .iter()
            .find(|c| c.id == id && !c.runtime.is_finished())
        {
            return Ok(self.link(live.manager.clone()));
        }
        conns.open.retain(|c| !c.runtime.is_finished());
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(None)
            .set_number_of_retries(0);
        let manager = ConnectionManager::new_lazy_with_config(conns.client.clone(), config)
            .map_err(|e| NodeError::redis(&e))?;
        // Ends (as a cancelled task) when the runtime shuts down, taking
        // the connection's driver with it: the next call opens a new one.
        let runtime = handle.spawn(std::future::pending::<()>());
        // The first connection makes progress only while a call waits on
        // it, and a call gives up after the node timeout: this task sees
        // it through (within the connect timeout), so that a set-up slower
        // than a call (a TLS handshake to a distant node) still completes,
        // or fails with its real reason, for the calls that follow.
        let mut opening = manager.clone();
        let limit = self.connect_timeout.saturating_add(self.timeout);
        handle.spawn(async move {
            let ping = redis::cmd("PING");
            let _ =
                tokio::time::timeout(limit, ping.query_async::<redis::Value>(&mut opening)).await;
        });
        conns.open.push(Connection {
            manager: manager.clone(),
            id,
            runtime,
        });
        Ok(self.link(manager))
    }

    /// The link over `manager`: tagged on a cluster.
    fn link(&self, manager: ConnectionManager) -> Link {
        #[cfg(feature = "cluster")]
        if let Some(cluster) = &self.cluster {
            return Link::Tagged(manager, cluster.tag.clone());
        }
        Link::Real(manager)
    }

    /// Names the command of `script` that the ACL refused in `failure`: from
    /// the error when it tells (see [`acl`]), else by asking the node which
    /// of the script's commands its ACL forbids on `keys`; when neither
    /// can, the failure lists the commands it may be.
    pub(super) async fn diagnose(
        &self,
        script: &Lua,
        keys: &[String],
        failure: NodeFailure,
    ) -> NodeFailure {
        if let Some(named) = acl::named(script, &failure) {
            return named;
        }
        let Ok(mut conn) = self.connection() else {
            return acl::unnamed(script, failure);
        };
        let mut invocation = DIAGNOSE.prepare_invoke();
        for key in keys {
            invocation.key(key);
        }
        for command in script.calls() {
            invocation.arg(command);
        }
        match self
            .bounded(invocation.invoke_async::<Option<String>>(&mut conn))
            .await
        {
            Ok(Some(found)) => {
                let command = found.split(' ').next().unwrap_or_default().to_owned();
                let message = format!(
                    "this user may not run `{found}` in a lock script: allow the command and \
                     the key pattern"
                );
                NodeFailure::new(
                    FailureKind::NoPermission {
                        command: Some(command),
                    },
                    message,
                )
            }
            _ => acl::unnamed(script, failure),
        }
    }

    /// Runs one command, bounded by the node timeout.
    pub(crate) async fn command<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
    ) -> NodeResult<T> {
        self.command_within(cmd, self.timeout).await
    }

    /// Runs one command, bounded by `limit` instead of the node timeout.
    pub(crate) async fn command_within<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
        limit: Duration,
    ) -> NodeResult<T> {
        let mut conn = self.connection()?;
        Self::within(limit, cmd.query_async(&mut conn)).await
    }

    async fn bounded<T>(&self, call: impl Future<Output = redis::RedisResult<T>>) -> NodeResult<T> {
        Self::within(self.timeout, call).await
    }

    async fn within<T>(
        limit: Duration,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> NodeResult<T> {
        match tokio::time::timeout(limit, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(NodeError::redis(&e)),
            Err(_) => Err(NodeError::TimedOut),
        }
    }
}

/// `host:port` with the host in lower case (TLS or not), or the socket path.
fn server_of(addr: &redis::ConnectionAddr) -> String {
    match addr {
        redis::ConnectionAddr::Tcp(host, port)
        | redis::ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{}:{port}", host.to_ascii_lowercase())
        }
        other => other.to_string(),
    }
}

/// `host:port` (or the socket path), with `/db` when the database is not 0.
fn display_name(info: &ConnectionInfo) -> String {
    match info.redis_settings().db() {
        0 => info.addr().to_string(),
        db => format!("{}/{db}", info.addr()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_hides_the_password_and_shows_a_non_default_db() {
        let node = Node::new(
            0,
            "redis://:secret@127.0.0.1:7001/3",
            Duration::from_millis(5),
            &Connect::default(),
        )
        .map_err(|e| e.to_string());
        let node = node.as_ref().map(Node::name);
        assert_eq!(node, Ok("127.0.0.1:7001/3"));
    }

    #[test]
    fn bad_url_is_a_config_error_naming_the_node() {
        let err = Node::new(
            2,
            "http://example",
            Duration::from_millis(5),
            &Connect::default(),
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(err.contains("node 2"), "{err}");
    }
}
