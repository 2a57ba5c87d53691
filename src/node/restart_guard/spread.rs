//! Spreading the longer quarantine: when a node keeps a quarantine other
//! than this client's, one of the two is wrong, and a node still in its
//! quarantine may have been given the shorter one by the first client to
//! meet it after a restart, while a lock as long as the longer one may be
//! live. Every node still in quarantine gets the longer of the two
//! ([`SPREAD`](super::SPREAD)), so that it waits that long before voting,
//! whoever asks. Nodes trusted for longer than that are left as they are:
//! what they forgot has expired.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use super::{RestartGuard, SPREAD};
use crate::background::Background;
use crate::node::Node;
use crate::node::request::{Grant, Request};

/// The nodes a guard can spread to, shared by the guards of one lock's
/// nodes, set once they are all built.
#[derive(Debug, Default)]
pub(crate) struct Peers {
    nodes: OnceLock<Weak<[Arc<Node>]>>,
    background: OnceLock<Background>,
    /// A spread is under way (a second one meanwhile would repeat it).
    spreading: AtomicBool,
}

impl Peers {
    /// Names the nodes (held weakly: they hold the guards) and the
    /// background the spreads run in, so that `shutdown` waits for them.
    pub(crate) fn attach(&self, nodes: &Arc<[Arc<Node>]>, background: &Background) {
        let _ = self.nodes.set(Arc::downgrade(nodes));
        let _ = self.background.set(background.clone());
    }
}

/// Gives every node still in quarantine the quarantine `longer`, in the
/// background; `node` met a quarantine other than this client's.
pub(super) fn spread(guard: &RestartGuard, node: &str, longer: Duration) {
    let peers = &guard.peers;
    let (Some(nodes), Some(background)) = (
        peers.nodes.get().and_then(Weak::upgrade),
        peers.background.get(),
    ) else {
        return;
    };
    if peers.spreading.swap(true, Ordering::AcqRel) {
        return;
    }
    tracing::warn!(
        node,
        ours = ?guard.quarantine(),
        longer = ?longer,
        "restart guard: a node keeps another quarantine than this client's (max_ttl and the \
         drift settings must be the same on every client); nodes still in quarantine get the \
         longer one"
    );
    let key = [guard.key.clone()];
    let millis = u64::try_from(longer.as_millis())
        .unwrap_or(u64::MAX)
        .to_string();
    let request = Request::script(&SPREAD, &key, &[&millis], Grant::Int(1));
    let done = Done(Arc::clone(peers));
    background.spawn(async move {
        let _done = done;
        let calls = nodes.iter().map(|node| node.send_bounded::<i64>(&request));
        let answers = futures_util::future::join_all(calls).await;
        let written = answers.iter().filter(|a| matches!(a, Ok(1))).count();
        tracing::info!(
            written,
            nodes = nodes.len(),
            "restart guard: longer quarantine spread"
        );
    });
}

/// Ends a spread when dropped: after it ran, with its runtime, or unspawned.
struct Done(Arc<Peers>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.spreading.store(false, Ordering::Release);
    }
}
