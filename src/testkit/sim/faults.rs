//! Faults: what the nemesis does to nodes, links, clients and clocks, when,
//! and for how long; drawn from the seed within the fault model, or given
//! (a shrunk list, a negative control).

use std::fmt;
use std::time::Duration;

use super::node::Persistence;
use super::rng::Rng;
use super::world::{LinkMode, Process, World};

/// One fault: `kind`, from `at` (virtual time since the run began) for
/// `lasts` (instant faults ignore it).
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    /// When it starts.
    pub at: Duration,
    /// How long it lasts.
    pub lasts: Duration,
    /// What it does.
    pub kind: FaultKind,
}

impl Fault {
    /// How long its effects outlast it: a slow link's last message still
    /// travels both ways at the slow pace, and what follows it on the
    /// link waits behind it.
    pub(crate) fn aftermath(&self) -> Duration {
        match self.kind {
            FaultKind::Slow { by, .. } => by * 2,
            _ => Duration::ZERO,
        }
    }
}

/// What a fault does.
#[derive(Clone, Debug, PartialEq)]
pub enum FaultKind {
    /// Every link to `node` is slower by `by`.
    Slow {
        /// The node.
        node: usize,
        /// The extra delay each way.
        by: Duration,
    },
    /// `node`'s process is stopped (`SIGSTOP`); its commands queue.
    Hang {
        /// The node.
        node: usize,
    },
    /// `node`'s process is down; it comes back with its data intact (AOF
    /// `always`), as a new process (new `run_id`).
    Kill {
        /// The node.
        node: usize,
    },
    /// The link from `client` to `node` loses everything.
    Cut {
        /// The client.
        client: usize,
        /// The node.
        node: usize,
    },
    /// Replies from `node` to every client are lost (commands applied).
    DropReplies {
        /// The node.
        node: usize,
    },
    /// Every call from `client` to `node` fails with a connection reset.
    Reset {
        /// The client.
        client: usize,
        /// The node.
        node: usize,
    },
    /// `client`'s traffic stops (a stop-the-world pause of its process).
    PauseClient {
        /// The client.
        client: usize,
    },
    /// `node`'s clock runs at `rate` (1.0 is true time).
    ClockRate {
        /// The node.
        node: usize,
        /// Node ms per virtual ms.
        rate: f64,
    },
    /// `node`'s clock jumps forward by `by` (instant).
    ClockJump {
        /// The node.
        node: usize,
        /// How far.
        by: Duration,
    },
    /// `node` restarts at once with `persistence` (instant).
    Restart {
        /// The node.
        node: usize,
        /// What survives.
        persistence: Persistence,
    },
    /// `node` loses its data (`FLUSHALL`; instant).
    Flush {
        /// The node.
        node: usize,
    },
    /// `node`'s replica takes over with `lag` of writes lost (instant).
    Failover {
        /// The node.
        node: usize,
        /// The replication lag.
        lag: Duration,
    },
}

impl FaultKind {
    /// True for faults that can make a node forget a key before its TTL
    /// (only allowed with the restart guard on, or in negative controls).
    pub fn loses_keys(&self) -> bool {
        matches!(
            self,
            FaultKind::Restart {
                persistence: Persistence::None | Persistence::Snapshot { .. },
                ..
            } | FaultKind::Flush { .. }
                | FaultKind::Failover { .. }
        )
    }

    /// True for faults that are over as soon as they happen.
    /// A state of a node or link that lasts until the fault ends (and
    /// that another fault's end could overwrite).
    fn holds_a_state(&self) -> bool {
        matches!(
            self,
            FaultKind::Slow { .. }
                | FaultKind::DropReplies { .. }
                | FaultKind::Cut { .. }
                | FaultKind::Reset { .. }
                | FaultKind::Hang { .. }
                | FaultKind::Kill { .. }
        )
    }

    fn instant(&self) -> bool {
        matches!(
            self,
            FaultKind::ClockJump { .. }
                | FaultKind::Restart { .. }
                | FaultKind::Flush { .. }
                | FaultKind::Failover { .. }
        )
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at {:?}", self.at)?;
        if !self.kind.instant() {
            write!(f, " for {:?}", self.lasts)?;
        }
        write!(f, ": {:?}", self.kind)
    }
}

