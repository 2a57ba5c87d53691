//! The oracle: a live guard never claims more validity than a quorum of
//! nodes holds its keys for, read off the simulated keyspaces. It runs
//! every few virtual milliseconds, and on one guard at the instants its
//! claim changes hands (an explicit extension's return), where a race
//! between rounds shows only briefly.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::checks::{Live, Record, is_ours, lives_for};
use super::faults::{Fault, FaultKind};
use super::world::{self, Shared, World};

/// What the oracle needs besides the world and the record.
#[derive(Clone, Debug)]
pub(crate) struct Rules {
    /// The run's faults: data a node lost since a guard's acquisition began
    /// counts as held there when the restart guard is on.
    pub(crate) faults: Arc<Vec<Fault>>,
    /// Every client runs the restart guard.
    pub(crate) guarded: bool,
}

/// Checks every live guard every 5 virtual milliseconds, for ever.
pub(crate) async fn watch(world: Shared, record: Arc<Mutex<Record>>, rules: Rules) {
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    let mut seen = Seen::default();
    loop {
        tick.tick().await;
        let world = world::lock(&world);
        let mut record = super::checks::record(&record);
        let found = check(&world, &record, &rules, None, &mut seen);
        for violation in found {
            record.violation(violation);
        }
        seen.guards.retain(|id, _| record.live.contains_key(id));
    }
}

/// What the oracle last read of each live guard's keys on each node, kept
/// while that node's keyspace does not change: a tick then reads only the
/// node's clock. (Between changes, a key's time to live and a guard's
/// claim run down together.)
#[derive(Default)]
pub(crate) struct Seen {
    guards: BTreeMap<u64, Reads>,
}

/// One guard's reads: its value, then per key and node.
struct Reads {
    value: String,
    keys: Vec<Vec<Option<Read>>>,
}

/// One read of a key on a node.
#[derive(Clone, Copy)]
struct Read {
    /// The node's keyspace changes when it was read.
    changes: u64,
    /// When the key expires, if it holds the guard's value
    /// ([`SimNode::expiry_if`](super::node::SimNode::expiry_if)).
    expiry: Option<Option<i64>>,
}

impl Seen {
    /// The reads of guard `id`, empty for a new guard.
    fn of(&mut self, id: u64, live: &Live, nodes: usize) -> &mut Reads {
        let reads = self.guards.entry(id).or_insert_with(|| Reads {
            value: String::new(),
            keys: Vec::new(),
        });
        if reads.value != live.value || reads.keys.len() != live.keys.len() {
            reads.value.clone_from(&live.value);
            reads.keys = vec![vec![None; nodes]; live.keys.len()];
        }
        reads
    }
}

/// The violations of the live guards now (only guard `only`, if given).
/// A guard with an explicit extension in flight is not checked: its
/// caller cannot act on the old deadline meanwhile.
pub(crate) fn check(
    world: &World,
    record: &Record,
    rules: &Rules,
    only: Option<u64>,
    seen: &mut Seen,
) -> Vec<String> {
    let at = tokio::time::Instant::now();
    record
        .live
        .iter()
        .filter(|(id, _)| only.is_none_or(|only| only == **id))
        .filter_map(|(id, live)| {
            let valid_until = live.status.borrow().deadline;
            if live.value.is_empty() || live.extending || valid_until <= at {
                return None;
            }
            let reads = seen.of(*id, live, world.node_count());
            Some(check_guard(world, live, rules, valid_until - at, reads))
        })
        .flatten()
        .collect()
}

/// One guard claiming `claim` more: each of its keys must be held that
/// long by a quorum.
fn check_guard(
    world: &World,
    live: &Live,
    rules: &Rules,
    claim: Duration,
    reads: &mut Reads,
) -> Vec<String> {
    let now = world.elapsed();
    let mut found = Vec::new();
    let mut stored = String::new();
    for (key, reads) in live.keys.iter().zip(&mut reads.keys) {
        let mut holding = 0;
        for (node, read) in reads.iter_mut().enumerate() {
            // The key (its value ours, its TTL long enough), then the
            // faults.
            let server = world.server(node);
            let changes = server.changes();
            let expiry = match read {
                Some(read) if read.changes == changes => read.expiry,
                _ => {
                    let key = world.stored_key_in(node, key, &mut stored);
                    let expiry = server.expiry_if(key, |v| is_ours(v, &live.value));
                    *read = Some(Read { changes, expiry });
                    expiry
                }
            };
            let ttl = match expiry {
                None => -2,
                Some(None) => -1,
                Some(Some(at)) => {
                    let now_ms = server.ms_at(now);
                    if now_ms < at { at - now_ms } else { -2 }
                }
            };
            let held = lives_for(ttl, server.clock().rate())
                .is_some_and(|l| l + Duration::from_millis(2) >= claim);
            // Excused only when not held: the fault list is read for the
            // few keys that fall short, not for every key at every step.
            let excused = || {
                rules.guarded
                    && rules
                        .faults
                        .iter()
                        .any(|f| f.at >= live.since && f.at <= now && lost_data(&f.kind, node))
            };
            if held || excused() {
                holding += 1;
            }
        }
        if holding < live.quorum {
            let seen: Vec<String> = (0..world.node_count())
                .map(|node| {
                    let server = world.server(node);
                    let key = &world.stored_key(node, key);
                    let stored = server.value(now, key).map_or_else(
                        || "-".to_owned(),
                        |v| String::from_utf8_lossy(&v).chars().take(8).collect(),
                    );
                    format!("{stored}/{}", server.pttl(now, key))
                })
                .collect();
            found.push(format!(
                "oracle at {now:?}: a guard ({}) claims {claim:?} more on {key}, but only \
                 {holding} nodes hold it that long (quorum {}; nodes: {})",
                live.value.chars().take(8).collect::<String>(),
                live.quorum,
                seen.join(" ")
            ));
        }
    }
    found
}

/// A fault that makes `node` forget keys.
pub(crate) fn lost_data(kind: &FaultKind, node: usize) -> bool {
    kind.loses_keys()
        && matches!(kind, FaultKind::Restart { node: n, .. }
            | FaultKind::Flush { node: n }
            | FaultKind::Failover { node: n, .. } if *n == node)
}
