//! Deterministic simulation (feature `sim`): the real coordinator on a
//! paused single-thread tokio runtime, against simulated Redis nodes that
//! run the library's own Lua scripts, over simulated links with seeded
//! faults.
//!
//! One seed draws everything: the clients (3 to 5, each with a real
//! [`Config`](crate::Config): quorum, drift, timeouts, retries, fencing,
//! the restart guard with equal or mixed `max_ttl`), their operations
//! (every kind of lock call, extensions, drops, cancellations), the links'
//! latencies, the faults (nodes slow, stopped, dead, cut off, replies
//! lost, connections reset, clients paused, clock rates within the drift
//! allowance, and restarts that lose data only with the restart guard on)
//! and every random draw the library makes (lock values, jitter). The same
//! seed replays the same history, exactly.
//!
//! The checkers: no two holders overlap; fencing tokens increase per
//! resource; a live guard never claims more validity than a quorum of
//! nodes holds (the oracle, on the simulated keyspaces); `try_with_lock`
//! skips only when refusals could have ruled a quorum out; a failed
//! attempt answers within one node timeout; after healing, every lock is
//! granted, and nothing is left on any node after `shutdown()`.
//!
//! - [`node`]: one simulated Redis server;
//! - [`world`]: the nodes, the links, the faults in force;
//! - [`faults`]: the fault model and the nemesis;
//! - [`run`]: one schedule, and [`batch`] many.
//!
//! What it cannot see: redis-rs's sockets and connection management, TLS,
//! RESP framing on the wire, real processes. The real-server tests cover
//! those.
//!
//! ```no_run
//! use redquorum::testkit::sim::{Plan, run};
//!
//! let report = run(&Plan { seed: 42, ..Plan::default() });
//! assert!(report.violations.is_empty(), "{:?}", report.violations);
//! ```

mod batch;
mod batched;
mod checks;
mod ended;
pub mod faults;
mod gone;
mod handed;
mod late_vote;
#[cfg(feature = "metrics")]
mod metered;
mod net;
pub mod node;
mod oracle;
mod probes;
mod pubsub;
mod reasons;
mod report;
mod rng;
mod run;
pub(crate) mod shortening;
mod strict;
mod traced;
mod workload;
pub mod world;

pub use batch::{Summary, batch, shrink};
pub use checks::{Hold, fencing_disorder, overlaps};
pub use faults::{Fault, FaultKind};
pub use run::{Control, NODES, Plan, Report, SPAN, run};
pub use workload::ClientPlan;
