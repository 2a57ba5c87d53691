//! One schedule: the world, the clients, the nemesis and the checkers on a
//! paused single-thread runtime, all drawn from one seed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::checks::{self, Record};
use super::faults::{self, Fault, FaultKind, Model};
use super::node::Persistence;
use super::oracle::{self, Rules};
use super::rng::Rng;
use super::workload::{Client, ClientPlan, draw_clients};
use super::world::{self, Process, Shared, World};
use crate::Redlock;
use crate::node::link::SimEndpoint;

/// Nodes in every schedule.
pub const NODES: usize = 5;

/// How long the workload of a schedule runs, in virtual time.
pub const SPAN: Duration = Duration::from_secs(10);

/// A negative control: a fault outside the fault model, or a defect put
/// back on purpose, that the checkers must see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Restart guard off; a majority of nodes restart empty, three times.
    UnguardedEmptyRestart,
    /// The clocks of a majority of nodes jump forward past every TTL.
    MajorityClockJump,
    /// Releases delete the key without comparing its value.
    ReleaseWithoutCompare,
    /// Extension rounds of one lock run at once (the watchdog's beside an
    /// explicit `extend`), neither waiting for the other nor chained
    /// after its calls, and an extension's `PEXPIRE` shortens a key again:
    /// the race the round lock closed, which extensions that never shorten
    /// a key also make harmless.
    RacingExtensions,
    /// The workload forgets (`mem::forget`) auto-extended guards, their
    /// watchdogs running: tasks that outlive their work.
    LeakedWatchdog,
    /// A batch of extensions (`node::batch`) hands its per-lock results
    /// to the locks in reverse order.
    CrossedBatch,
    /// A release hands its lock to no waiter of its own `Redlock`
    /// (`Shared::hand_over` does nothing).
    NoHandOver,
}

/// What to run.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Everything is drawn from it.
    pub seed: u64,
    /// The faults, instead of those drawn from the seed (a shrunk list).
    pub faults: Option<Vec<Fault>>,
    /// A negative control to run.
    pub control: Option<Control>,
    /// Every client runs without release notifications and without
    /// re-seeding (the schedule a seed had before they were simulated);
    /// otherwise each client draws both.
    pub notifications_off: bool,
}

/// What a schedule did and what the checkers found.
#[derive(Debug)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// It ran without release notifications ([`Plan::notifications_off`]).
    pub notifications_off: bool,
    /// Every violation found, one line each.
    pub violations: Vec<String>,
    /// The faults it ran.
    pub faults: Vec<Fault>,
    /// The clients' configs.
    pub clients: Vec<ClientPlan>,
    /// Hash of the history (same seed, same hash).
    pub hash: u64,
    /// Operations the clients finished.
    pub ops: usize,
    /// Commands the nodes ran.
    pub commands: u64,
    /// One JSON line per operation.
    pub history: Vec<String>,
    /// Holds of plain locks the workload ended, by outcome (for the
    /// metrics check).
    pub(crate) ended: std::collections::BTreeMap<&'static str, u64>,
}

/// Runs one schedule.
pub fn run(plan: &Plan) -> Report {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(e) => {
            return Report {
                seed: plan.seed,
                notifications_off: plan.notifications_off,
                violations: vec![format!("no runtime: {e}")],
                faults: Vec::new(),
                clients: Vec::new(),
                hash: 0,
                ops: 0,
                commands: 0,
                history: Vec::new(),
                ended: std::collections::BTreeMap::new(),
            };
        }
    };
    let _seeded = crate::rng::seeded::install(plan.seed ^ 0x6c69_6272_6172_7900);
    let _control = plan.control.map(crate::controls::install);
    let traced = std::sync::Arc::new(super::traced::Traced::default());
    let dispatch = tracing::Dispatch::new(std::sync::Arc::clone(&traced));
    let _traced = tracing::dispatcher::set_default(&dispatch);
    #[cfg(feature = "metrics")]
    let mut report = {
        let counts = super::metered::Counts::default();
        let mut report = metrics::with_local_recorder(&counts, || runtime.block_on(schedule(plan)));
        let ended = std::mem::take(&mut report.ended);
        report
            .violations
            .extend(super::metered::check(&counts, &ended));
        report
    };
    #[cfg(not(feature = "metrics"))]
    let mut report = runtime.block_on(schedule(plan));
    traced.over();
    drop(runtime);
    report.violations.extend(traced.take().violations);
    report
}

