//! [`Placement`]: which master of the cluster serves each node's hash tag,
//! read from the cluster at construction, read again when a node meets a
//! redirection (`MOVED`, `ASK`), a cluster that is down or a lost
//! connection, and every [`REREAD`] in any case. A node whose slot moved to
//! a master no other node uses is pointed at it; while two tags share a
//! master, acquisitions are refused ([`Placement::refusal`]).

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo};
use tokio::time::Instant;

use super::layout::{self, Endpoint, Shard};
use crate::config::Connect;
use crate::node::Node;

/// How often the placement is read when nothing doubts it.
pub(crate) const REREAD: Duration = Duration::from_secs(5);
/// The least time between two reads when nodes doubt it.
const DOUBT_GAP: Duration = Duration::from_millis(250);
/// How often the watcher looks at the nodes' doubts.
const POLL: Duration = Duration::from_millis(50);

/// The placement of a lock's nodes on the masters of one cluster.
pub(crate) struct Placement {
    /// Node `k`'s hash tag and slot.
    pub(crate) tags: Vec<(Arc<str>, u16)>,
    /// The seed's connection info: credentials, TLS and database of every
    /// connection to the cluster.
    template: ConnectionInfo,
    connect: Connect,
    /// The bound on one read of the layout from one server.
    limit: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The layout as last read.
    shards: Vec<Shard>,
    /// The master node `k` talks to.
    masters: Vec<Option<Endpoint>>,
    /// Why acquisitions are refused now, if they are.
    refusal: Option<String>,
}

impl Placement {
    /// The placement of `n` nodes, connecting as `template` says (its
    /// address is the first server asked).
    pub(crate) fn new(
        n: usize,
        template: ConnectionInfo,
        connect: Connect,
        node_timeout: Duration,
    ) -> Option<Self> {
        let tags = (0..n)
            .map(|k| super::tags::tag(n, k).map(|(tag, slot)| (Arc::from(tag), slot)))
            .collect::<Option<Vec<_>>>()?;
        Some(Placement {
            tags,
            limit: connect.timeout().saturating_add(node_timeout),
            template,
            connect,
            state: Mutex::new(State {
                masters: vec![None; n],
                ..State::default()
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The connection info for `endpoint`: the template's, at its address.
    pub(crate) fn info(&self, endpoint: &Endpoint) -> ConnectionInfo {
        let addr = match self.template.addr() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host: endpoint.host.clone(),
                port: endpoint.port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(endpoint.host.clone(), endpoint.port),
        };
        self.template.clone().set_addr(addr)
    }

    /// Reads the layout from the first server that answers: the seed,
    /// then every server of the layout last read.
    ///
    /// # Errors
    ///
    /// What each server asked answered, when none gave a layout.
    pub(crate) async fn read(&self) -> Result<Vec<Shard>, String> {
        let mut asked = vec![self.template.clone()];
        for shard in &self.state().shards {
            for server in std::iter::once(&shard.master).chain(&shard.replicas) {
                asked.push(self.info(server));
            }
        }
        let mut failures = Vec::new();
        for info in asked {
            let host = match info.addr() {
                ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
                other => other.to_string(),
            };
            let name = info.addr().to_string();
            match tokio::time::timeout(self.limit, self.slots(info)).await {
                Ok(Ok(reply)) => return layout::parse(reply, &host),
                Ok(Err(e)) => failures.push(format!("{name}: {e}")),
                Err(_) => failures.push(format!("{name}: no answer within {:?}", self.limit)),
            }
        }
        Err(format!(
            "no server of the cluster gave its slots ({})",
            failures.join("; ")
        ))
    }

    async fn slots(&self, info: ConnectionInfo) -> Result<redis::Value, String> {
        let client = crate::node::tagged::client(info, &self.connect).map_err(|e| e.to_string())?;
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())
    }

    /// Takes `shards` as the layout: each node's master, and whether two
    /// share one. Returns the nodes whose master changed, with it.
    pub(crate) fn take(&self, shards: Vec<Shard>) -> Vec<(usize, Endpoint)> {
        let owners: Vec<Option<Endpoint>> = self
            .tags
            .iter()
            .map(|(_, slot)| layout::owner(&shards, *slot).map(|s| s.master.clone()))
            .collect();
        let mut refusal = None;
        for (k, owner) in owners.iter().enumerate() {
            let Some(owner) = owner else { continue };
            if let Some(j) = owners[..k].iter().position(|o| o.as_ref() == Some(owner)) {
                refusal = Some(self.shared_master(j, k, owner));
                break;
            }
        }
        let mut state = self.state();
        let mut moved = Vec::new();
        for (k, owner) in owners.into_iter().enumerate() {
            let shared = refusal.is_some()
                && state
                    .masters
                    .iter()
                    .enumerate()
                    .any(|(j, m)| j != k && m.as_ref() == owner.as_ref());
            if let Some(owner) = owner.filter(|o| !shared && state.masters[k].as_ref() != Some(o)) {
                state.masters[k] = Some(owner.clone());
                moved.push((k, owner));
            }
        }
        state.shards = shards;
        state.refusal = refusal;
        moved
    }

    fn shared_master(&self, j: usize, k: usize, master: &Endpoint) -> String {
        let [(tag_j, slot_j), (tag_k, slot_k)] = [&self.tags[j], &self.tags[k]];
        format!(
            "nodes {j} (hash tag {tag_j}, slot {slot_j}) and {k} (hash tag {tag_k}, slot \
             {slot_k}) of the lock are both served by master {master}: its loss would take two \
             votes. Give the cluster at least {} masters with the slots split evenly \
             (`redis-cli --cluster rebalance`), or lock over fewer nodes",
            self.tags.len()
        )
    }

    /// Why acquisitions are refused now, if they are.
    pub(crate) fn refusal(&self) -> Option<String> {
        self.state().refusal.clone()
    }

    /// Reads the layout and points every node whose slot has a new master
    /// at it.
    pub(crate) async fn refresh(&self, nodes: &[Arc<Node>]) {
        match self.read().await {
            Ok(shards) => {
                for (k, master) in self.take(shards) {
                    let Some(node) = nodes.get(k) else { continue };
                    match crate::node::tagged::client(self.info(&master), &self.connect) {
                        Ok(client) => {
                            tracing::info!(node = k, %master, "redquorum cluster: node follows its slot");
                            node.retarget(client);
                        }
                        Err(e) => {
                            tracing::warn!(node = k, %master, error = %e, "redquorum cluster: cannot follow the slot")
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "redquorum cluster: layout not read"),
        }
    }

    /// Keeps the placement up to date while `nodes` live.
    pub(crate) fn watch(self: &Arc<Self>, nodes: Weak<[Arc<Node>]>) {
        let placement = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut read_at = Instant::now();
            loop {
                tokio::time::sleep(POLL).await;
                let (Some(placement), Some(nodes)) = (placement.upgrade(), nodes.upgrade()) else {
                    return;
                };
                let doubted = nodes.iter().any(|n| n.doubts_placement());
                let since = read_at.elapsed();
                if (doubted && since >= DOUBT_GAP) || since >= REREAD {
                    for node in nodes.iter() {
                        node.trust_placement();
                    }
                    placement.refresh(&nodes).await;
                    read_at = Instant::now();
                }
            }
        });
    }
}
