//! The simulated world: the nodes, the links between each client and each
//! node, the faults in force, and the virtual clock they all read.
//!
//! A link is FIFO, like one TCP connection: a command arrives no earlier
//! than the one sent before it on the same link, and so do replies. A
//! command that was sent is applied whatever becomes of the caller (a call
//! that timed out client-side still lands), unless a fault loses it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::node::{Persistence, SimNode};
use super::pubsub::{Push, Subscribers};
use super::rng::Rng;

/// What a link does with the traffic it carries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LinkMode {
    /// Delivered after the link's latency.
    Pass,
    /// Delivered after the latency plus this much more, both ways.
    Slow(Duration),
    /// Neither commands nor replies get through; calls hang.
    Blackhole,
    /// Commands are applied; their replies are lost.
    DropReplies,
    /// Every call fails at once with a connection reset (not applied).
    Reset,
}

/// The state of one simulated server process.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Process {
    /// Running and answering.
    Up,
    /// Stopped (`SIGSTOP`): commands queue and run when it resumes.
    Paused,
    /// Not running: connections are refused.
    Down,
}

/// One link's state: its mode, latency and the FIFO bounds.
#[derive(Debug)]
struct Link {
    mode: LinkMode,
    latency: Duration,
    /// When the last command sent on it arrives at the node.
    last_arrival: Instant,
    /// When the last reply sent on it arrives at the client.
    last_reply: Instant,
}

/// One node: the simulated server and its process state.
struct Node {
    server: SimNode,
    process: Process,
    /// Woken when a paused process resumes or a dead one starts.
    resumed: Arc<Notify>,
}

/// Everything shared by the links and the nemesis of one run.
pub struct World {
    start: Instant,
    nodes: Vec<Node>,
    /// `links[client][node]`.
    links: Vec<Vec<Link>>,
    /// Clients paused until this instant (their traffic waits).
    paused_clients: Vec<Option<Instant>>,
    rng: Rng,
    /// Per client, how far a command may overtake the ones sent before it
    /// on the same link (zero: one FIFO connection).
    reorder: Vec<Duration>,
    /// Draws for the unordered links only, so that every other draw is
    /// the same with or without them.
    reorder_rng: Rng,
    /// Per node, the hash tag in front of its keys when the clients key
    /// the nodes as the masters of a Redis Cluster.
    tags: Vec<Option<String>>,
    /// Commands delivered to nodes, for the run's statistics.
    pub(crate) delivered: u64,
    /// The clients' pub/sub connections.
    pub(crate) subscribers: Subscribers,
}

/// The world, shared by every link of a run.
pub type Shared = Arc<Mutex<World>>;

/// Locks the world (a poisoned lock is taken as it is: a panicking test
/// already failed).
pub(crate) fn lock(world: &Shared) -> std::sync::MutexGuard<'_, World> {
    world.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The fate of one command, decided when it is sent.
pub(crate) enum Fate {
    /// Fails at once with this I/O error (not applied).
    Fail(std::io::ErrorKind, &'static str),
    /// Never answered (and never applied).
    Lost,
    /// Arrives at the node at this instant.
    Arrives(Instant),
    /// Arrives at this instant, on a link whose commands may overtake one
    /// another ([`World::set_unordered`]).
    Unordered(Instant),
}

impl World {
    /// A world of `nodes` fresh nodes and `clients` clients, with link
    /// latencies drawn from `seed`.
    pub fn new(seed: u64, nodes: usize, clients: usize) -> Self {
        let start = Instant::now();
        let mut rng = Rng::new(seed ^ 0x6e65_7477_6f72_6b00);
        let node_count = nodes;
        let nodes = (0..nodes)
            .map(|index| Node {
                server: SimNode::new(index, rng.next_u64()),
                process: Process::Up,
                resumed: Arc::new(Notify::new()),
            })
            .collect::<Vec<_>>();
        let links = (0..clients)
            .map(|_| {
                (0..nodes.len())
                    .map(|_| Link {
                        mode: LinkMode::Pass,
                        latency: Duration::from_micros(100 + rng.below(900) as u64),
                        last_arrival: start,
                        last_reply: start,
                    })
                    .collect()
            })
            .collect();
        World {
            start,
            nodes,
            links,
            paused_clients: vec![None; clients],
            reorder: vec![Duration::ZERO; clients],
            reorder_rng: Rng::new(seed ^ 0x756e_6f72_6465_7200),
            tags: vec![None; node_count],
            rng,
            delivered: 0,
            subscribers: Subscribers::default(),
        }
    }

