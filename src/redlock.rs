//! [`Redlock`]: the coordinator; acquisition with retries.

use std::sync::Arc;
use std::time::Duration;

use redis::IntoConnectionInfo;
use tokio::time::Instant;

use crate::background::Background;
use crate::cleanup::ReleaseOnDrop;
use crate::config::Config;
use crate::error::{Attempts, Error, NodeReport, Result};
use crate::guard::{Held, LockGuard};
use crate::node::{Node, NodeResult};
use crate::quorum::{self, Chain, Decision, Gate, Leftover, Round};
use crate::request::{self, Ttl};
use crate::{fencing, reentrant, value};

/// What every handle and guard of one [`Redlock`] shares.
pub(crate) struct Shared {
    pub(crate) nodes: Vec<Arc<Node>>,
    pub(crate) quorum: usize,
    pub(crate) config: Config,
    /// Set once the start-up checks have been run in the background.
    pub(crate) checked: std::sync::atomic::AtomicBool,
    /// Release notifications for waiters in `lock()`.
    pub(crate) handoff: crate::handoff::Handoff,
    /// Releases and calls in flight left running in the background.
    pub(crate) background: Background,
}

impl Shared {
    /// One round of `call` on every node, decided by this lock's quorum.
    /// Each node's call is sent once that node's call in `after` is over.
    pub(crate) async fn fan_out<F, Fut>(
        &self,
        op: &'static str,
        leftover: Leftover,
        after: &[Gate],
        call: F,
    ) -> Round
    where
        F: FnMut(Arc<Node>) -> Fut,
        Fut: Future<Output = NodeResult<bool>> + Send + 'static,
    {
        let chain = self.chain(after);
        quorum::fan_out(op, &self.nodes, self.quorum, leftover, chain, call).await
    }

    /// A round chained after `after` whose leftovers run in the background.
    pub(crate) fn chain<'a>(&'a self, after: &'a [Gate]) -> Chain<'a> {
        Chain {
            after,
            background: &self.background,
        }
    }

    /// Compare-and-delete of `keys` holding `value` on every node; with
    /// `notify` (and release notifications on), each deleted key is
    /// announced to the waiters of its resource. Chained after `after`.
    pub(crate) async fn release_round(
        &self,
        keys: &Arc<[String]>,
        value: &Arc<str>,
        (leftover, after): (Leftover, &[Gate]),
        notify: bool,
    ) -> Round {
        let channels: Arc<[String]> = if notify && self.config.release_notifications() {
            let prefix = self.config.key_prefix();
            keys.iter()
                .map(|key| crate::handoff::channel_of_key(prefix, key))
                .collect()
        } else {
            Arc::new([])
        };
        self.fan_out("release", leftover, after, |node| {
            let (keys, value, channels) =
                (Arc::clone(keys), Arc::clone(value), Arc::clone(&channels));
            async move { node.release(&keys, &value, &channels).await }
        })
        .await
    }

    /// The key of `resource`'s lock.
    fn lock_key(&self, resource: &str) -> String {
        crate::keys::lock_key(self.config.key_prefix(), resource)
    }
}

/// The outcome of one failed attempt, kept for the error report.
pub(crate) struct Failure {
    pub(crate) reports: Vec<NodeReport>,
    pub(crate) validity_exhausted: bool,
}

/// A distributed lock over N independent Redis masters (Redlock).
///
/// Cheap to clone (an `Arc` inside) and `Send + Sync`: build one at start-up
/// and share it. Construction validates everything and does no I/O; each
/// node's connection opens on first use and reopens by itself after a
/// failure, so nodes that are down at start are simply failing votes until
/// they come back. Connections live on the tokio runtime that first uses them.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redquorum::Redlock;
///
/// # async fn run() -> redquorum::Result<()> {
/// let redlock = Redlock::new([
///     "redis://127.0.0.1:7001/",
///     "redis://127.0.0.1:7002/",
///     "redis://127.0.0.1:7003/",
///     "redis://127.0.0.1:7004/",
///     "redis://127.0.0.1:7005/",
/// ])?;
/// assert_eq!(redlock.quorum(), 3);
/// let guard = redlock.lock("nightly-report", Duration::from_secs(30)).await?;
/// // ... exclusive work, finished before guard.valid_until() ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Redlock {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Redlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nodes: Vec<&str> = self.shared.nodes.iter().map(|n| n.name()).collect();
        f.debug_struct("Redlock")
            .field("nodes", &nodes)
            .field("quorum", &self.shared.quorum)
            .field("config", &self.shared.config)
            .finish()
    }
}

