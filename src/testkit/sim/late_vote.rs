//! A vote is sent again after `NOSCRIPT` only within its round: a call
//! still in flight at the round's deadline is dropped there, so a `SET`
//! whose scripts come back loaded only after the deadline is never sent
//! again. Sent then, it would land after the release's delete on that
//! node (chained only up to the acquisition's deadline) and leave the
//! released lock's key there, refusing every other holder until its TTL.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::checks::Record;
use super::probes::{Own, drain, nodes_holding, set_links, settle, violation};
use super::run::NODES;
use super::workload::Client;
use super::world::{self, LinkMode, Shared};

/// A lock taken and released at once while one node, 0.375 node timeouts
/// slow each way, had forgotten its scripts: its `NOSCRIPT` comes back
/// within the acquisition's round, the scripts it then loads only after
/// the round's deadline. Once every call has landed, that node holds no
/// key of the released lock.
pub(super) async fn late_vote(world: &Shared, record: &Arc<Mutex<Record>>, client: &Client) {
    // A fenced acquisition has rounds of its own on that node: not this
    // probe's subject.
    if client.redlock.quorum() >= NODES || client.plan.config.fencing() {
        return;
    }
    settle(world, client).await;
    let own = Own::new(client, "late-vote");
    let (resource, key, ttl) = (&own.resource, &own.key, own.ttl);
    let node = NODES - 1;
    let known = {
        let mut world = world::lock(world);
        let now = world.elapsed();
        let known = world.server(node).scripts_known();
        let flush = [b"SCRIPT".to_vec(), b"FLUSH".to_vec()];
        world.server_mut(node).execute(now, &flush);
        known
    };
    let timeout = client.plan.config.node_timeout();
    let by = timeout.mul_f64(0.375);
    let slow = || std::iter::once(node);
    set_links(world, client.index, slow(), LinkMode::Slow(by));
    let released = match client.redlock.lock(resource.as_str(), ttl).await {
        Ok(guard) => {
            let value = guard.value().to_owned();
            let _ = guard.release().await;
            Some(value)
        }
        Err(_) => None,
    };
    // Until every call, and every script load, has landed.
    tokio::time::sleep(timeout * 4 + by + Duration::from_millis(10)).await;
    set_links(world, client.index, slow(), LinkMode::Pass);
    drain(world, client).await;
    world::lock(world).server_mut(node).know_scripts(&known);
    let Some(value) = released else {
        return;
    };
    // Checked only while the key's TTL would still keep it.
    if own.kept() && nodes_holding(world, key, &value).contains(&node) {
        violation(
            record,
            client,
            &format!(
                "a lock of {resource} released at once left its key on node {node}, which had \
                 forgotten its scripts and was {by:?} slow each way (node timeout {timeout:?}): \
                 its SET was sent again after the acquisition's deadline"
            ),
        );
    }
}
