//! Local Redis nodes with fault injection, for tests, examples and benches
//! (feature `testkit`).
//!
//! [`LocalCluster`] starts N `redis-server` processes on free `127.0.0.1`
//! ports, each fronted by a TCP proxy whose [`ProxyMode`] can be switched at
//! any time (latency, blackhole, connection reset). Nodes can be killed,
//! restarted empty on the same port, paused (`SIGSTOP`) and resumed.
//! [`FencedResource`] is a reference store that checks fencing tokens;
//! [`Oracle`] checks from outside that a guard never claims more validity
//! than a quorum of nodes holds its keys for.
//!
//! Requires `redis-server` on `PATH` (`apt-get install -y redis-server`) or
//! `REDIS_SERVER_BIN` pointing at it. Unix only (signals).
//!
//! ```no_run
//! use redquorum::testkit::{LocalCluster, ProxyMode};
//!
//! let cluster = LocalCluster::start(3)?;
//! let urls = cluster.urls();
//! cluster.set_proxy(2, ProxyMode::Blackhole);
//! cluster.kill(1)?;
//! # let _ = urls;
//! # Ok::<(), redquorum::testkit::TestkitError>(())
//! ```

mod builder;
mod certs;
mod cluster;
mod error;
mod fenced;
mod history;
mod nemesis;
mod nodes;
mod oracle;
mod proxy;
mod redis_cluster;
mod resp;
mod server;
#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub mod sim;

pub use builder::{LocalClusterBuilder, REDIS_SERVER_BIN_ENV};
pub use certs::TestCertificates;
pub use cluster::LocalCluster;
pub use error::TestkitError;
pub use fenced::{FencedResource, FencedWrite, StaleToken};
pub use history::{Counter, History, Hold};
pub use nemesis::{FaultKind, Nemesis, NemesisReport, SEED_ENV};
pub use nodes::{Nodes, REDLOCK_NODES_ENV};
pub use oracle::{KeyLife, ORACLE_TOLERANCE, Oracle, Violation, quorum_life};
pub use proxy::ProxyMode;
pub use redis_cluster::LocalRedisCluster;
pub use server::NodeState;