impl Redlock {
    /// A lock over `nodes` with the default [`Config`].
    ///
    /// Nodes are URLs (`redis://`, `redis+unix://`; `rediss://` with a redis
    /// TLS feature) or anything else `redis` turns into connection info.
    /// Use independent masters: not replicas of each other, not a cluster.
    ///
    /// ```
    /// let redlock = redquorum::Redlock::new(["redis://127.0.0.1:7001/", "redis://127.0.0.1:7002/", "redis://127.0.0.1:7003/"])?;
    /// assert_eq!(redlock.node_count(), 3);
    /// # Ok::<(), redquorum::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for no nodes, an unusable URL or the same node twice.
    pub fn new<I>(nodes: I) -> Result<Redlock>
    where
        I: IntoIterator,
        I::Item: IntoConnectionInfo,
    {
        Redlock::with_config(nodes, Config::default())
    }

    /// A lock over `nodes` tuned by `config`.
    ///
    /// ```
    /// use redquorum::{Config, Error, Redlock};
    ///
    /// let nodes = ["redis://127.0.0.1:7001/", "redis://127.0.0.1:7002/", "redis://127.0.0.1:7003/"];
    /// let redlock = Redlock::with_config(nodes, Config::default().with_quorum(3))?;
    /// assert_eq!(redlock.quorum(), 3);
    ///
    /// let err = Redlock::with_config(nodes, Config::default().with_quorum(1)).unwrap_err();
    /// assert!(matches!(err, Error::Config(_)));
    /// # Ok::<(), redquorum::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Config`], naming the bad value, for no nodes, an unusable
    /// URL, the same node twice, or a config value out of range.
    pub fn with_config<I>(nodes: I, config: Config) -> Result<Redlock>
    where
        I: IntoIterator,
        I::Item: IntoConnectionInfo,
    {
        let mut parsed: Vec<Arc<Node>> = Vec::new();
        let mut servers = std::collections::HashMap::new();
        for (index, info) in nodes.into_iter().enumerate() {
            let node = Node::new(index, info, config.node_timeout())?;
            if let Some(first) = servers.insert(node.server().to_owned(), index) {
                return Err(Error::Config(format!(
                    "nodes {first} and {index} are the same server ({}), whatever their \
                     databases: each vote must come from an independent Redis master",
                    node.server()
                )));
            }
            parsed.push(Arc::new(node));
        }
        if parsed.is_empty() {
            return Err(Error::Config(
                "no nodes given: pass the URLs of independent Redis masters (5 is typical)"
                    .to_owned(),
            ));
        }
        let quorum = config.validate(parsed.len())?;
        let handoff = crate::handoff::Handoff::new(
            parsed.iter().map(|n| n.client().clone()).collect(),
            config.node_timeout(),
        );
        Ok(Redlock {
            shared: Arc::new(Shared {
                nodes: parsed,
                quorum,
                config,
                checked: std::sync::atomic::AtomicBool::new(false),
                handoff,
                background: Background::default(),
            }),
        })
    }

    /// How many nodes must agree.
    ///
    /// ```
    /// let redlock = redquorum::Redlock::new(["redis://a:6379", "redis://b:6379", "redis://c:6379"])?;
    /// assert_eq!(redlock.quorum(), 2);
    /// # Ok::<(), redquorum::Error>(())
    /// ```
    pub fn quorum(&self) -> usize {
        self.shared.quorum
    }

    /// How many nodes vote.
    ///
    /// ```
    /// let redlock = redquorum::Redlock::new(["redis://a:6379", "redis://b:6379", "redis://c:6379"])?;
    /// assert_eq!(redlock.node_count(), 3);
    /// # Ok::<(), redquorum::Error>(())
    /// ```
    pub fn node_count(&self) -> usize {
        self.shared.nodes.len()
    }

    /// The config in force.
    ///
    /// ```
    /// let redlock = redquorum::Redlock::new(["redis://a:6379"])?;
    /// assert_eq!(redlock.config().retry_count(), 10);
    /// # Ok::<(), redquorum::Error>(())
    /// ```
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The Redis key that holds `resource`'s lock on every node,
    /// `{key_prefix}lock:{resource}`: for inspecting a lock (`GET`, `PTTL`)
    /// with other tools. Never write to it.
    ///
    /// ```
    /// let redlock = redquorum::Redlock::new(["redis://a:6379"])?;
    /// assert_eq!(redlock.lock_key("jobs"), "redquorum:lock:jobs");
    /// # Ok::<(), redquorum::Error>(())
    /// ```
    pub fn lock_key(&self, resource: &str) -> String {
        self.shared.lock_key(resource)
    }

