//! The steps of the lock, on N nodes: acquisition (plain, reentrant,
//! fenced), extension and release rounds, and the state they share. They
//! work on a [`Held`] and never build the public face: the
//! [`Redlock`](crate::Redlock) wraps a `Held` in a
//! [`LockGuard`](crate::LockGuard) synchronously.

pub(crate) mod acquire;
mod extend;
mod fenced;
pub(crate) mod held;
mod pending;
pub(crate) mod release;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redis::FromRedisValue;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

use crate::background::Background;
use crate::config::Config;
use crate::error::{Error, NodeReport, Result};
use crate::node::request::Request;
use crate::node::restart_guard::RestartGuard;
use crate::node::{Node, NodeResult};
use crate::notifications::Notifications;
use crate::quorum::{self, Chain, Gates, Late, Leftover, Round};

pub(crate) use held::Held;
pub(crate) use pending::Pending;

/// What every handle and guard of one [`Redlock`](crate::Redlock) shares.
/// The lock's steps (this module's children) read its fields; everything
/// else goes through [`Shared::new`] and the accessors.
pub(crate) struct Shared {
    nodes: Arc<[Arc<Node>]>,
    quorum: usize,
    config: Config,
    /// Set once the start-up checks have been run in the background.
    checked: AtomicBool,
    /// Set once the start-up checks have passed (strict checks).
    passed: AtomicBool,
    /// Release notifications for waiters in `lock()`.
    notifications: Notifications,
    /// Releases and calls in flight left running in the background.
    background: Background,
    /// Per lock key, the deletes of releases not yet sent: acquisitions
    /// follow them.
    pending: Pending,
    /// Turns of the watchdogs' extension rounds ([`WATCHDOG_ROUNDS`]).
    watchdog_rounds: Semaphore,
    /// The origin of the grid the watchdogs' extensions fall on.
    epoch: Instant,
    /// On a Redis Cluster: which master serves each node (feature
    /// `cluster`).
    #[cfg(feature = "cluster")]
    pub(crate) placement: std::sync::OnceLock<Arc<crate::cluster::placement::Placement>>,
}

/// The most extension rounds the watchdogs of one
/// [`Redlock`](crate::Redlock) have in flight at once. A burst of due
/// extensions (many locks taken together come due together) waits for
/// its turn here, before its node timeouts start, instead of queueing on
/// the connections, where the rounds at the back would time out, be
/// retried and time out again, while each of their commands still costs
/// the nodes their work.
pub(crate) const WATCHDOG_ROUNDS: usize = 256;

/// How a value round reads one node's reply (`R`) into a value (`T`), and
/// which values are a grant.
pub(crate) type Reading<R, T> = (fn(R) -> NodeResult<T>, fn(&T) -> bool);

impl Shared {
    /// The state of a new [`Redlock`](crate::Redlock): its `nodes`, each
    /// round's `quorum`, its `config`, its release `notifications` and the
    /// `background` its nodes' restart guard (if on) already runs in.
    pub(crate) fn new(
        nodes: Arc<[Arc<Node>]>,
        quorum: usize,
        config: Config,
        notifications: Notifications,
        background: Background,
    ) -> Self {
        Shared {
            nodes,
            quorum,
            config,
            checked: AtomicBool::new(false),
            passed: AtomicBool::new(false),
            notifications,
            background,
            pending: Pending::default(),
            watchdog_rounds: Semaphore::new(WATCHDOG_ROUNDS),
            epoch: Instant::now(),
            #[cfg(feature = "cluster")]
            placement: std::sync::OnceLock::new(),
        }
    }

    /// The origin of the grid the watchdogs' extensions fall on
    /// (`watchdog::on_grid`): when this `Redlock` was made.
    pub(crate) fn epoch(&self) -> Instant {
        self.epoch
    }