    /// Virtual time since the run began.
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(self.start)
    }

    /// The instant `at` after the run began.
    pub fn instant(&self, at: Duration) -> Instant {
        self.start + at
    }

    /// How many nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The simulated server of node `index`.
    pub fn server(&self, index: usize) -> &SimNode {
        &self.nodes[index].server
    }

    /// The simulated server of node `index`, to change.
    pub fn server_mut(&mut self, index: usize) -> &mut SimNode {
        &mut self.nodes[index].server
    }

    /// The process state of node `index`.
    pub fn process(&self, index: usize) -> Process {
        self.nodes[index].process
    }

    /// Sets the mode of the link from `client` to `node`.
    pub fn set_link(&mut self, client: usize, node: usize, mode: LinkMode) {
        self.links[client][node].mode = mode;
        if mode == LinkMode::Reset {
            self.subscribers.break_link(client, node);
        }
    }

    /// The mode of the link from `client` to `node`.
    pub fn link(&self, client: usize, node: usize) -> LinkMode {
        self.links[client][node].mode
    }

    /// Sets the mode of every client's link to `node`.
    pub fn set_node_links(&mut self, node: usize, mode: LinkMode) {
        for client in 0..self.links.len() {
            self.set_link(client, node, mode);
        }
    }

    /// Stops (`Paused`), kills (`Down`) or resumes (`Up`) node `index`.
    pub fn set_process(&mut self, index: usize, process: Process) {
        let node = &mut self.nodes[index];
        node.process = process;
        if process == Process::Up {
            node.resumed.notify_waiters();
        }
        if process == Process::Down {
            self.subscribers.break_node(index);
        }
    }

    /// Restarts node `index` with `persistence` (a kill then a start).
    pub fn restart(&mut self, index: usize, persistence: Persistence) {
        let now = self.elapsed();
        self.nodes[index].server.restart(now, persistence);
        self.subscribers.break_node(index);
        self.set_process(index, Process::Up);
    }

    /// A replica of node `index` takes over, `lag` behind it: another
    /// process, so its connections break.
    pub fn failover(&mut self, index: usize, lag: Duration) {
        let now = self.elapsed();
        self.nodes[index].server.failover(now, lag);
        self.subscribers.break_node(index);
    }

    /// Ends every fault: processes up (a dead one restarted with its data),
    /// links passing, clocks at true rate, no client paused.
    pub fn heal(&mut self) {
        let now = self.elapsed();
        for index in 0..self.nodes.len() {
            match self.nodes[index].process {
                Process::Down => self.restart(index, Persistence::Aof),
                Process::Paused => self.set_process(index, Process::Up),
                Process::Up => {}
            }
            self.nodes[index].server.clock_mut().set_rate(now, 1.0);
            self.set_node_links(index, LinkMode::Pass);
        }
        self.paused_clients.fill(None);
    }

    /// Pauses `client`'s traffic until `until`.
    pub fn pause_client(&mut self, client: usize, until: Instant) {
        self.paused_clients[client] = Some(until);
    }

    /// Until when `client` is paused, if it is now.
    pub fn client_paused_until(&self, client: usize) -> Option<Instant> {
        self.paused_clients[client].filter(|until| *until > Instant::now())
    }

