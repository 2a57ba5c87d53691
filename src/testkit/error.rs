//! The error type of the testkit.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while running local `redis-server` nodes.
///
/// Every message says what failed, which node (by index) it concerns and,
/// where possible, what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestkitError {
    /// No `redis-server` binary could be found.
    ///
    /// `configured` is the explicit path that was tried (from
    /// [`LocalClusterBuilder::redis_server_bin`](super::LocalClusterBuilder::redis_server_bin)
    /// or the `REDIS_SERVER_BIN` environment variable), or `None` if `PATH`
    /// was searched.
    #[error(
        "redis-server not found {}; install it with `apt-get install -y redis-server` \
         (Debian/Ubuntu) or set REDIS_SERVER_BIN",
        match configured {
            Some(p) => format!("at configured path {}", p.display()),
            None => "on PATH".to_owned(),
        }
    )]
    RedisServerMissing {
        /// The explicitly configured path that does not exist, if any.
        configured: Option<PathBuf>,
    },

    /// A node index was out of range.
    #[error(
        "no node with index {index}: the cluster has {len} node(s), valid indices are 0..{len}"
    )]
    NoSuchNode {
        /// The index that was asked for.
        index: usize,
        /// The number of nodes in the cluster.
        len: usize,
    },

    /// The operation needs a running process but the node is down.
    #[error("node {index} is down (killed); call restart({index}) before {operation}")]
    NodeDown {
        /// The node index.
        index: usize,
        /// What was attempted (`"pause"`, `"resume"`).
        operation: &'static str,
    },

    /// `redis-server` could not be spawned.
    #[error("failed to spawn {} for node {index}: {source}", bin.display())]
    Spawn {
        /// The node index.
        index: usize,
        /// The binary that was executed.
        bin: PathBuf,
        /// The underlying OS error.
        #[source]
        source: std::io::Error,
    },

    /// `redis-server` was spawned but never answered `PING`, or exited early.
    #[error(
        "redis-server for node {index} on 127.0.0.1:{port} did not come up within {waited:?} \
         ({reason}); check that the port is free and the binary works. Last log lines:\n{log_tail}"
    )]
    StartFailed {
        /// The node index.
        index: usize,
        /// The port it was asked to listen on.
        port: u16,
        /// How long we waited.
        waited: Duration,
        /// Why it is considered failed (exit status or "no PONG").
        reason: String,
        /// The last lines of the node's log file.
        log_tail: String,
    },

    /// Sending a signal (SIGSTOP / SIGCONT / SIGKILL) or reaping a node failed.
    #[error("failed to send {signal} to redis-server of node {index} (pid {pid}): {source}")]
    Signal {
        /// The node index.
        index: usize,
        /// The process id.
        pid: u32,
        /// The signal name.
        signal: &'static str,
        /// The underlying OS error.
        #[source]
        source: std::io::Error,
    },

    /// A file-system or socket operation of the testkit itself failed
    /// (temporary directory, proxy listener, free-port probe...).
    #[error("testkit I/O error while {context}: {source}")]
    Io {
        /// What the testkit was doing.
        context: String,
        /// The underlying OS error.
        #[source]
        source: std::io::Error,
    },

    /// Opening a direct assertion connection to a node failed.
    #[error("could not open a redis connection to node {index} ({url}): {source}")]
    Redis {
        /// The node index.
        index: usize,
        /// The URL that was used.
        url: String,
        /// The redis client error.
        #[source]
        source: redis::RedisError,
    },

    /// The test certificates could not be made.
    #[error("could not generate the test TLS certificates ({what}): {reason}")]
    Certificates {
        /// Which certificate or key.
        what: &'static str,
        /// What the certificate library said.
        reason: String,
    },

    /// A local Redis Cluster did not form, or did not settle after a fault.
    #[error("local redis cluster: {0}")]
    Cluster(String),
}