    /// A turn for one watchdog extension round ([`WATCHDOG_ROUNDS`]), or
    /// `None` once `deadline` has passed without one (the turns are never
    /// closed).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a turn not yet given is given to the next in line.
    pub(crate) async fn watchdog_turn(&self, deadline: Instant) -> Option<SemaphorePermit<'_>> {
        tokio::time::timeout_at(deadline, self.watchdog_rounds.acquire())
            .await
            .ok()?
            .ok()
    }

    /// Release-notification feeds running (feature `sim`: they live as
    /// long as the lock, not as a leak).
    #[cfg(feature = "sim")]
    pub(crate) fn running_feeds(&self) -> usize {
        self.notifications.running_feeds()
    }

    /// The nodes, in the order given.
    pub(crate) fn nodes(&self) -> &Arc<[Arc<Node>]> {
        &self.nodes
    }

    /// How many nodes must agree.
    pub(crate) fn quorum(&self) -> usize {
        self.quorum
    }

    /// The config in force.
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// The tasks left running in the background.
    pub(crate) fn background(&self) -> &Background {
        &self.background
    }

    /// One round of `request` on every node whose replies are values:
    /// `read` turns each reply into one, `granted` says which values are a
    /// grant. Returns the round and, per node, the value it answered before
    /// the decision. Chained as `chain` says.
    pub(crate) async fn value_round<R, T>(
        &self,
        op: &'static str,
        (leftover, chain): (Leftover, Chain<'_>),
        request: Request,
        (read, granted): Reading<R, T>,
    ) -> (Round, Vec<Option<T>>)
    where
        R: FromRedisValue + Send + 'static,
        T: Send + 'static,
    {
        // A round whose late calls are dropped sends nothing again after
        // its middle ([`Request::resent_by`]).
        let request = match chain.late {
            Late::Drop => request.resent_by(Instant::now() + self.config.node_timeout() / 2),
            Late::Keep => request,
        };
        let request = Arc::new(request);
        let call = |node: &Arc<Node>| {
            let (node, request) = (Arc::clone(node), Arc::clone(&request));
            async move { read(node.send_batched::<R>(&request).await?) }
        };
        let chained = (leftover, chain);
        quorum::fan_out(op, &self.nodes, self.quorum, chained, call, granted).await
    }

    /// A round chained after `after` whose leftovers run in the background
    /// and whose calls still in flight at its deadline are dropped.
    pub(crate) fn chain<'a>(&'a self, after: &'a Gates) -> Chain<'a> {
        Chain {
            after,
            background: &self.background,
            late: Late::Drop,
            sent: None,
            heard: None,
        }
    }

    /// Compare-and-delete of `keys` holding `value` on every node, chained
    /// after `after`: a release ([`Ending::Release`], announced where a
    /// waiter marked the lock) or the clean-up of a failed attempt
    /// ([`Ending::Cleanup`], announced nowhere). Every delete is sent, once
    /// its node's call in `after` is over ([`Late::Keep`]); `sent`, if
    /// given, opens each node's gate once its delete has been sent.
    pub(crate) async fn release_round(
        &self,
        keys: &Arc<[String]>,
        value: &Arc<str>,
        (leftover, after, sent): (Leftover, &Gates, Option<&Gates>),
        ending: Ending,
    ) -> Round {
        let request = match ending {
            Ending::Release => Request::release(keys, value),
            Ending::Cleanup { mark } => Request::cleanup(keys, value, mark),
        };
        let chain = self.chain(after).keeping_late().telling_sent(sent);
        self.vote_round("release", (leftover, chain), request).await
    }

    /// One round of `request` on every node, each reply read as a vote by
    /// the request's grant; chained as `chain` says.
    pub(crate) async fn vote_round(
        &self,
        op: &'static str,
        (leftover, chain): (Leftover, Chain<'_>),
        request: Request,
    ) -> Round {
        // A round whose late calls are dropped sends nothing again after
        // its middle ([`Request::resent_by`]).
        let request = match chain.late {
            Late::Drop => request.resent_by(Instant::now() + self.config.node_timeout() / 2),
            Late::Keep => request,
        };
        let request = Arc::new(request);
        let call = |node: &Arc<Node>| {
            let (node, request) = (Arc::clone(node), Arc::clone(&request));
            async move { node.vote(&request).await }
        };
        let chained = (leftover, chain);
        let granted: fn(&bool) -> bool = |granted| *granted;
        quorum::fan_out(op, &self.nodes, self.quorum, chained, call, granted)
            .await
            .0
    }

    /// When `needed` (some deletes about to be sent must first wait for
    /// their node's previous call, or will not be sent at once): gates that
    /// open as each node's delete is sent, each at the latest twice the
    /// node timeout from now, by when a delete has been sent. Deletes sent
    /// at once need none: a later call to the node is written after them.
    pub(crate) fn deletes_sent(&self, needed: bool) -> Option<Gates> {
        let until = tokio::time::Instant::now() + self.config.node_timeout() * 2;
        needed.then(|| Gates::closed(self.nodes.len(), until))
    }

    /// [`deletes_sent`](Self::deletes_sent) for a release of `keys`,
    /// recorded in [`Shared::pending`] so that acquisitions of the same
    /// lock follow those deletes.
    pub(crate) fn pending_deletes(&self, keys: &[String], needed: bool) -> Option<Gates> {
        let sent = self.deletes_sent(needed);
        if let Some(sent) = &sent {
            self.pending.insert(keys, sent);
        }
        sent
    }

    /// What an attempt on `keys` follows on each node's connection: the
    /// clean-up of the same `lock()`'s last failed attempt (`cleaned`)
    /// while some of its deletes are still unsent, else the deletes of a
    /// release of the same lock not yet sent ([`Shared::pending`]).
    pub(crate) fn follow(&self, keys: &[String], cleaned: &Gates) -> Gates {
        if cleaned.any_closed() {
            cleaned.clone()
        } else {
            self.pending.after(keys)
        }
    }

    /// Whether a failed attempt made as `plan` says marks the locks it lost
    /// as awaited: when its `lock()` may wait for them with release
    /// notifications.
    pub(crate) fn marks(&self, plan: &crate::options::Plan) -> bool {
        self.config.release_notifications() && (plan.retries > 0 || plan.give_up_at.is_some())
    }

    /// The restart guard, when it is on (every node has the same).
    pub(crate) fn restart_guard(&self) -> Option<&RestartGuard> {
        self.nodes
            .first()
            .and_then(|node| node.restart_guard.as_ref())
    }

    /// The key of `resource`'s lock.
    pub(crate) fn lock_key(&self, resource: &str) -> String {
        crate::keys::lock_key(self.config.key_prefix(), resource)
    }
}

/// How a lock's keys are deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The release of a held lock: announced if a waiter marked it.
    Release,
    /// The clean-up of a failed attempt: announced nowhere; with `mark`,
    /// the locks it lost to others are marked as awaited (the attempt's
    /// `lock()` waits for them with release notifications).
    Cleanup {
        /// Mark the locks held by others as awaited.
        mark: bool,
    },
}