    /// Makes one attempt to lock `resource` for `ttl`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redquorum::{Error, Redlock};
    ///
    /// # async fn run(redlock: Redlock) -> redquorum::Result<()> {
    /// match redlock.try_lock("cron:cleanup", Duration::from_secs(60)).await {
    ///     Ok(guard) => guard.release().await?,
    ///     Err(Error::NotAcquired(why)) if why.is_contended() => println!("someone else runs it"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidArgument`] for an empty resource or an unusable TTL.
    /// - [`Error::NotAcquired`] when no quorum granted the lock with validity
    ///   to spare; it tells each node's answer. Whatever the attempt set is
    ///   released before this returns.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future mid-attempt releases, in a spawned task, every
    /// key the attempt may have set: nothing is left to block others until
    /// the TTL.
    pub async fn try_lock(&self, resource: &str, ttl: Duration) -> Result<LockGuard> {
        self.acquire(&[resource], ttl, 0).await
    }

    /// Locks `resource` for `ttl`, trying again (after `retry_delay` plus or
    /// minus `retry_jitter`) up to `retry_count` times and never past
    /// `acquire_timeout`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.lock("account:7", Duration::from_secs(5)).await?;
    /// println!("exclusive for {:?}", guard.remaining());
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_lock`](Self::try_lock); [`Error::NotAcquired`] reports the
    /// number of attempts and the node answers of the last one.
    ///
    /// # Cancel safety
    ///
    /// As [`try_lock`](Self::try_lock): a dropped future leaves no key behind.
    pub async fn lock(&self, resource: &str, ttl: Duration) -> Result<LockGuard> {
        self.acquire(&[resource], ttl, self.shared.config.retry_count())
            .await
    }

    /// Locks every resource in `resources` at once, with the retries of
    /// [`lock`](Self::lock). On each node the keys are taken by one script
    /// (all free, then all set), so two callers locking overlapping sets can
    /// never each hold a part. Release and extend act on the whole set;
    /// duplicate names count once. With fencing on, each resource gets its
    /// own token ([`LockGuard::fencing_tokens`]).
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.lock_many(&["account:1", "account:2"], Duration::from_secs(5)).await?;
    /// // ... move money between the two accounts ...
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); an empty list is [`Error::InvalidArgument`].
    ///
    /// # Cancel safety
    ///
    /// As [`try_lock`](Self::try_lock).
    pub async fn lock_many(&self, resources: &[&str], ttl: Duration) -> Result<LockGuard> {
        self.acquire(resources, ttl, self.shared.config.retry_count())
            .await
    }

    /// One attempt of [`lock_many`](Self::lock_many).
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.try_lock_many(&["a", "b"], std::time::Duration::from_secs(5)).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_lock`](Self::try_lock).
    ///
    /// # Cancel safety
    ///
    /// As [`try_lock`](Self::try_lock).
    pub async fn try_lock_many(&self, resources: &[&str], ttl: Duration) -> Result<LockGuard> {
        self.acquire(resources, ttl, 0).await
    }

    /// Locks `resource` for `owner`, a caller-chosen identity, with the
    /// retries of [`lock`](Self::lock); the same owner may take it again
    /// while holding it. Each guard is one hold: the lock is free for
    /// others once every hold of `owner` is released (or has expired).
    ///
    /// On each node one script takes a free lock for `owner`, or adds a
    /// hold when `owner` already has it (raising the TTL to at least `ttl`),
    /// or refuses. Quorum, validity, retries and clean-up after a failed
    /// attempt are those of [`lock`](Self::lock). A reentrant lock and a
    /// plain lock of the same resource exclude each other. Reentrant holds
    /// carry no fencing token, even with fencing on.
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let outer = redlock.lock_reentrant("ledger", "job-17", Duration::from_secs(10)).await?;
    /// let inner = redlock.lock_reentrant("ledger", "job-17", Duration::from_secs(10)).await?;
    /// inner.release().await?; // still held by job-17
    /// outer.release().await?; // now free
    /// # Ok(()) }
    /// ```
    ///
    /// Holds are counted per node. Should a release not reach a node (it
    /// is down or cut off), that node keeps the hold until the key's TTL
    /// runs out, and its count stays above the others': it votes against
    /// other owners until then. The count of a node never drifts from
    /// failed or cancelled acquisitions, since each hold has its own id.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); an empty `owner` is [`Error::InvalidArgument`].
    ///
    /// # Cancel safety
    ///
    /// As [`try_lock`](Self::try_lock): a dropped future removes the hold
    /// it may have added, and only that one.
    pub async fn lock_reentrant(
        &self,
        resource: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<LockGuard> {
        let retries = self.shared.config.retry_count();
        self.acquire_as(&[resource], ttl, retries, Some(owner))
            .await
    }

    /// One attempt of [`lock_reentrant`](Self::lock_reentrant).
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let ttl = std::time::Duration::from_secs(5);
    /// let guard = redlock.try_lock_reentrant("ledger", "job-17", ttl).await?;
    /// assert!(redlock.try_lock_reentrant("ledger", "job-18", ttl).await.is_err());
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`lock_reentrant`](Self::lock_reentrant).
    ///
    /// # Cancel safety
    ///
    /// As [`lock_reentrant`](Self::lock_reentrant).
    pub async fn try_lock_reentrant(
        &self,
        resource: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<LockGuard> {
        self.acquire_as(&[resource], ttl, 0, Some(owner)).await
    }

    /// Start-up checks, to call at boot: every node answers as a master
    /// (`ROLE`), accepts our credentials, has `maxmemory-policy noeviction`,
    /// is not a Redis Cluster node, and no two URLs lead to the same server
    /// (`run_id`). Unreachable nodes fail the check only when fewer than a
    /// quorum answer. The first acquisition runs the same checks in the
    /// background and logs problems with `tracing::warn!`.
    ///
    /// ```no_run
    /// use redquorum::{Error, Redlock};
    ///
    /// # async fn run(redlock: Redlock) {
    /// match redlock.check().await {
    ///     Ok(()) => {}
    ///     Err(Error::Misconfigured(problems)) => {
    ///         for p in problems { eprintln!("{p}"); }
    ///     }
    ///     Err(e) => eprintln!("{e}"),
    /// }
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Misconfigured`] with one [`NodeProblem`](crate::NodeProblem)
    /// per problem found, each naming its node.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn check(&self) -> Result<()> {
        let checks = crate::check::report(&self.shared).await;
        let problems = crate::check::problems(&checks, self.shared.quorum);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Misconfigured(problems))
        }
    }

    /// Per-node facts from the start-up checks (reachable, role, eviction
    /// policy, `run_id`, latency, problems), in node order, for tools that
    /// print a table. Never fails: an unreachable node is a row saying so.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) {
    /// let rows = redlock.check_report().await;
    /// assert_eq!(rows.len(), redlock.node_count());
    /// # }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn check_report(&self) -> Vec<crate::NodeCheck> {
        crate::check::report(&self.shared).await
    }

    /// Waits until every release and clean-up this `Redlock` (and its
    /// clones) runs in the background has finished: the releases of guards
    /// dropped without [`LockGuard::release`], of cancelled `lock()` calls,
    /// and the calls to slow nodes still in flight after a round was
    /// decided. Each of them is bounded by the node timeout (twice it for a
    /// call chained behind a node's previous call). The `Redlock` stays
    /// usable; work started meanwhile is waited for too. Live guards, their
    /// watchdogs and waiting `lock()` calls are not waited for.
    ///
    /// Call it before the runtime ends (the end of `#[tokio::main]`, a
    /// sync wrapper's `block_on`): a runtime that shuts down drops the
    /// spawned releases, and the keys they would have deleted then block
    /// the resource until their TTL.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> redquorum::Result<()> {
    /// let guard = redlock.lock("job", std::time::Duration::from_secs(30)).await?;
    /// drop(guard); // released in a background task...
    /// redlock.shutdown().await; // ...which has finished now
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn shutdown(&self) {
        self.shared.background.idle().await;
    }

    async fn acquire(&self, resources: &[&str], ttl: Duration, retries: u32) -> Result<LockGuard> {
        self.acquire_as(resources, ttl, retries, None).await
    }

    /// Acquires with retries; `owner` makes it a reentrant hold.
    async fn acquire_as(
        &self,
        resources: &[&str],
        ttl: Duration,
        retries: u32,
        owner: Option<&str>,
    ) -> Result<LockGuard> {
        request::check_resources(resources)?;
        if let Some(owner) = owner {
            reentrant::check_owner(owner)?;
        }
        let ttl = Ttl::new(ttl, &self.shared.config)?;
        let names = request::unique_names(resources);
        let keys: Arc<[String]> = names.iter().map(|r| self.shared.lock_key(r)).collect();
        let resources: Arc<[String]> = names.into();
        let config = &self.shared.config;
        let give_up_at = config.acquire_timeout().map(|t| Instant::now() + t);
        let mut attempt = 0u32;
        // Timed pauses taken so far, and the end of the current one while
        // attempts made on a release notification fail within it.
        let mut pauses = 0u32;
        let mut pause_ends: Option<Instant> = None;
        let mut interest: Option<crate::handoff::Interest> = None;
        loop {
            attempt += 1;
            tracing::debug!(resource = %resources[0], attempt, "acquire attempt");
            let outcome = match owner {
                Some(owner) => self.attempt(&resources, &keys, &ttl, Some(owner)).await,
                None if config.fencing() => {
                    fencing::attempt(&self.shared, &resources, &keys, &ttl).await
                }
                None => self.attempt(&resources, &keys, &ttl, None).await,
            };
            // After the first attempt, so that the checks never slow it down.
            crate::check::warn_once(&self.shared);
            let failure = match outcome {
                Ok(guard) => return Ok(guard),
                Err(failure) => failure,
            };
            let now = Instant::now();
            let wake_at = match pause_ends {
                Some(at) if at > now => at,
                _ => {
                    pauses += 1;
                    now + quorum::retry_pause(
                        config.retry_delay(),
                        config.retry_jitter(),
                        rand::random::<f64>(),
                    )
                }
            };
            let out_of_time = give_up_at.is_some_and(|at| wake_at >= at);
            if pauses > retries || out_of_time {
                let attempts =
                    Attempts::new(&resources[0], attempt, self.shared.quorum, failure.reports)
                        .with_validity_exhausted(failure.validity_exhausted);
                tracing::debug!(%attempts, "lock not acquired");
                return Err(Error::NotAcquired(Box::new(attempts)));
            }
            // Only a lock held by someone gets released: an attempt that
            // met no holder (nodes down) has nothing to wait for.
            let contended = failure
                .reports
                .iter()
                .any(|r| matches!(r.outcome(), crate::error::NodeOutcome::Held));
            if interest.is_none() && contended && config.release_notifications() {
                let channels = resources
                    .iter()
                    .map(|r| crate::handoff::channel(config.key_prefix(), r))
                    .collect();
                interest = Some(self.shared.handoff.interest(channels));
            }
            let woken = match &interest {
                Some(interest) => interest.wait_until(wake_at).await,
                None => {
                    tokio::time::sleep_until(wake_at).await;
                    false
                }
            };
            pause_ends = woken.then_some(wake_at);
        }
    }

    /// One attempt with a fresh value; on failure everything is released.
    async fn attempt(
        &self,
        resources: &Arc<[String]>,
        keys: &Arc<[String]>,
        ttl: &Ttl,
        owner: Option<&str>,
    ) -> std::result::Result<LockGuard, Failure> {
        let shared = &self.shared;
        let value: Arc<str> = match owner {
            Some(_) => reentrant::hold_id().into(),
            None => value::fresh().into(),
        };
        let owner: Option<Arc<str>> = owner.map(Arc::from);
        let mut pending = ReleaseOnDrop::arm(shared, keys, &value);
        let start = Instant::now();
        let mut round = shared
            .fan_out("acquire", Leftover::Finish, &[], |node| {
                let (keys, value, millis) = (
                    Arc::clone(keys),
                    Arc::clone(&value),
                    Arc::clone(&ttl.millis),
                );
                let owner = owner.clone();
                async move {
                    match owner {
                        Some(owner) => {
                            reentrant::acquire(&node, &keys, &owner, &value, &millis).await
                        }
                        None => node.acquire(&keys, &value, &millis).await,
                    }
                }
            })
            .await;
        pending.gates = std::mem::take(&mut round.gates);
        let validity = quorum::validity(ttl.ttl, start.elapsed(), ttl.drift)
            .filter(|v| *v > shared.config.min_validity());
        if round.decision == Decision::Won {
            if let Some(validity) = validity {
                let gates = pending.disarm();
                tracing::debug!(resource = %resources[0], ?validity, "lock acquired");
                let held = Held::acquired(resources, keys, value, None, ttl, start, gates);
                return Ok(LockGuard::new(Arc::clone(shared), held));
            }
        }
        pending.release_failed().await;
        Err(Failure {
            reports: round.reports(&shared.nodes),
            validity_exhausted: round.decision == Decision::Won,
        })
    }
}
