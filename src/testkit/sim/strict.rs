//! Strict start-up checks ([`Config::with_strict_checks`]): an
//! acquisition first runs the checks until they have passed once, and
//! fails with their [`Error::Misconfigured`] while they do not, without
//! a vote; once they pass, it locks as any client does. A workload
//! client drawn strict runs the checks at its start, as a service would
//! before it serves ([`start_up`]); the probe ([`strict`]) starts a fresh
//! client of that config while the checks cannot pass.
//!
//! [`Config::with_strict_checks`]: crate::Config::with_strict_checks

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::checks::Record;
use super::probes::{nodes_holding, set_links, settle, violation};
use super::run::NODES;
use super::workload::Client;
use super::world::{self, LinkMode, Shared};
use crate::node::link::SimEndpoint;
use crate::{Error, NodeProblem, Redlock};

/// A strict client's start: `Redlock::check` again every 50 ms while it
/// fails on unreachable nodes alone (a fault may cut nodes off at first),
/// within `span` of the run's start. Its acquisitions then wait for no
/// check; after another problem (a quarantine mismatch, which no wait
/// mends) each of them runs the checks and is refused.
pub(super) async fn start_up(client: &Client, span: Duration) {
    if !client.plan.config.strict_checks() {
        return;
    }
    let unreachable = |p: &NodeProblem| matches!(p, NodeProblem::Unreachable { .. });
    while let Err(Error::Misconfigured(problems)) = client.redlock.check().await {
        if !problems.iter().all(unreachable) || client.start.elapsed() >= span {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A fresh client with `client`'s config (strict checks on) on its links,
/// started while N − quorum + 1 nodes cannot be reached: its `try_lock`
/// fails with `Misconfigured`, every problem named an unreachable node,
/// and no node it reaches holds a key of it; with every node back, its
/// `lock` is granted.
pub(super) async fn strict(world: &Shared, record: &Arc<Mutex<Record>>, client: &Client) {
    let config = &client.plan.config;
    if !config.strict_checks() {
        return;
    }
    let tagged = !world::lock(world).stored_key(0, "").is_empty();
    let tags = if tagged {
        super::run::cluster_tags()
    } else {
        None
    };
    let endpoints: Vec<Arc<dyn SimEndpoint>> = (0..NODES)
        .map(|node| super::net::Endpoint::open(world, client.index, node) as Arc<dyn SimEndpoint>)
        .collect();
    let fresh = match Redlock::simulated(endpoints, tags, config.clone()) {
        Ok(fresh) => fresh,
        Err(e) => {
            violation(
                record,
                client,
                &format!("a strict client's config refused: {e}"),
            );
            return;
        }
    };
    settle(world, client).await;
    let resource = format!("probe-strict-{}", client.index);
    let key = crate::keys::lock_key(config.key_prefix(), &resource);
    let ttl = client.plan.max_ttl;
    let cut = NODES - fresh.quorum() + 1;
    set_links(world, client.index, 0..cut, LinkMode::Blackhole);
    let refused = fresh.try_lock(resource.as_str(), ttl).await;
    let value = refused.as_ref().map(|guard| guard.value().to_owned());
    let voted = value.map_or_else(|_| Vec::new(), |value| nodes_holding(world, &key, &value));
    set_links(world, client.index, 0..cut, LinkMode::Pass);
    let unreachable = |p: &NodeProblem| matches!(p, NodeProblem::Unreachable { .. });
    match &refused {
        Err(Error::Misconfigured(problems))
            if !problems.is_empty() && problems.iter().all(unreachable) => {}
        other => violation(
            record,
            client,
            &format!(
                "a fresh client with strict checks, {cut} of {NODES} nodes cut off, got {:?} \
                 from try_lock (holding it on nodes {voted:?}), not Misconfigured naming the \
                 unreachable nodes",
                other.as_ref().map(|_| "a lock")
            ),
        ),
    }
    drop(refused);
    settle(world, client).await;
    if client.guarded && config.fencing() {
        // The operator's word, as in the phase after: never fenced, so
        // this resource's counters are intact.
        let names = [resource.as_str()];
        let _ = fresh
            .vouch_fence_counters(crate::FenceCounters::Of(&names))
            .await;
    }
    match fresh.lock(resource.as_str(), ttl).await {
        Ok(guard) => {
            let _ = guard.release().await;
        }
        Err(e) => violation(
            record,
            client,
            &format!("a fresh client with strict checks could not lock on healed nodes: {e}"),
        ),
    }
    fresh.shutdown().await;
    drop(fresh);
    settle(world, client).await;
}