async fn schedule(plan: &Plan) -> Report {
    let root = Rng::new(plan.seed);
    let mut draw = root.fork(1);
    let clients = 3 + draw.below(3);
    let guarded = plan.control != Some(Control::UnguardedEmptyRestart) && draw.chance(0.5);
    let mixed = guarded && draw.chance(0.3);
    let mut plans = draw_clients(&mut draw, clients, guarded, mixed);
    if !plan.notifications_off {
        // From a side stream: every other draw is the same either way.
        // A seed recorded before these settings were drawn runs without.
        let mut side = root.fork(0x6e6f_7469_6679);
        for client in &mut plans {
            let on = side.chance(0.5);
            client.config = client.config.clone().with_release_notifications(on);
        }
        let mut side = root.fork(0x7265_7365_6564);
        for client in &mut plans {
            let on = side.chance(0.3);
            client.config = client.config.clone().with_reseed_restarted_nodes(on);
        }
        // Strict start-up checks: such a client checks before its
        // workload, and the probes start a fresh one while they fail.
        let mut side = root.fork(0x7374_7269_6374);
        for client in &mut plans {
            let on = side.chance(0.3);
            client.config = client.config.clone().with_strict_checks(on);
        }
    }
    // A well-configured guarded fleet is mostly brand new: its operator
    // marks the nodes trusted (`init_nodes`) instead of waiting a
    // quarantine out. The others start with every node in quarantine.
    let trusted_start = guarded && !mixed && draw.chance(0.7);
    let max_rate = plans
        .iter()
        .map(|p| 1.0 + p.config.drift_factor() * 0.8)
        .fold(f64::MAX, f64::min);
    let model = Model {
        nodes: NODES,
        clients,
        guarded,
        max_rate,
        span: SPAN,
    };
    let mut faults = plan
        .faults
        .clone()
        .unwrap_or_else(|| faults::draw(&mut root.fork(2), &model));
    if plan.faults.is_none() {
        faults.extend(control_faults(plan.control));
    }
    // A restarted node keeps the quarantine of the first guarded client
    // that meets it: it may vote again after the shortest of them.
    let quarantine = plans.iter().filter_map(|p| p.config.quarantine()).min();
    let world: Shared = Arc::new(Mutex::new(World::new(plan.seed, NODES, clients)));
    if !plan.notifications_off {
        // From a side stream, like the settings above. A client used from
        // several runtimes has a connection per runtime: its calls to a
        // node may overtake one another, by less than half its node
        // timeout (a call sent after an earlier one's deadline still
        // arrives after it).
        let mut side = root.fork(0x0075_6e6f_7264_6572);
        let mut world = world::lock(&world);
        for (index, client) in plans.iter().enumerate() {
            if side.chance(0.3) {
                world.set_unordered(index, client.config.node_timeout() / 2);
            }
        }
    }
    // A quarter of the seeds key the nodes as the masters of a Redis
    // Cluster (`Redlock::cluster`'s hash tags, one per node): every key,
    // the restart guard's record and the release channels carry the tag.
    let tags = (!plan.notifications_off && root.fork(0x0063_6c75_7374_6572).chance(0.25))
        .then(cluster_tags)
        .flatten();
    if let Some(tags) = tags {
        world::lock(&world).set_tags(tags.iter().map(|(tag, _)| tag.to_string()).collect());
    }
    let record = Arc::new(Mutex::new(Record::default()));
    let start = tokio::time::Instant::now();
    let shared_faults = Arc::new(faults.clone());
    let trusted = Arc::new(std::sync::OnceLock::new());
    let mut built = Vec::new();
    for (index, client_plan) in plans.iter().enumerate() {
        let endpoints: Vec<Arc<dyn SimEndpoint>> = (0..NODES)
            .map(|node| super::net::Endpoint::open(&world, index, node) as Arc<dyn SimEndpoint>)
            .collect();
        let redlock = match Redlock::simulated(endpoints, tags, client_plan.config.clone()) {
            Ok(redlock) => redlock,
            Err(e) => {
                record::violation(&record, format!("client {index}'s config refused: {e}"));
                continue;
            }
        };
        built.push(Arc::new(Client {
            index,
            redlock,
            plan: client_plan.clone(),
            record: record.clone(),
            start,
            faults: shared_faults.clone(),
            quarantine,
            trusted: trusted.clone(),
            world: world.clone(),
            guarded,
            misconfigured: std::sync::atomic::AtomicBool::new(false),
        }));
    }
    let tasks_before = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    let nemesis = tokio::spawn(faults::nemesis(world.clone(), faults.clone()));
    let oracle = tokio::spawn(oracle::watch(
        world.clone(),
        record.clone(),
        Rules {
            faults: shared_faults.clone(),
            guarded,
        },
    ));
    if let (true, Some(operator)) = (trusted_start, built.first()) {
        // Under the faults already in force: a node it cannot reach keeps
        // its quarantine.
        let reports = operator.redlock.init_nodes().await;
        let names: Vec<&str> = reports.iter().map(|r| r.node()).collect();
        let mut distinct = names.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if names.len() != NODES || distinct.len() != NODES {
            record::violation(
                &record,
                format!(
                    "init_nodes: {} reports for {NODES} nodes: {names:?}",
                    reports.len()
                ),
            );
        }
        let _ = trusted.set(start.elapsed());
    }
    let mut tasks = Vec::new();
    for client in &built {
        let client = client.clone();
        let rng = root.fork(10 + client.index as u64);
        tasks.push(tokio::spawn(async move {
            super::strict::start_up(&client, SPAN).await;
            client.run(rng, SPAN).await
        }));
    }
    for task in tasks {
        if let Err(e) = task.await {
            record::violation(&record, format!("a client task failed: {e}"));
        }
    }
    // Faults drawn near the end of the span may outlast it (a client's
    // paused traffic still waits in its links): the final phase starts once
    // the last one is over.
    let _ = nemesis.await;
    oracle.abort();
    if tags.is_some() {
        check_tagged(&world, &record);
    }
    final_phase(&world, &record, &built, &mut root.fork(3), guarded).await;
    // Every client has attempted an acquisition by now (the final phase
    // locks on healed nodes), so each ran its start-up checks; the nodes
    // run without persistence, which a client warns of unless it runs the
    // restart guard without fencing. A client paused in the run may have
    // been paused through its one check, which then read nothing.
    let paused = |index: usize| {
        faults
            .iter()
            .any(|f| matches!(f.kind, FaultKind::PauseClient { client } if client == index))
    };
    let warns = built.iter().any(|c| {
        (c.plan.config.restart_guard().is_none() || c.plan.config.fencing()) && !paused(c.index)
    });
    if warns && super::traced::warnings("redquorum start-up check") == 0 {
        record::violation(
            &record,
            "start-up checks: no warning of nodes without persistence".to_owned(),
        );
    }
    let tasks_after = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    // Each client's release-notification feeds (one per node, started on
    // its first wait) live as long as its lock, by design.
    let feeds: usize = built.iter().map(|c| c.redlock.running_feeds()).sum();
    if tasks_after > tasks_before + feeds {
        // Every guard is gone, every watchdog stopped, every background
        // round drained: nothing else the run started may still be alive.
        record::violation(
            &record,
            format!(
                "growth: {tasks_after} tasks alive after the final phase, {tasks_before} before \
                 the workload began and {feeds} notification feeds"
            ),
        );
    }
    let commands = world::lock(&world).delivered;
    let mut record = record::take(&record);
    let overlaps = checks::overlaps(&record.holds);
    let disorder = checks::fencing_disorder(&record.holds);
    record.violations.extend(overlaps);
    record.violations.extend(disorder);
    Report {
        seed: plan.seed,
        notifications_off: plan.notifications_off,
        hash: record.history_hash(),
        violations: record.violations,
        faults,
        clients: plans,
        ops: record.ops,
        commands,
        history: record.history,
        ended: record.ended,
    }
}

