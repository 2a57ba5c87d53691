//! [`LocalClusterBuilder`]: how a [`LocalCluster`] is started: node
//! count, `redis-server` binary, TLS; and the cluster's temporary directory.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::certs::TestCertificates;
use super::cluster::{LocalCluster, Node};
use super::error::TestkitError;
use super::proxy::Proxy;
use super::server::RedisServer;

/// Environment variable that may point at the `redis-server` binary.
pub const REDIS_SERVER_BIN_ENV: &str = "REDIS_SERVER_BIN";

/// Makes temporary directory names unique within this process.
static DIR_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Configures and starts a [`LocalCluster`]. Obtained from
/// [`LocalCluster::builder`].
///
/// ```no_run
/// use redquorum::testkit::LocalCluster;
///
/// let cluster = LocalCluster::builder()
///     .nodes(5)
///     .redis_server_bin("/usr/bin/redis-server")
///     .start()?;
/// assert_eq!(cluster.len(), 5);
/// # Ok::<(), redquorum::testkit::TestkitError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until start() is called"]
pub struct LocalClusterBuilder {
    nodes: usize,
    redis_server_bin: Option<PathBuf>,
    /// `Some(require client certificates)` for TLS nodes.
    tls: Option<bool>,
}

impl Default for LocalClusterBuilder {
    fn default() -> Self {
        LocalClusterBuilder {
            nodes: 3,
            redis_server_bin: None,
            tls: None,
        }
    }
}

impl LocalClusterBuilder {
    /// Number of nodes to start (default 3).
    pub fn nodes(mut self, n: usize) -> Self {
        self.nodes = n;
        self
    }

    /// Use this `redis-server` binary instead of `$REDIS_SERVER_BIN` or the
    /// one found on `PATH`.
    pub fn redis_server_bin(mut self, path: impl Into<PathBuf>) -> Self {
        self.redis_server_bin = Some(path.into());
        self
    }

    /// Nodes speak TLS: the cluster makes [`TestCertificates`] (written
    /// into its temporary directory), each `redis-server` also listens on
    /// a `--tls-port` with the server certificate, and the proxies front
    /// that port, so [`urls`](LocalCluster::urls) are
    /// `rediss://127.0.0.1:<proxy port>/`. Clients must trust the CA:
    /// [`LocalCluster::certificates`] has it. Client certificates are not
    /// required (see [`tls_client_auth`](Self::tls_client_auth)). The plain
    /// port stays open for the testkit's own connections
    /// ([`direct_urls`](LocalCluster::direct_urls),
    /// [`connection`](LocalCluster::connection)).
    ///
    /// The proxy forwards TLS bytes unchanged, so [`ProxyMode::DropReplies`](super::ProxyMode::DropReplies)
    /// and [`ProxyMode::FastClock`](super::ProxyMode::FastClock), which read the commands, cannot work on
    /// a TLS cluster; latency, blackhole and reset work as on plain nodes.
    ///
    /// ```no_run
    /// use redquorum::testkit::LocalCluster;
    ///
    /// let cluster = LocalCluster::builder().nodes(5).tls().start()?;
    /// assert!(cluster.urls()[0].starts_with("rediss://127.0.0.1:"));
    /// assert!(cluster.certificates().is_some());
    /// # Ok::<(), redquorum::testkit::TestkitError>(())
    /// ```
    pub fn tls(mut self) -> Self {
        self.tls = Some(false);
        self
    }

    /// As [`tls`](Self::tls), and the nodes require a client certificate
    /// signed by the cluster's CA (`--tls-auth-clients yes`):
    /// `TestCertificates::tls_certificates` (a TLS feature) includes one.
    pub fn tls_client_auth(mut self) -> Self {
        self.tls = Some(true);
        self
    }

    /// Starts the cluster: one `redis-server` per node on a free
    /// `127.0.0.1` port, each fronted by a proxy in [`ProxyMode::Pass`](super::ProxyMode::Pass).
    /// Returns once every node answers `PING`.
    ///
    /// # Errors
    ///
    /// - [`TestkitError::RedisServerMissing`] if no binary is found.
    /// - [`TestkitError::StartFailed`] if a node does not answer `PING`
    ///   within 10 s (after retrying with other ports); the error quotes the
    ///   node's log.
    /// - [`TestkitError::Spawn`] / [`TestkitError::Io`] for OS failures.
    /// - [`TestkitError::Certificates`] if TLS certificates cannot be made.
    ///
    /// Nodes already started are killed again on error.
    pub fn start(self) -> Result<LocalCluster, TestkitError> {
        let bin = resolve_bin(self.redis_server_bin.as_deref())?;
        let root = TempDir::create()?;
        let tls = match self.tls {
            Some(auth_clients) => {
                let certificates = TestCertificates::generate()?;
                let files = certificates.write_server_files(&root.path)?;
                Some((certificates, files, auth_clients))
            }
            None => None,
        };
        let mut nodes = Vec::with_capacity(self.nodes);
        for index in 0..self.nodes {
            let server = RedisServer::start(
                index,
                &bin,
                &root.path.join(format!("node-{index}")),
                tls.as_ref().map(|(_, files, auth)| (files, *auth)),
            )?;
            let port = server.tls_port().unwrap_or(server.port());
            let proxy = Proxy::start(index, SocketAddr::from((Ipv4Addr::LOCALHOST, port)))?;
            nodes.push(Node {
                direct_port: server.port(),
                server: Mutex::new(server),
                proxy,
            });
        }
        Ok(LocalCluster {
            nodes,
            certificates: tls.map(|(certificates, _, _)| certificates),
            _root: root,
        })
    }
}

/// Finds `redis-server`: explicit path, else `$REDIS_SERVER_BIN`, else `PATH`.
pub(crate) fn resolve_bin(explicit: Option<&Path>) -> Result<PathBuf, TestkitError> {
    let configured = explicit.map(Path::to_path_buf).or_else(|| {
        std::env::var_os(REDIS_SERVER_BIN_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    if let Some(path) = configured {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(TestkitError::RedisServerMissing {
                configured: Some(path),
            })
        };
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
        .ok_or(TestkitError::RedisServerMissing { configured: None })
}

/// A per-cluster directory under the system temp dir, removed on drop.
#[derive(Debug)]
pub(crate) struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub(crate) fn create() -> Result<Self, TestkitError> {
        let base = std::env::temp_dir();
        loop {
            let n = DIR_COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("redquorum-testkit-{}-{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(TempDir { path }),
                // Left over by an earlier process with the same pid.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(source) => {
                    return Err(TestkitError::Io {
                        context: format!("creating temporary directory {}", path.display()),
                        source,
                    });
                }
            }
        }
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