    /// Makes `client`'s calls to every node travel as over several
    /// connections (a service that uses one client from several runtimes
    /// has one connection per runtime): a call may overtake the calls sent
    /// before it by less than `window`, never by more.
    pub fn set_unordered(&mut self, client: usize, window: Duration) {
        self.reorder[client] = window;
    }

    /// Keys the nodes as the masters of a Redis Cluster: node `k`'s keys
    /// carry `tags[k]` (`{tag}key`).
    pub fn set_tags(&mut self, tags: Vec<String>) {
        self.tags = tags.into_iter().map(Some).collect();
    }

    /// `key` as node `node` stores it: with its hash tag in front on a
    /// cluster.
    pub fn stored_key<'k>(&self, node: usize, key: &'k str) -> std::borrow::Cow<'k, str> {
        match self.tags.get(node) {
            Some(Some(tag)) => std::borrow::Cow::Owned(format!("{{{tag}}}{key}")),
            _ => std::borrow::Cow::Borrowed(key),
        }
    }

    /// [`stored_key`](Self::stored_key) written into `buf`, which the
    /// oracle reuses at every tick instead of allocating a key.
    pub(crate) fn stored_key_in<'b>(&self, node: usize, key: &str, buf: &'b mut String) -> &'b str {
        buf.clear();
        if let Some(Some(tag)) = self.tags.get(node) {
            buf.push('{');
            buf.push_str(tag);
            buf.push('}');
        }
        buf.push_str(key);
        buf
    }

    /// How far `client`'s calls may overtake one another (zero: FIFO).
    pub fn unordered(&self, client: usize) -> Duration {
        self.reorder[client]
    }

    /// Decides what becomes of a command `client` sends to `node` now.
    pub(crate) fn send(&mut self, client: usize, node: usize) -> Fate {
        match self.nodes[node].process {
            Process::Down => {
                return Fate::Fail(
                    std::io::ErrorKind::ConnectionRefused,
                    "Connection refused (os error 111)",
                );
            }
            Process::Up | Process::Paused => {}
        }
        let jitter = Duration::from_micros(self.rng.below(200) as u64);
        let sent = self
            .client_paused_until(client)
            .unwrap_or_else(Instant::now);
        let link = &mut self.links[client][node];
        let extra = match link.mode {
            LinkMode::Reset => {
                return Fate::Fail(
                    std::io::ErrorKind::ConnectionReset,
                    "Connection reset by peer (os error 104)",
                );
            }
            LinkMode::Blackhole => return Fate::Lost,
            LinkMode::Slow(by) => by,
            LinkMode::Pass | LinkMode::DropReplies => Duration::ZERO,
        };
        let window = self.reorder[client];
        if window.is_zero() {
            let arrival = (sent + link.latency + jitter + extra).max(link.last_arrival);
            link.last_arrival = arrival;
            return Fate::Arrives(arrival);
        }
        // Several connections: a command may overtake the ones sent
        // before it, by less than the window.
        let spread =
            Duration::from_micros(self.reorder_rng.below(window.as_micros() as usize) as u64);
        let floor = link
            .last_arrival
            .checked_sub(window)
            .unwrap_or(link.last_arrival);
        let arrival = (sent + link.latency + jitter + extra + spread).max(floor);
        link.last_arrival = link.last_arrival.max(arrival);
        Fate::Unordered(arrival)
    }

    /// When every command `client` has sent has reached its node and every
    /// reply its client: before it, a new call may queue behind old ones.
    pub(crate) fn drained_at(&self, client: usize) -> Instant {
        self.links[client]
            .iter()
            .map(|link| link.last_arrival.max(link.last_reply))
            .max()
            .unwrap_or(self.start)
    }

    /// Runs `args` on `node` if it is up (`None`: paused, wait for
    /// [`resumed`](Self::resumed); `Some(None)`: down or flushed away).
    pub(crate) fn deliver(&mut self, node: usize, args: &[Vec<u8>]) -> Delivery {
        let now = self.elapsed();
        let target = &mut self.nodes[node];
        match target.process {
            Process::Paused => Delivery::Wait(target.resumed.clone()),
            Process::Down => Delivery::Gone,
            Process::Up => {
                self.delivered += 1;
                let reply = target.server.execute_value(now, args);
                let published = target.server.take_published();
                if !published.is_empty() {
                    self.publish(node, &published);
                }
                Delivery::Reply(reply)
            }
        }
    }

    /// Opens a subscriber connection from `client` to `node`; `None` when
    /// the node is down (refused).
    pub(crate) fn open_subscriber(
        &mut self,
        client: usize,
        node: usize,
    ) -> Option<(u64, tokio::sync::mpsc::UnboundedReceiver<Push>)> {
        if self.nodes[node].process == Process::Down {
            return None;
        }
        let run_id = self.nodes[node].server.run_id().to_owned();
        Some(self.subscribers.open(client, node, &run_id))
    }

    /// Runs `args`, a `SUBSCRIBE` (`on`) or `UNSUBSCRIBE`, on subscriber
    /// connection `id` to `node`: the node checks it (arity, ACL), and if
    /// it takes it the connection's channels change.
    pub(crate) fn subscription(
        &mut self,
        id: u64,
        node: usize,
        args: &[Vec<u8>],
        on: bool,
    ) -> Delivery {
        let now = self.elapsed();
        let target = &mut self.nodes[node];
        match target.process {
            Process::Paused => return Delivery::Wait(target.resumed.clone()),
            Process::Down => return Delivery::Gone,
            Process::Up => {}
        }
        let Some(channels) = self.subscribers.channels(id, target.server.run_id()) else {
            return Delivery::Gone;
        };
        let reply = target.server.execute_value(now, args);
        if matches!(reply, Ok(ref value) if !matches!(value, redis::Value::ServerError(_))) {
            for channel in &args[1..] {
                if on {
                    channels.insert(channel.clone());
                } else {
                    channels.remove(channel);
                }
            }
        }
        Delivery::Reply(reply)
    }

    /// Sends what `node` published to the connections subscribed to it,
    /// each over its client's link (lost where the link loses replies).
    fn publish(&mut self, node: usize, published: &[(Vec<u8>, Vec<u8>)]) {
        for (channel, payload) in published {
            let run_id = self.nodes[node].server.run_id();
            for (id, client) in self.subscribers.listening(node, run_id, channel) {
                let link = &self.links[client][node];
                let extra = match link.mode {
                    LinkMode::Blackhole | LinkMode::DropReplies | LinkMode::Reset => continue,
                    LinkMode::Slow(by) => by,
                    LinkMode::Pass => Duration::ZERO,
                };
                let after = link.latency + extra;
                let jitter = Duration::from_micros(self.rng.below(200) as u64);
                let paused = self.client_paused_until(client);
                self.subscribers
                    .push(id, after + jitter, paused, (channel, payload));
            }
        }
    }

    /// When the reply to a command applied now reaches `client` (`None`:
    /// the reply is lost).
    pub(crate) fn reply_at(&mut self, client: usize, node: usize) -> Option<Instant> {
        let jitter = Duration::from_micros(self.rng.below(200) as u64);
        let paused = self.client_paused_until(client);
        let link = &mut self.links[client][node];
        let extra = match link.mode {
            LinkMode::Blackhole | LinkMode::DropReplies => return None,
            LinkMode::Slow(by) => by,
            LinkMode::Pass | LinkMode::Reset => Duration::ZERO,
        };
        let mut at = (Instant::now() + link.latency + jitter + extra).max(link.last_reply);
        if let Some(until) = paused {
            at = at.max(until);
        }
        link.last_reply = at;
        Some(at)
    }
}

/// What a node did with a command that reached it.
pub(crate) enum Delivery {
    /// Its reply, as the connection's decoder reads it.
    Reply(redis::RedisResult<redis::Value>),
    /// The process is stopped: wait for this, then deliver again.
    Wait(Arc<Notify>),
    /// The process is gone: the connection breaks.
    Gone,
}
