//! [`Nodes`]: the nodes of `REDQUORUM_NODES` when set, local ones otherwise.

use super::{LocalCluster, TestkitError};

/// The old name of the environment variable naming external nodes, still
/// read (with a deprecation warning) while `REDQUORUM_NODES`
/// ([`NODES_ENV`](crate::NODES_ENV)) is unset.
pub const REDLOCK_NODES_ENV: &str = crate::env::DEPRECATED_NODES_ENV;

/// Nodes to run against: those named by `REDQUORUM_NODES` (comma-separated
/// URLs, e.g. the five of `docker-compose.yml`), or `n` local
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
    /// External nodes, from `REDQUORUM_NODES`.
    External(Vec<String>),
}

impl Nodes {
    /// Reads `REDQUORUM_NODES` (or the deprecated `REDLOCK_NODES`, with a
    /// warning on stderr), or starts `n` local nodes.
    ///
    /// # Errors
    ///
    /// As [`LocalCluster::start`] when local nodes are started.
    pub fn from_env(n: usize) -> Result<Nodes, TestkitError> {
        let found = crate::env::nodes_var(
            |name| std::env::var(name).ok(),
            |warning| eprintln!("redquorum testkit: {warning}"),
        );
        match found {
            Some((list, _)) => Ok(Nodes::External(crate::env::split_node_list(&list))),
            None => LocalCluster::start(n).map(Nodes::Local),
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
