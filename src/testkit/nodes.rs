//! [`Nodes`]: the nodes of `REDLOCK_NODES` when set, local ones otherwise.

use super::{LocalCluster, TestkitError};

/// The environment variable naming external nodes (comma-separated URLs),
/// e.g. the five of `docker-compose.yml`.
pub const REDLOCK_NODES_ENV: &str = "REDLOCK_NODES";

/// Nodes to run against: those named by `REDLOCK_NODES`, or `n` local
/// `redis-server` processes (killed on drop) when it is unset or empty.
/// Fault injection needs [`Nodes::local`].
///
/// ```no_run
/// use redquorum::testkit::Nodes;
///
/// let nodes = Nodes::from_env(5)?;
/// let redlock = redquorum::Redlock::new(nodes.urls()).expect("valid URLs");
/// if let Some(cluster) = nodes.local() {
///     cluster.kill(1)?;
/// }
/// # Ok::<(), redquorum::testkit::TestkitError>(())
/// ```
#[derive(Debug)]
pub enum Nodes {
    /// Local redis-server processes, each behind a fault proxy.
    Local(LocalCluster),
    /// External nodes, from `REDLOCK_NODES`.
    External(Vec<String>),
}

impl Nodes {
    /// Reads `REDLOCK_NODES`, or starts `n` local nodes.
    ///
    /// # Errors
    ///
    /// As [`LocalCluster::start`] when local nodes are started.
    pub fn from_env(n: usize) -> Result<Nodes, TestkitError> {
        match std::env::var(REDLOCK_NODES_ENV) {
            Ok(list) if !list.trim().is_empty() => Ok(Nodes::External(
                list.split(',')
                    .map(|u| u.trim().to_owned())
                    .filter(|u| !u.is_empty())
                    .collect(),
            )),
            _ => LocalCluster::start(n).map(Nodes::Local),
        }
    }

    /// The URLs lock clients use (through the fault proxies, for local nodes).
    pub fn urls(&self) -> Vec<String> {
        match self {
            Nodes::Local(c) => c.urls(),
            Nodes::External(urls) => urls.clone(),
        }
    }

    /// The URLs straight to the servers (for assertions and benches).
    pub fn direct_urls(&self) -> Vec<String> {
        match self {
            Nodes::Local(c) => c.direct_urls(),
            Nodes::External(urls) => urls.clone(),
        }
    }

    /// The local cluster, for fault injection; `None` for external nodes.
    pub fn local(&self) -> Option<&LocalCluster> {
        match self {
            Nodes::Local(c) => Some(c),
            Nodes::External(_) => None,
        }
    }
}