/// What the fault model allows in one run.
#[derive(Clone, Copy, Debug)]
pub struct Model {
    /// Nodes in the run.
    pub nodes: usize,
    /// Clients in the run.
    pub clients: usize,
    /// Every client runs the restart guard: restarts that lose data are
    /// allowed.
    pub guarded: bool,
    /// The fastest clock rate every client's drift allowance covers.
    pub max_rate: f64,
    /// How long the run's workload lasts.
    pub span: Duration,
}

/// Draws up to seven faults within `model`.
pub fn draw(rng: &mut Rng, model: &Model) -> Vec<Fault> {
    let count = rng.below(8);
    let mut faults: Vec<Fault> = (0..count).map(|_| draw_one(rng, model)).collect();
    // With the restart guard on, restarts come in groups too: a majority
    // restarted at once (a rack's power) is within its fault model.
    let mut grouped = Vec::new();
    for fault in &faults {
        if let FaultKind::Restart { node, persistence } = fault.kind
            && model.guarded
            && rng.chance(0.5)
        {
            for other in 1..=rng.between(1, 2) as usize {
                grouped.push(Fault {
                    kind: FaultKind::Restart {
                        node: (node + other) % model.nodes,
                        persistence,
                    },
                    ..fault.clone()
                });
            }
        }
    }
    faults.extend(grouped);
    faults.sort_by_key(|f| f.at);
    faults
}

fn draw_one(rng: &mut Rng, model: &Model) -> Fault {
    let span_ms = u64::try_from(model.span.as_millis()).unwrap_or(u64::MAX);
    let at = Duration::from_millis(rng.between(0, span_ms.saturating_sub(200)));
    let lasts = Duration::from_millis(rng.between(20, 3_000));
    let node = rng.below(model.nodes);
    let client = rng.below(model.clients);
    let kind = loop {
        let kind = match rng.below(11) {
            0 | 1 => FaultKind::Slow {
                node,
                by: Duration::from_millis(rng.between(1, 400)),
            },
            2 => FaultKind::Hang { node },
            3 => FaultKind::Kill { node },
            4 => FaultKind::Cut { client, node },
            5 => FaultKind::DropReplies { node },
            6 => FaultKind::Reset { client, node },
            7 => FaultKind::PauseClient { client },
            8 => FaultKind::ClockRate {
                node,
                rate: 0.5 + rng.unit() * (model.max_rate - 0.5),
            },
            9 => FaultKind::Restart {
                node,
                persistence: match rng.below(3) {
                    0 => Persistence::Aof,
                    1 => Persistence::None,
                    _ => Persistence::Snapshot {
                        taken_at: at.saturating_sub(Duration::from_millis(rng.between(0, 2_000))),
                    },
                },
            },
            _ => {
                if rng.chance(0.5) {
                    FaultKind::Flush { node }
                } else {
                    FaultKind::Failover {
                        node,
                        lag: Duration::from_millis(rng.between(0, 500)),
                    }
                }
            }
        };
        if model.guarded || !kind.loses_keys() {
            break kind;
        }
    };
    Fault { at, lasts, kind }
}

/// Starts `fault` in `world`.
pub(crate) fn begin(world: &mut World, fault: &Fault) {
    let now = world.elapsed();
    match fault.kind {
        FaultKind::Slow { node, by } => world.set_node_links(node, LinkMode::Slow(by)),
        FaultKind::Hang { node } => world.set_process(node, Process::Paused),
        FaultKind::Kill { node } => world.set_process(node, Process::Down),
        FaultKind::Cut { client, node } => world.set_link(client, node, LinkMode::Blackhole),
        FaultKind::DropReplies { node } => world.set_node_links(node, LinkMode::DropReplies),
        FaultKind::Reset { client, node } => world.set_link(client, node, LinkMode::Reset),
        FaultKind::PauseClient { client } => {
            let until = world.instant(now + fault.lasts);
            world.pause_client(client, until);
        }
        FaultKind::ClockRate { node, rate } => {
            world.server_mut(node).clock_mut().set_rate(now, rate)
        }
        FaultKind::ClockJump { node, by } => world
            .server_mut(node)
            .clock_mut()
            .jump(by.as_secs_f64() * 1000.0),
        FaultKind::Restart { node, persistence } => world.restart(node, persistence),
        FaultKind::Flush { node } => world.server_mut(node).flushall(),
        FaultKind::Failover { node, lag } => world.failover(node, lag),
    }
}

