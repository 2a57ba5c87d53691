//! # redquorum
//!
//! A distributed lock that survives the loss of Redis nodes: the Redlock
//! algorithm over N independent Redis masters, done carefully.
//!
//! ## Which call do I use
//!
//! | I want to | call |
//! |---|---|
//! | take a lock, waiting (retries, woken by releases) | [`Redlock::lock`] |
//! | take it only if free now (a cron job every host starts) | [`Redlock::try_lock`], or [`Redlock::try_with_lock`] around a job |
//! | run a job under a lock kept alive, cancelled if it is lost | [`Redlock::with_lock`] |
//! | wait at most a deadline, or other per-call settings | [`Redlock::lock_with`] and [`LockOptions`] |
//! | several resources at once, all or none | any of these with a list of names ([`Resources`]) |
//! | take it again while the same owner holds it | [`Redlock::lock_with`] and [`LockOptions::owner`] |
//! | run a job under a lock taken with options | [`Redlock::lock_with`], then [`LockGuard::run`] |
//! | a token the protected store can check against stale holders | [`Config::with_fencing`], [`LockGuard::fencing_token`] |
//! | keep a held lock longer | [`LockGuard::extend`], or [`LockGuard::auto_extend`] and [`LockGuard::lost`] |
//! | give it back (and know whether exclusivity held) | [`LockGuard::release`] |
//! | survive node restarts without `appendfsync always` | [`Config::with_restart_guard`], [`Redlock::init_nodes`] |
//! | check the nodes at boot | [`Redlock::check`], [`Redlock::check_report`] |
//! | see who holds a lock | [`Redlock::inspect`] |
//! | let background releases finish before the runtime ends | [`Redlock::shutdown`] |
//! | tell contention from an outage in an error | [`Error::NotAcquired`], [`Attempts`] |
//! | test against local nodes with faults | `testkit::LocalCluster` (feature `testkit`) |
//!
//! A [`Redlock`] sends `SET key value NX PX ttl` to every node at once, the
//! round bounded by the node timeout, and decides as soon as a quorum
//! (`N/2 + 1` by default) has granted the lock, or as soon as a quorum has
//! become impossible: a slow or hung node never holds up the answer. The
//! lock is then valid for the TTL minus the time the round took minus a
//! clock-drift allowance, all measured on a monotonic clock. A failed
//! attempt answers at its decision and is released on every node in the
//! background (each node's delete is sent before the next attempt's call
//! to that node), and the next attempt has a fresh random value.
//!
//! ```no_run
//! use std::time::Duration;
//! use redquorum::{Config, Redlock};
//!
//! # async fn run() -> redquorum::Result<()> {
//! let redlock = Redlock::with_config(
//!     [
//!         "redis://10.0.0.1:6379/",
//!         "redis://10.0.0.2:6379/",
//!         "redis://10.0.0.3:6379/",
//!         "redis://10.0.0.4:6379/",
//!         "redis://10.0.0.5:6379/",
//!     ],
//!     Config::default().with_node_timeout(Duration::from_millis(50)),
//! )?;
//! let mut guard = redlock.lock("orders:nightly-export", Duration::from_secs(30)).await?;
//! // Exclusive until guard.valid_until(); extend for longer work.
//! guard.extend(Duration::from_secs(30)).await?;
//! guard.release().await?; // Err(Expired) would mean exclusivity was not kept
//! # Ok(()) }
//! ```
//!
//! ## Guarantees
//!
//! - Mutual exclusion until [`LockGuard::valid_until`], as long as the
//!   nodes' clocks advance at a rate within the drift allowance, a node that
//!   forgets keys does not vote before they would have expired (turn on the
//!   [restart guard](#restart-guard), recommended for any node without
//!   `appendfsync always`; or run the nodes with `appendfsync always`; or
//!   restart a node only after the longest TTL has passed; in all cases
//!   keep `maxmemory-policy noeviction`), and the nodes are independent
//!   masters.
//! - No call ever deletes or extends a key that holds another owner's value.
//! - Extending never re-creates a key that has gone (unless
//!   `reseed_restarted_nodes` is on, and then only once a quorum still holds it).
//! - At every moment a guard's [`LockGuard::remaining`] is at most the time
//!   until the quorum-th longest-lived copy of its key expires on the
//!   nodes: extension rounds of one lock (the watchdog's and manual ones)
//!   run one at a time and reach each node in the order they started.
//! - Nothing is left behind by a failed or cancelled acquisition, or by a
//!   guard dropped without [`LockGuard::release`], provided the runtime
//!   runs until the background release has finished:
//!   [`Redlock::shutdown`] waits for it. A runtime that ends first drops
//!   it, and the keys block the resource until their TTL.
//! - Validity is measured on the monotonic clock, which stops while the
//!   client host is suspended: a host resumed from suspend is a paused
//!   process (see the caveats).
//!
//! ## Caveats
//!
//! Redlock is not a consensus system. A process paused (GC, swap, SIGSTOP)
//! past its validity can go on acting as holder; check
//! [`LockGuard::remaining`] before each side effect, and prefer resources
//! that accept fencing tokens when correctness depends on it.
//!
//! ## Fencing tokens
//!
//! With [`Config::with_fencing`], every acquisition also issues a token
//! ([`LockGuard::fencing_token`]) that strictly increases across successful
//! acquisitions of the resource, at the cost of one more round trip: the
//! acquire script returns each granting node's counter, and the token,
//! their maximum plus one, is written back to the nodes while the lock is
//! still ours. It is issued only once a quorum took the write-back and
//! validity is left. Pass the token to the protected resource and have it
//! refuse tokens lower than the highest it has seen: then even a holder
//! paused past its validity cannot do harm. `testkit::FencedResource` is a
//! reference implementation of such a resource.
//!
//! Monotonicity rests on every two quorums sharing a node that remembers
//! its counters. A node that forgets them (a restart without
//! `appendonly yes` and `appendfsync always`, `FLUSHALL`, eviction under
//! a `maxmemory-policy` other than `noeviction`) can let a token go
//! backwards. Counters live at `{prefix}fence:{resource}` and never expire.
//!
//! ## Restart guard
//!
//! With [`Config::with_restart_guard`], a node that restarted (under any
//! persistence mode), failed over, was flushed or is new refuses to vote,
//! with [`NodeOutcome::Quarantined`], until every lock it may have
//! forgotten has expired: each vote script first compares the node's live
//! `run_id` (`INFO server`) and `master_replid` (`INFO replication`: a
//! failover and failback keep the first, not the second) with a record the
//! node keeps without TTL, `{prefix}restart-guard:node`. The quarantine is
//! timed on the node's wall clock: a clock stepped forward after a reboot
//! shortens it, so start Redis after time sync. No extra round trip, no write per
//! acquisition. A TTL above `max_ttl` is then an [`Error::InvalidArgument`].
//! The quarantine is a deployment constant: a node that keeps another one
//! than a client announces refuses it ([`NodeOutcome::QuarantineMismatch`],
//! not retried, and [`Redlock::check`] fails on it), since a restarted node
//! learns its quarantine from its first voter.
//! [`Redlock::init_nodes`] lets a new cluster vote at once; it must never
//! be inferred from finding no lock key. With fencing, a node counts in the
//! fenced read only once its counters are known intact (written back in
//! its current trust period, vouched for, or marked by `init_nodes`): after
//! restarts of more than N − quorum nodes, clean ones included, a resource's
//! fenced acquisitions fail with [`NodeOutcome::CountersUnknown`] (not
//! retried) until [`Redlock::vouch_fence_counters`] vouches for counters
//! that survived.
//!
//! ```no_run
//! use std::time::Duration;
//! use redquorum::{Config, NodeOutcome, Redlock};
//!
//! # async fn run() -> redquorum::Result<()> {
//! let config = Config::default().with_restart_guard(Duration::from_secs(30));
//! let redlock = Redlock::with_config(["redis://a/", "redis://b/", "redis://c/"], config)?;
//! match redlock.try_lock("jobs", Duration::from_secs(30)).await {
//!     Ok(guard) => guard.release().await?,
//!     Err(redquorum::Error::NotAcquired(why)) => {
//!         for report in why.nodes() {
//!             if let NodeOutcome::Quarantined { left } = report.outcome() {
//!                 eprintln!("{} votes again in {left:?}", report.node());
//!             }
//!         }
//!     }
//!     Err(e) => return Err(e),
//! }
//! # Ok(()) }
//! ```
//!
//! ## Long work
//!
//! [`LockGuard::auto_extend`] starts a watchdog that extends the lock when
//! a share of the TTL is left ([`Config::with_extend_at`]), retries failed
//! extensions while validity remains, and marks the lock lost when it runs
//! out; [`LockGuard::lost`] resolves then. [`Redlock::with_lock`] does all
//! of it around a job and cancels the job the moment the lock is lost,
//! returning [`Error::Lost`].
//!
//! ## Waiting
//!
//! [`Redlock::lock`] retries after the retry delay, but wakes at once when
//! the holder releases ([`Config::with_release_notifications`], on by
//! default). A `lock()` that finds the lock held subscribes to the
//! resource's channel, `{prefix}released:{resource}`, over one pub/sub
//! connection per node, opened on the first wait and shared by all waiters
//! of the `Redlock`; the clean-up of its failed attempt marks the holder's
//! value as awaited (a `+` appended, which every script reads as the same
//! holder). A release publishes on the channel only when it deletes a
//! marked value: releases nobody waits for cost no `PUBLISH`. One waiter is
//! woken per release (in arrival order), at the first node's announcement;
//! its next attempt sends its `SET` to each node as soon as that node has
//! announced the release (to all once a quorum has, and to a silent node
//! half a node timeout later, or at the end of the pause it was in). The others keep their place for later
//! releases. The retry delay stays the bound on
//! every wait: a missed message, or a node that cannot be reached or
//! refuses `SUBSCRIBE`, only means waiting as without notifications, and
//! `retries` still counts the timed pauses. [`Redlock::try_lock`] never
//! subscribes.
//!
//! ## Reentrant holds
//!
//! [`LockOptions::owner`] lets one caller-chosen owner take a lock it
//! already holds; the lock is free for others once every hold is released.
//! A reentrant lock and a plain lock of the same resource exclude each
//! other.
//!
//! ## TLS
//!
//! With the feature `tls-rustls` (pure Rust) or `tls-native-tls` (the
//! platform's TLS library: OpenSSL on Linux), nodes may be `rediss://`
//! URLs. The node's certificate is checked against the system's trust
//! store and its host name, unless `Config::with_tls_certificates` gives
//! the CA to trust instead, and a client certificate for nodes that
//! require one (`tls-auth-clients yes`):
//!
//! ```no_run
//! # #[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use redquorum::redis::{ClientTlsConfig, TlsCertificates};
//! use redquorum::{Config, Redlock};
//!
//! let certificates = TlsCertificates {
//!     root_cert: Some(std::fs::read("ca.crt")?),
//!     client_tls: Some(ClientTlsConfig {
//!         client_cert: std::fs::read("client.crt")?,
//!         client_key: std::fs::read("client.key")?,
//!     }),
//! };
//! let redlock = Redlock::with_config(
//!     [
//!         "rediss://:secret@10.0.0.1:6380/",
//!         "rediss://:secret@10.0.0.2:6380/",
//!         "rediss://:secret@10.0.0.3:6380/",
//!     ],
//!     Config::default().with_tls_certificates(certificates),
//! )?;
//! # let _ = redlock; Ok(()) }
//! # #[cfg(not(any(feature = "tls-rustls", feature = "tls-native-tls")))]
//! # fn main() {}
//! ```
//!
//! Certificates per node: pass nodes as [`redis::ConnectionInfo`]s built
//! with `redis::Client::build_with_tls(url, certificates)?.get_connection_info().clone()`;
//! they keep their own over the config's. `rediss://host:port/#insecure`
//! skips every certificate check (tests only); under rustls it needs the
//! feature `tls-rustls-insecure`, and construction says so. In a build
//! without TLS, a `rediss://` node is an [`Error::Config`] naming the
//! features to enable.
//!
//! Under rustls, redquorum installs ring's crypto provider as the process
//! default when the first `Redlock` with a `rediss://` node is built,
//! unless the process has installed one before (install yours, e.g.
//! aws-lc-rs, before building the `Redlock` if you want it). With both
//! features on, redis uses rustls.
//!
//! Opening a TLS connection takes more round trips than a command. Each
//! call stays bounded by the node timeout, but a connection still opening
//! when a call gives up goes on in the background, up to
//! [`Config::with_connect_timeout`] (1 s by default), and
//! [`Redlock::check`] waits that long: a distant node still gets its
//! connection, and a refused certificate is reported as such.
//! ## Tracing
//!
//! Every operation is a span at INFO, with OpenTelemetry's field names
//! where one exists, so that a subscriber exporting to OpenTelemetry
//! (`tracing-opentelemetry`) gets structured traces with no OpenTelemetry
//! dependency here:
//!
//! | span | when |
//! |---|---|
//! | `redquorum.acquire` | one acquisition attempt (each retry is a span of its own) |
//! | `redquorum.extend` | one extension round, yours or the watchdog's |
//! | `redquorum.release` | the release of a held lock (`redquorum.dropped` when by `Drop`) |
//! | `redquorum.check` | one run of the start-up checks |
//! | `redquorum.cleanup` | at DEBUG, a failed attempt's clean-up, run in the background after the attempt answered (a root span that follows from the attempt's) |
//!
//! Their fields: `db.system.name` (`redis`), `db.operation.name`,
//! `redquorum.resource`, `redquorum.attempt`, `redquorum.quorum`,
//! `redquorum.granted` and `redquorum.refused` (votes of the deciding
//! round), `redquorum.outcome` (`acquired`, `contended`, `unavailable`, `misconfigured`,
//! `validity_exhausted`, `extended`, `gone`, `expired`, `not_confirmed`,
//! `released`, `unconfirmed`, `ok`, `problems`), `error.type` (the outcome, when it is a
//! failure) and `redquorum.elapsed_ms`. Inside them, each node's answer is
//! an event at DEBUG with `server.address`, `server.port`,
//! `db.operation.name`, `redquorum.outcome`, `error.type` (`timeout`,
//! `quarantined` (the restart guard refused the vote), or the server's
//! error code) and `redquorum.elapsed_ms`. Nothing routine is
//! logged at WARN: a lock at risk (an extension failed, validity left) or
//! lost, and what needs a person (the start-up checks' findings, a guard
//! with no runtime to release it). Lock values and credentials are never
//! recorded; nodes are named by address.
//!
//! How the source is laid out, for contributors, is in `ARCHITECTURE.md`
//! in the repository.
//!
//! ## Features
//!
//! - `testkit`: `LocalCluster`, which runs local `redis-server` processes
//!   and injects faults (kill, restart, pause, a TCP proxy with latency or
//!   blackhole), for tests, demos and benches.
//! - `cli`: the `redquorum` command-line tool (`run` a command under a lock,
//!   `check` the nodes, `status` of a lock).
//! - `tls-rustls`: `rediss://` nodes over rustls (ring as crypto
//!   provider), trusting the system's roots;
//!   `tls-rustls-webpki-roots`: trust the Mozilla roots compiled in
//!   instead; `tls-rustls-insecure`: allow `#insecure` URLs.
//! - `tls-native-tls`: `rediss://` nodes over the platform's TLS library
//!   (building it on Linux needs OpenSSL's headers and `pkg-config`).
//! - `metrics`: acquisition, wait, hold and extension metrics, lost locks,
//!   and per-node votes and latency through the `metrics` facade; the
//!   [`metrics`] module has the table.
#![deny(missing_docs)]
#![deny(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

