//! A release hands the lock to a waiter of the same `Redlock`
//! (`Shared::hand_over`): the waiter's `SET`s follow the deletes on the
//! same links, so it gets the lock at once, without a node's
//! announcement. The workload's clients take one lock at a time, so they
//! never wait for their own lock; this probe makes them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::checks::Record;
use super::probes::{Own, nodes_holding, plant_on, set_links, settle, violation};
use super::run::NODES;
use super::workload::Client;
use super::world::{LinkMode, Shared};
use crate::{LockOptions, Wait};

/// How soon after its holder's release began a handed lock is taken:
/// much less than the shortest pause of the clients this probe picks.
const SOON: Duration = Duration::from_millis(20);

/// What a waiter saw: when it got the lock and when it let it go, and
/// on how many nodes its value stood as it got it; its error otherwise.
type Turn = Result<(Instant, Instant, usize), String>;

/// A client holds a lock and two of its own tasks wait for it. The
/// marks their failed attempts left are taken off, so that no node
/// announces the releases: only the hand-offs within the `Redlock` can
/// wake them. The release reaches N − quorum + 1 nodes 5 ms late. Each
/// waiter must get the lock within [`SOON`] of the previous holder's
/// release, held on a quorum, and the second only after the first has
/// let it go.
pub(super) async fn handed(world: &Shared, record: &Arc<Mutex<Record>>, clients: &[Arc<Client>]) {
    let shortest_pause = |c: &Client| {
        let config = &c.plan.config;
        config.retry_delay().saturating_sub(config.retry_jitter())
    };
    let client = clients.iter().find(|c| {
        let config = &c.plan.config;
        config.release_notifications() && !config.fencing() && shortest_pause(c) >= SOON * 3
    });
    let Some(client) = client else {
        return;
    };
    let own = Own::new(client, "handed");
    let Ok(guard) = client.redlock.lock(own.resource.as_str(), own.ttl).await else {
        return;
    };
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let lock = (own.resource.clone(), own.key.clone());
            tokio::spawn(wait_turn(Arc::clone(world), Arc::clone(client), lock))
        })
        .collect();
    // Their first attempts fail and mark the lock; then no mark is left.
    tokio::time::sleep(SOON).await;
    let marked = format!("{}+", guard.value());
    let nodes = nodes_holding(world, &own.key, &marked);
    plant_on(world, &own.key, guard.value(), &nodes);
    let late = 0..=NODES - client.redlock.quorum();
    set_links(
        world,
        client.index,
        late.clone(),
        LinkMode::Slow(Duration::from_millis(5)),
    );
    let released = Instant::now();
    let release = guard.release().await;
    set_links(world, client.index, late, LinkMode::Pass);
    let mut turns = Vec::new();
    for waiter in waiters {
        turns.push(waiter.await.unwrap_or_else(|e| Err(format!("task: {e}"))));
    }
    if release.is_ok() {
        check(record, client, released, &turns);
    }
    settle(world, client).await;
}

/// One waiter: waits for the lock (three retries), holds it 5 ms.
async fn wait_turn(world: Shared, client: Arc<Client>, (resource, key): (String, String)) -> Turn {
    let options = LockOptions::new().wait(Wait::Retries(3));
    let ttl = client.plan.max_ttl;
    let guard = (client.redlock)
        .lock_with(resource.as_str(), ttl, &options)
        .await
        .map_err(|e| e.to_string())?;
    let got = Instant::now();
    let holding = nodes_holding(&world, &key, guard.value()).len();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let let_go = Instant::now();
    let _ = guard.release().await;
    Ok((got, let_go, holding))
}

/// The turns, in the order the waiters got the lock, each within
/// [`SOON`] of the release before it, on a quorum, one after the other.
fn check(record: &Arc<Mutex<Record>>, client: &Client, released: Instant, turns: &[Turn]) {
    let mut got: Vec<(Instant, Instant, usize)> = Vec::new();
    for turn in turns {
        match turn {
            Ok(turn) => got.push(*turn),
            Err(e) => violation(record, client, &format!("a waiter of a handed lock: {e}")),
        }
    }
    got.sort_by_key(|turn| turn.0);
    let mut previous = released;
    for (at, let_go, holding) in got {
        let took = at.saturating_duration_since(previous);
        if at < previous {
            violation(
                record,
                client,
                "a waiter got a handed lock before its holder let it go",
            );
        } else if took > SOON {
            violation(
                record,
                client,
                &format!(
                    "a waiter got its own Redlock's lock {took:?} after the release began, \
                     no node announcing it: not handed over"
                ),
            );
        }
        if holding < client.redlock.quorum() {
            violation(
                record,
                client,
                &format!("a waiter got a handed lock held on {holding} nodes only"),
            );
        }
        previous = let_go;
    }
}