/// Ends `fault` in `world` (nothing for instant faults).
pub(crate) fn end(world: &mut World, fault: &Fault) {
    let now = world.elapsed();
    match fault.kind {
        FaultKind::Slow { node, .. } | FaultKind::DropReplies { node } => {
            world.set_node_links(node, LinkMode::Pass);
        }
        FaultKind::Hang { node } => world.set_process(node, Process::Up),
        FaultKind::Kill { node } => world.restart(node, Persistence::Aof),
        FaultKind::Cut { client, node } | FaultKind::Reset { client, node } => {
            world.set_link(client, node, LinkMode::Pass);
        }
        FaultKind::ClockRate { node, .. } => world.server_mut(node).clock_mut().set_rate(now, 1.0),
        FaultKind::PauseClient { .. }
        | FaultKind::ClockJump { .. }
        | FaultKind::Restart { .. }
        | FaultKind::Flush { .. }
        | FaultKind::Failover { .. } => {}
    }
}

/// Whether `fault` is in force at `at`.
pub fn active(fault: &Fault, at: Duration) -> bool {
    !fault.kind.instant() && fault.at <= at && at < fault.at + fault.lasts
}

/// Runs `faults` against `world`: each starts at its time and ends after
/// it lasted. Returns when the last one has ended.
pub(crate) async fn nemesis(world: super::world::Shared, faults: Vec<Fault>) {
    let mut events: Vec<(Duration, bool, usize)> = Vec::new();
    for (i, fault) in faults.iter().enumerate() {
        events.push((fault.at, true, i));
        if !fault.kind.instant() {
            events.push((fault.at + fault.lasts, false, i));
        }
    }
    events.sort_by_key(|&(at, starts, i)| (at, starts, i));
    for (at, starts, i) in events {
        let when = super::world::lock(&world).instant(at);
        tokio::time::sleep_until(when).await;
        let mut world = super::world::lock(&world);
        if starts {
            begin(&mut world, &faults[i]);
        } else {
            end(&mut world, &faults[i]);
        }
        if !starts || faults[i].kind.instant() {
            // Ending one fault, or a restart, must not lift another still
            // in force on the same node or link (a slow link's end would
            // pass replies a drop-replies fault still drops; a restart
            // would wake a hung node): those begin again, in the order
            // they began.
            let mut held: Vec<&Fault> = faults
                .iter()
                .enumerate()
                .filter(|&(j, f)| j != i && f.kind.holds_a_state() && f.at < at)
                .filter(|&(_, f)| at < f.at + f.lasts)
                .map(|(_, f)| f)
                .collect();
            held.sort_by_key(|f| f.at);
            for fault in held {
                begin(&mut world, fault);
            }
        }
    }
}

