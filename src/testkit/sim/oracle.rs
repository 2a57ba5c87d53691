//! The oracle: a live guard never claims more validity than a quorum of
//! nodes holds its keys for, read off the simulated keyspaces. It runs
//! every few virtual milliseconds, and on one guard at the instants its
//! claim changes hands (an explicit extension's return), where a race
//! between rounds shows only briefly.

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
    loop {
        tick.tick().await;
        let world = world::lock(&world);
        let mut record = super::checks::record(&record);
        let found = check(&world, &record, &rules, None);
        for violation in found {
            record.violation(violation);
        }
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
) -> Vec<String> {
    let at = tokio::time::Instant::now();
    record
        .live
        .iter()
        .filter(|(id, _)| only.is_none_or(|only| only == **id))
        .filter_map(|(_, live)| {
            let valid_until = live.status.borrow().deadline;
            if live.value.is_empty() || live.extending || valid_until <= at {
                return None;
            }
            Some(check_guard(world, live, rules, valid_until - at))
        })
        .flatten()
        .collect()
}

/// One guard claiming `claim` more: each of its keys must be held that
/// long by a quorum.
fn check_guard(world: &World, live: &Live, rules: &Rules, claim: Duration) -> Vec<String> {
    let now = world.elapsed();
    let mut found = Vec::new();
    let mut stored = String::new();
    for key in &live.keys {
        let holding = (0..world.node_count())
            .filter(|&node| {
                // The key (its value ours, its TTL long enough), then the
                // faults.
                let server = world.server(node);
                let key = world.stored_key_in(node, key, &mut stored);
                let rate = server.clock().rate();
                let ttl = server.pttl_if(now, key, |stored| is_ours(stored, &live.value));
                let held =
                    lives_for(ttl, rate).is_some_and(|l| l + Duration::from_millis(2) >= claim);
                held || rules.guarded
                    && rules
                        .faults
                        .iter()
                        .any(|f| f.at >= live.since && f.at <= now && lost_data(&f.kind, node))
            })
            .count();
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