/// On nodes keyed as cluster masters, every key (locks, fence counters,
/// the restart guard's record) carries its node's tag: a key without it
/// would sit in another slot, on another master.
fn check_tagged(world: &Shared, record: &Mutex<Record>) {
    let world = world::lock(world);
    let now = world.elapsed();
    for node in 0..world.node_count() {
        let tagged = world.stored_key(node, "");
        for key in world.server(node).keys(now) {
            if !key.starts_with(tagged.as_ref()) {
                record::violation(
                    record,
                    format!("cluster: key {key} on node {node} lacks the node's tag {tagged}"),
                );
            }
        }
    }
}

/// A node's hash tag on a Redis Cluster, and its slot.
type Tag = (Arc<str>, u16);

/// The hash tags of [`NODES`] nodes on a Redis Cluster, found once.
pub(super) fn cluster_tags() -> Option<&'static [Tag]> {
    static TAGS: std::sync::OnceLock<Option<Vec<Tag>>> = std::sync::OnceLock::new();
    TAGS.get_or_init(|| Redlock::cluster_tags(NODES)).as_deref()
}

/// The faults a negative control adds.
fn control_faults(control: Option<Control>) -> Vec<Fault> {
    let at = [2_000, 5_000, 8_000].map(Duration::from_millis);
    let majority = [0, 1, 2];
    let kind = |node| match control {
        Some(Control::UnguardedEmptyRestart) => Some(FaultKind::Restart {
            node,
            persistence: Persistence::None,
        }),
        Some(Control::MajorityClockJump) => Some(FaultKind::ClockJump {
            node,
            by: Duration::from_secs(30),
        }),
        _ => None,
    };
    at.iter()
        .flat_map(|&at| {
            majority.iter().filter_map(move |&node| {
                kind(node).map(|kind| Fault {
                    at,
                    lasts: Duration::ZERO,
                    kind,
                })
            })
        })
        .collect()
}

