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
    /// Commands delivered to nodes, for the run's statistics.
    pub(crate) delivered: u64,
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
}

impl World {
    /// A world of `nodes` fresh nodes and `clients` clients, with link
    /// latencies drawn from `seed`.
    pub fn new(seed: u64, nodes: usize, clients: usize) -> Self {
        let start = Instant::now();
        let mut rng = Rng::new(seed ^ 0x6e65_7477_6f72_6b00);
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
            rng,
            delivered: 0,
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
    }

    /// Restarts node `index` with `persistence` (a kill then a start).
    pub fn restart(&mut self, index: usize, persistence: Persistence) {
        let now = self.elapsed();
        self.nodes[index].server.restart(now, persistence);
        self.set_process(index, Process::Up);
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
        let arrival = (sent + link.latency + jitter + extra).max(link.last_arrival);
        link.last_arrival = arrival;
        Fate::Arrives(arrival)
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
                Delivery::Reply(target.server.execute(now, args))
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
    /// Its reply, as RESP bytes.
    Reply(Vec<u8>),
    /// The process is stopped: wait for this, then deliver again.
    Wait(Arc<Notify>),
    /// The process is gone: the connection breaks.
    Gone,
}