/// Whether `node` could have answered `client` in time during `window`
/// (virtual times): no fault that stops, cuts or slows it past
/// `node_timeout` lasted the whole window, and none that kills or
/// quarantines it began before the window and lasted into it. `quarantine`:
/// the shortest restart-guard quarantine a restarted node may keep, when
/// the guard is on; `trusted`:
/// when the operator's `init_nodes` ended (zero if it never ran), before
/// which a restart, flush or failover may have been followed by the node
/// being marked trusted at once. Used to tell which refusals a call could
/// have seen.
pub fn answers(
    faults: &[Fault],
    client: usize,
    node: usize,
    window: (Duration, Duration),
    node_timeout: Duration,
    (quarantine, trusted): (Option<Duration>, Duration),
) -> bool {
    let (from, to) = window;
    let overlaps = |f: &Fault, reach: Duration| f.at <= to && from < f.at + f.lasts + reach;
    // A slow, hung or cut-off node may still answer a call that outlasts
    // its fault (a hung node runs what it was sent once it resumes), or one
    // it answered before the fault began: only a fault in force for the
    // whole call rules an answer out, and a slow link only if its round
    // trip alone exceeds the node timeout.
    // A link has one state: a fault that sets the same one, begins later
    // and is in force during the call replaces it (a node slowed by 371
    // ms, then by 45 ms, answers at the second pace; the first comes back
    // only when the second ends).
    let covers = |i: usize, f: &Fault| {
        f.at <= from
            && to <= f.at + f.lasts
            && !faults.iter().enumerate().any(|(j, g)| {
                j != i
                    && g.at >= f.at
                    && g.at <= to
                    && (g.kind.instant() || from < g.at + g.lasts)
                    && same_state(&f.kind, &g.kind, client)
            })
    };
    faults.iter().enumerate().all(|(i, f)| {
        let covers = |f: &Fault| covers(i, f);
        let hit = match f.kind {
            FaultKind::Slow { node: n, by } => n == node && by * 2 >= node_timeout && covers(f),
            FaultKind::Hang { node: n } | FaultKind::DropReplies { node: n } => {
                n == node && covers(f)
            }
            FaultKind::Cut { client: c, node: n } | FaultKind::Reset { client: c, node: n } => {
                c == client && n == node && covers(f)
            }
            FaultKind::PauseClient { client: c } => c == client,
            // A node killed, restarted, flushed or failed over once the call
            // had begun may have answered it before.
            FaultKind::Kill { node: n } => n == node && f.at <= from,
            FaultKind::ClockRate { .. } | FaultKind::ClockJump { .. } => false,
            // An `init_nodes` that ended after the fault may have marked
            // the node trusted at once: no quarantine then.
            FaultKind::Restart { node: n, .. }
            | FaultKind::Flush { node: n }
            | FaultKind::Failover { node: n, .. } => {
                n == node && quarantine.is_some() && f.at >= trusted && f.at <= from
            }
        };
        let reach = match f.kind {
            FaultKind::Kill { .. }
            | FaultKind::Restart { .. }
            | FaultKind::Flush { .. }
            | FaultKind::Failover { .. } => quarantine.unwrap_or_default(),
            _ => Duration::ZERO,
        };
        let lasts = if f.kind.instant() {
            Duration::from_millis(1)
        } else {
            f.lasts
        };
        let f = Fault { lasts, ..f.clone() };
        !(hit && overlaps(&f, reach))
    })
}