// Floor 0, vocabulary: no I/O.
mod config;
#[cfg(feature = "sim")]
mod controls;
mod env;
mod error;
mod gates;
mod keys;
pub mod metrics;
mod options;
mod resources;
mod rng;
mod spans;
mod ttl;
mod value;
// Floor 1, one node.
mod node;
// Floor 2, N nodes.
mod background;
mod check;
#[cfg(feature = "cluster")]
mod cluster;
mod inspect;
mod notifications;
mod quorum;
// Floor 3, the steps of the lock.
mod lock;
// Floor 4, the public faces.
mod guard;
mod redlock;
mod watchdog;

#[cfg(feature = "testkit")]
#[cfg_attr(docsrs, doc(cfg(feature = "testkit")))]
pub mod testkit;

/// The README's Rust examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

pub use config::{
    Config, DEFAULT_CONNECT_TIMEOUT, DEFAULT_DRIFT_FACTOR, DEFAULT_DRIFT_PADDING,
    DEFAULT_EXTEND_AT, DEFAULT_KEY_PREFIX, DEFAULT_NODE_TIMEOUT, DEFAULT_RETRY_COUNT,
    DEFAULT_RETRY_DELAY, DEFAULT_RETRY_JITTER, MAX_TTL, MAX_WAIT,
};
pub use env::{DEPRECATED_NODES_ENV, NODES_ENV, split_node_list};
pub use error::failure::{FailureKind, NodeFailure};
pub use error::node_check::NodeCheck;
pub use error::problem::NodeProblem;
pub use error::{Attempts, Error, NodeOutcome, NodeReport, Reason, Result};
pub use guard::LockGuard;
pub use inspect::{Inspection, NodeHold, NodeView};
pub use options::{LockOptions, Wait};
/// The `redis` crate redquorum is built on (major version 1): name its
/// types (`redis::ConnectionInfo`, `redis::IntoConnectionInfo`, TLS
/// settings) through this re-export, so that they always match the version
/// redquorum links.
pub use redis;
pub use redlock::{FenceCounters, Redlock};
pub use resources::Resources;