/// After the workload: every fault healed, quarantines over, then each
/// client locks and releases fresh resources (with one node slow when the
/// quorum allows it) and drains its background work. Every lock must be
/// granted (liveness), and nothing may be left on any node (every delete
/// was sent).
async fn final_phase(
    world: &Shared,
    record: &Arc<Mutex<Record>>,
    clients: &[Arc<Client>],
    rng: &mut Rng,
    guarded: bool,
) {
    {
        let mut world = world::lock(world);
        world.heal();
        // Unordered links are a fault like the others: the healed phase
        // runs on FIFO links (each call of a script load is then one
        // quick round trip, as the liveness checks assume).
        for client in clients {
            world.set_unordered(client.index, Duration::ZERO);
        }
    }
    let longest = clients
        .iter()
        .map(|c| {
            c.plan
                .max_ttl
                .max(c.plan.config.quarantine().unwrap_or_default())
        })
        .max()
        .unwrap_or_default();
    tokio::time::sleep(longest + Duration::from_millis(100)).await;
    if guarded {
        // A restarted node starts its quarantine at the first vote it
        // sees: one attempt per client starts them, then they run out.
        for client in clients {
            let _ = client
                .redlock
                .try_lock("warm-up", Duration::from_millis(100))
                .await;
        }
        tokio::time::sleep(longest * 2 + Duration::from_millis(100)).await;
    }
    // Clients that announce different restart-guard quarantines are
    // refused as misconfigured (typed, not retried): expected, not a
    // liveness failure.
    let mut announced: Vec<_> = clients.iter().map(|c| c.plan.config.quarantine()).collect();
    announced.dedup();
    let mixed = announced.len() > 1;
    if !mixed {
        super::probes::run(world, record, clients, guarded).await;
    }
    let all_below_n = clients.iter().all(|c| c.redlock.quorum() < NODES);
    let slowest = clients
        .iter()
        .map(|c| c.plan.config.node_timeout())
        .min()
        .unwrap_or_default();
    let mut slow = None;
    if all_below_n && rng.chance(0.5) {
        let by = slowest.mul_f64(0.5 + rng.unit() * 1.5);
        let node = rng.below(NODES);
        world::lock(world).set_node_links(node, world::LinkMode::Slow(by));
        slow = Some(by);
    }
    // Nodes whose script cache lacks the delete script as the phase
    // begins (restarted or flushed): when such a node is also slower than a
    // client's node timeout, every NOSCRIPT answer comes after its call's
    // bound, nothing loads the script in time, and its deletes do not run
    // (a known open defect: "late NOSCRIPT").
    let forgot: Vec<bool> = {
        let world = world::lock(world);
        let release = crate::node::scripts::RELEASE.get_hash();
        (0..world.node_count())
            .map(|node| !world.server(node).knows_script(release))
            .collect()
    };
    let mut tasks = Vec::new();
    for client in clients {
        let client = client.clone();
        let record = record.clone();
        let world = world.clone();
        let forgot = forgot.clone();
        tasks.push(tokio::spawn(async move {
            let resources: Vec<String> = (0..3)
                .map(|k| format!("live-{}-{k}", client.index))
                .collect();
            if guarded && client.plan.config.fencing() {
                // The operator's word for counters after restarts: these
                // resources were never fenced, so theirs are intact.
                let names: Vec<&str> = resources.iter().map(String::as_str).collect();
                let _ = client
                    .redlock
                    .vouch_fence_counters(crate::FenceCounters::Of(&names))
                    .await;
            }
            for resource in resources {
                let ttl = client.plan.max_ttl.min(Duration::from_secs(1));
                match client.redlock.lock(&resource, ttl).await {
                    Ok(guard) => {
                        let _ = guard.release().await;
                    }
                    Err(e) => {
                        let why = super::workload::describe(&e);
                        // A strict client's checks see the mismatch too.
                        let strict = client.plan.config.strict_checks()
                            && matches!(e, crate::Error::Misconfigured(_));
                        if !(mixed && (strict || why.contains("quarantine mismatch"))) {
                            record::violation(
                                &record,
                                format!(
                                    "liveness: client {} could not lock {resource} on healed \
                                     nodes: {why}",
                                    client.index
                                ),
                            );
                        }
                    }
                }
            }
            // What is left in the background is the last rounds' calls,
            // each over within one node timeout (a chained delete: two);
            // on healthy nodes they answer at once.
            let draining = Instant::now();
            client.redlock.shutdown().await;
            let took = draining.elapsed();
            let timeout = client.plan.config.node_timeout();
            if slow.is_none() && took > timeout {
                record::violation(
                    &record,
                    format!(
                        "drain: client {}'s shutdown() on healthy nodes took {took:?}, beyond \
                         one node timeout ({timeout:?})",
                        client.index
                    ),
                );
            }
            // Every delete was sent by now: once the slow link delivered
            // the last ones, none of this client's keys is left.
            tokio::time::sleep(slow.unwrap_or_default() * 2 + Duration::from_millis(20)).await;
            let world = world::lock(&world);
            let now = world.elapsed();
            let ours = format!("lock:live-{}-", client.index);
            for node in (0..world.node_count()).filter(|&n| world.process(n) == Process::Up) {
                let forgot = forgot[node];
                for key in world.server(node).keys(now) {
                    if key.contains(&ours) {
                        record::violation(
                            &record,
                            format!(
                                "leftover: {key} is still on node {node} after client {}'s \
                                 shutdown(){}",
                                client.index,
                                if forgot {
                                    " (late NOSCRIPT: the node had lost the delete script)"
                                } else {
                                    ""
                                }
                            ),
                        );
                    }
                }
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    // Time for the last calls to end, for the check that no task is left.
    tokio::time::sleep(Duration::from_secs(2)).await;
}

/// Helpers on the shared record.
pub(in crate::testkit::sim) mod record {
    use std::sync::{Mutex, MutexGuard};

    use super::Record;

    pub(super) fn lock(record: &Mutex<Record>) -> MutexGuard<'_, Record> {
        super::super::checks::record(record)
    }

    pub(in crate::testkit::sim) fn violation(record: &Mutex<Record>, what: String) {
        lock(record).violation(what);
    }

    pub(super) fn take(record: &Mutex<Record>) -> Record {
        std::mem::take(&mut *lock(record))
    }
}