/// Whether `a` and `b` set the same link state for `client`'s calls to
/// one node (node-wide faults set every link of their node). A process's
/// faults never free one another: a restart or a hang's end brings back
/// the hang or kill still in force.
fn same_state(a: &FaultKind, b: &FaultKind, client: usize) -> bool {
    let link = |kind: &FaultKind| match *kind {
        FaultKind::Slow { node, .. } | FaultKind::DropReplies { node } => Some(node),
        FaultKind::Cut { client: c, node } | FaultKind::Reset { client: c, node } => {
            (c == client).then_some(node)
        }
        _ => None,
    };
    matches!((link(a), link(b)), (Some(x), Some(y)) if x == y)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn fault(kind: FaultKind, at: u64, lasts: u64) -> Vec<Fault> {
        vec![Fault {
            at: MS * at as u32,
            lasts: MS * lasts as u32,
            kind,
        }]
    }

    /// Whether node 0 could answer client 0 over 100..200 ms, with a node
    /// timeout of 200 ms and no restart guard.
    fn answers_the_call(faults: &[Fault]) -> bool {
        answers(
            faults,
            0,
            0,
            (MS * 100, MS * 200),
            MS * 200,
            (None, Duration::ZERO),
        )
    }

    #[test]
    fn a_node_hung_for_the_whole_call_cannot_answer_and_one_that_resumes_in_time_can() {
        let hang = FaultKind::Hang { node: 0 };
        assert!(!answers_the_call(&fault(hang.clone(), 50, 200)));
        assert!(answers_the_call(&fault(hang.clone(), 50, 100)));
        assert!(answers_the_call(&fault(hang, 150, 200)));
        let other = FaultKind::Hang { node: 1 };
        assert!(answers_the_call(&fault(other, 50, 200)));
    }

    #[test]
    fn a_slow_node_can_answer_unless_its_round_trip_alone_outlasts_the_node_timeout() {
        let slow = |by: u64| FaultKind::Slow {
            node: 0,
            by: MS * by as u32,
        };
        assert!(answers_the_call(&fault(slow(67), 0, 1000)));
        assert!(answers_the_call(&fault(slow(99), 0, 1000)));
        assert!(!answers_the_call(&fault(slow(100), 0, 1000)));
    }

    #[test]
    fn a_cut_link_blocks_only_its_own_client() {
        let cut = |client| FaultKind::Cut { client, node: 0 };
        assert!(!answers_the_call(&fault(cut(0), 0, 1000)));
        assert!(answers_the_call(&fault(cut(1), 0, 1000)));
    }

    #[test]
    fn a_slow_node_whose_slowness_a_later_fault_replaced_can_answer() {
        let slow = |by: u32, at, lasts| {
            fault(
                FaultKind::Slow {
                    node: 0,
                    by: MS * by,
                },
                at,
                lasts,
            )
        };
        let window = (MS * 100, MS * 200);
        let check =
            |faults: &[Fault]| answers(faults, 0, 0, window, MS * 200, (None, Duration::ZERO));
        let too_slow = slow(150, 0, 1000);
        assert!(!check(&too_slow));
        // Slowed less from 50 ms, or from 150 ms (during the call).
        for at in [50, 150] {
            let faults = [too_slow.clone(), slow(10, at, 1000)].concat();
            assert!(check(&faults), "replaced at {at} ms");
        }
        // A later fault on another node, or one over before the first,
        // replaces nothing.
        let other = fault(FaultKind::Slow { node: 1, by: MS }, 50, 1000);
        assert!(!check(&[too_slow.clone(), other].concat()));
        let before = slow(10, 0, 10);
        assert!(!check(&[before, slow(150, 20, 1000)].concat()));
        // One that began later but ended before the call gave the first
        // back.
        assert!(!check(&[too_slow.clone(), slow(10, 50, 20)].concat()));
    }

    #[test]
    fn a_node_restarted_before_init_nodes_ended_may_answer_at_once() {
        let restart = fault(
            FaultKind::Restart {
                node: 0,
                persistence: Persistence::None,
            },
            1,
            0,
        );
        let window = (MS * 100, MS * 200);
        let guarded = |trusted: u32| (Some(MS * 5_000), MS * trusted);
        assert!(!answers(&restart, 0, 0, window, MS * 200, guarded(0)));
        assert!(!answers(&restart, 0, 0, window, MS * 200, guarded(1)));
        assert!(answers(&restart, 0, 0, window, MS * 200, guarded(5)));
    }

    #[test]
    fn a_node_restarted_or_killed_once_the_call_began_may_have_answered_it() {
        let guarded = (Some(MS * 5_000), Duration::ZERO);
        let window = (MS * 100, MS * 200);
        let restart = |at| {
            fault(
                FaultKind::Restart {
                    node: 0,
                    persistence: Persistence::None,
                },
                at,
                0,
            )
        };
        assert!(!answers(&restart(90), 0, 0, window, MS * 200, guarded));
        assert!(!answers(&restart(100), 0, 0, window, MS * 200, guarded));
        assert!(answers(&restart(101), 0, 0, window, MS * 200, guarded));
        let kill = |at| fault(FaultKind::Kill { node: 0 }, at, 50);
        assert!(!answers(&kill(80), 0, 0, window, MS * 200, guarded));
        assert!(answers(&kill(150), 0, 0, window, MS * 200, guarded));
    }
}