/// The outcome of one failed attempt, kept for the error report.
pub(crate) struct Failure {
    pub(crate) reports: Vec<NodeReport>,
    pub(crate) validity_exhausted: bool,
    /// Per node, when the clean-up's delete has been sent: the next
    /// attempt of the same `lock()` follows it on that node's connection.
    pub(crate) cleaned: Gates,
}

/// Runs the start-up checks, logs the warnings, and fails on the problems
/// (`Redlock::check`).
pub(crate) async fn run_checks(shared: &Shared) -> Result<()> {
    // The background check of the first acquisition would repeat this.
    shared.checked.store(true, Ordering::Release);
    let checks = crate::check::report(&shared.nodes, shared.config.fencing()).await;
    log_warnings(shared, &checks);
    let problems = crate::check::problems(&checks, shared.quorum);
    if problems.is_empty() {
        shared.passed.store(true, Ordering::Release);
        Ok(())
    } else {
        Err(Error::Misconfigured(problems))
    }
}

/// With strict checks, before an acquisition: fails until the start-up
/// checks have passed once.
pub(crate) async fn require_checks(shared: &Shared) -> Result<()> {
    if shared.passed.load(Ordering::Acquire) {
        return Ok(());
    }
    run_checks(shared).await
}

impl Failure {
    /// Why the attempt failed, for spans and metrics: its
    /// [`Reason`](crate::Reason) as a label (`misconfigured`,
    /// `unavailable`, `validity_exhausted` or `contended`).
    pub(crate) fn kind(&self, quorum: usize) -> &'static str {
        crate::Reason::of(&self.reports, quorum, self.validity_exhausted).as_str()
    }
}

/// Runs the checks in the background on the first acquisition and logs
/// what they find; never blocks or fails the caller.
pub(crate) fn warn_once(shared: &Arc<Shared>) {
    if shared.checked.swap(true, Ordering::AcqRel) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let shared = Arc::clone(shared);
    runtime.spawn(async move {
        let checks = crate::check::report(&shared.nodes, shared.config.fencing()).await;
        log_warnings(&shared, &checks);
        crate::check::startup_log::log_errors(&checks);
    });
}

/// Logs what the start-up checks found (see [`crate::check::startup_log`]).
fn log_warnings(shared: &Shared, checks: &[crate::NodeCheck]) {
    let guard = shared.config.restart_guard().is_some();
    crate::check::startup_log::log_warnings(checks, guard, shared.config.fencing());
}
