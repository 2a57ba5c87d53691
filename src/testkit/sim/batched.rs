//! Extensions of several locks of one client due at one instant reach
//! each node in one batch (`node::batch`), and each lock gets its own
//! result. The workload's clients hold one lock at a time, so their
//! extensions never share a batch; this probe makes them.

use std::sync::{Arc, Mutex};

use futures_util::FutureExt;

use super::checks::Record;
use super::probes::{Own, drain, nodes_holding, plant, settle, violation};
use super::run::NODES;
use super::workload::Client;
use super::world::Shared;
use crate::{Error, LockGuard};

/// Two locks are taken; another owner's value is planted over the second
/// on every node; both are extended at the same instant, in one batch:
/// the first must be extended, the second found gone, the planted value
/// left as it was. Then three locks taken at one instant with
/// auto-extension, so that their watchdogs extend them in batches, are
/// held past twice their TTL: none may be lost.
pub(super) async fn batched(world: &Shared, record: &Arc<Mutex<Record>>, client: &Client) {
    let (ours, taken_over) = (Own::new(client, "batch-a"), Own::new(client, "batch-b"));
    let redlock = &client.redlock;
    let (Ok(mut first), Ok(mut second)) = futures_util::future::join(
        redlock.lock(ours.resource.as_str(), ours.ttl),
        redlock.lock(taken_over.resource.as_str(), taken_over.ttl),
    )
    .await
    else {
        settle(world, client).await;
        return;
    };
    drain(world, client).await;
    let foreign = "someone-else";
    plant(world, &taken_over.key, foreign);
    let ttl = ours.ttl;
    let (kept, gone) = futures_util::future::join(first.extend(ttl), second.extend(ttl)).await;
    if let Err(e) = &kept {
        violation(
            record,
            client,
            &format!(
                "an extension of {} batched with one of a lock taken over failed: {e}",
                ours.resource
            ),
        );
    }
    if !matches!(gone, Err(Error::Expired)) {
        violation(
            record,
            client,
            &format!(
                "an extension of {}, taken over on every node, batched with one of a lock \
                 still held, ended {gone:?}",
                taken_over.resource
            ),
        );
    }
    let _ = first.release().await;
    drop(second);
    settle(world, client).await;
    let held = nodes_holding(world, &taken_over.key, foreign).len();
    if held != NODES {
        violation(
            record,
            client,
            &format!(
                "a batch of extensions changed another owner's lock on {} nodes",
                NODES - held
            ),
        );
    }
    watched(world, record, client).await;
}

/// Three auto-extended locks taken at one instant, held past twice their
/// TTL: none is lost, and a quorum holds each.
async fn watched(world: &Shared, record: &Arc<Mutex<Record>>, client: &Client) {
    let owns = ["batch-c", "batch-d", "batch-e"].map(|name| Own::new(client, name));
    let taken = futures_util::future::join_all(owns.iter().map(|own| {
        let lock = client.redlock.lock(own.resource.as_str(), own.ttl);
        lock.map(|got| {
            got.map(|mut guard| {
                guard.auto_extend();
                guard
            })
        })
    }))
    .await;
    let guards: Vec<(&Own, LockGuard)> = (owns.iter())
        .zip(taken)
        .filter_map(|(own, got)| Some((own, got.ok()?)))
        .collect();
    let Some((own, _)) = guards.first() else {
        return;
    };
    tokio::time::sleep(own.ttl * 2).await;
    for (own, guard) in &guards {
        let lost = guard.lost().now_or_never().is_some();
        let holding = nodes_holding(world, &own.key, guard.value()).len();
        if lost || holding < client.redlock.quorum() {
            violation(
                record,
                client,
                &format!(
                    "{} auto-extended beside two other locks taken at the same instant: \
                     lost {lost}, held on {holding} nodes after twice its TTL",
                    own.resource
                ),
            );
        }
    }
    for (_, guard) in guards {
        let _ = guard.release().await;
    }
    settle(world, client).await;
}
