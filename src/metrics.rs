//! Metrics, with the `metrics` feature: recorded through the `metrics`
//! crate's facade, so any recorder works (Prometheus, OpenTelemetry,
//! StatsD, ...). Recording allocates nothing (unless the resource label
//! is on): without a recorder installed each record is a thread-local
//! read, an atomic load and a call to the facade's no-op recorder;
//! without the feature, nothing at all.
//!
//! Names follow OpenTelemetry's conventions (dots, durations in seconds,
//! the unit as metadata). Call [`describe`] once after installing the
//! recorder to give each metric its unit and help text: then
//! `metrics-exporter-prometheus` with its recommended naming
//! (`PrometheusBuilder::with_recommended_naming(true)`) shows the names
//! Prometheus expects, the unit in the name and `_total` on counters:
//! `redquorum.lock.acquire.duration` as
//! `redquorum_lock_acquire_duration_seconds`, `redquorum.node.votes` as
//! `redquorum_node_votes_total`.
//!
//! | name | kind | unit | labels | what |
//! |---|---|---|---|---|
//! | `redquorum.lock.acquire.duration` | histogram | s | `outcome` | one acquisition attempt, from its first request to its decision (a failed attempt's clean-up, in the background, not included); `outcome`: `acquired`, `contended`, `unavailable`, `misconfigured`, `validity_exhausted` |
//! | `redquorum.lock.wait.duration` | histogram | s | `outcome` | one `lock()`/`try_lock()` (and the `_many`, `_reentrant` kinds) from call to return, retries and pauses included; `outcome` as above, of the last attempt |
//! | `redquorum.lock.acquire.attempts` | histogram | {attempt} | `outcome` | attempts made by one such call |
//! | `redquorum.lock.hold.duration` | histogram | s | `outcome` | from the start of the acquisition to the release: `released` (a quorum still held it), `expired` (validity ran out, or more than N − quorum nodes no longer held it), `unconfirmed` (too few nodes answered the release), `dropped` (the guard was dropped) |
//! | `redquorum.lock.extensions` | counter | {extension} | `outcome` | extension rounds, yours and the watchdog's: `ok` or `failed` |
//! | `redquorum.lock.extension.margin` | histogram | s | | validity that was left when an extension landed: how close the lock came to lapsing |
//! | `redquorum.lock.lost` | counter | {lock} | | locks lost while held: the watchdog gave up, or an extension found that a quorum no longer holds the lock |
//! | `redquorum.node.votes` | counter | {vote} | `server.address`, `server.port`, `db.operation.name`, `outcome` | each node answer, by outcome, the late ones (after the round was decided) included, so a hung or dead node shows even when the others decide every round without it: `granted`, `refused`, `timed_out`, `quarantined` (the restart guard refused the vote), `failed` |
//! | `redquorum.node.call.duration` | histogram | s | `server.address`, `server.port`, `db.operation.name` | one call to one node, answered or timed out, late ones included |
//! | `redquorum.node.misconfigured` | gauge | {problem} | `server.address`, `server.port` | problems the last start-up check found on the node, warnings left out (0 when none; an unreachable node is not counted) |
//! | `redquorum.node.up` | gauge | | `server.address`, `server.port` | 1 when the node's last call (or start-up check) got an answer from the server, an error reply included; 0 when it timed out or the connection failed |
//!
//! `db.operation.name` is `acquire`, `fence` (the fencing write-back),
//! `extend` or `release`. Cardinality is bounded: one series per node and
//! outcome. The lock metrics carry a `redquorum.resource` label only when
//! asked for with
//! [`Config::with_metrics_resource_label`](crate::Config::with_metrics_resource_label)
//! (do so only for a bounded set of resource names).
//!
//! ```no_run
//! # #[cfg(feature = "metrics")]
//! # fn install() {
//! // With a recorder of your choice installed:
//! redquorum::metrics::describe();
//! # }
//! ```

#![cfg_attr(not(feature = "metrics"), allow(unused_variables, dead_code))]

use std::time::Duration;

use crate::config::Config;

/// One acquisition attempt, by `outcome` (histogram, seconds).
pub const ACQUIRE_DURATION: &str = "redquorum.lock.acquire.duration";
/// One `lock()` call, retries included, by `outcome` (histogram, seconds).
pub const WAIT_DURATION: &str = "redquorum.lock.wait.duration";
/// Attempts per `lock()` call, by `outcome` (histogram).
pub const ACQUIRE_ATTEMPTS: &str = "redquorum.lock.acquire.attempts";
/// Acquisition to release, by `outcome` (histogram, seconds).
pub const HOLD_DURATION: &str = "redquorum.lock.hold.duration";
/// Extension rounds, by `outcome` `ok` or `failed` (counter).
pub const EXTENSIONS: &str = "redquorum.lock.extensions";
/// Validity left when an extension landed (histogram, seconds).
pub const EXTENSION_MARGIN: &str = "redquorum.lock.extension.margin";
/// Locks lost while held (counter).
pub const LOST: &str = "redquorum.lock.lost";
/// Node answers, late ones included, by node, operation and `outcome` (counter).
pub const NODE_VOTES: &str = "redquorum.node.votes";
/// One call to one node, by node and operation (histogram, seconds).
pub const NODE_CALL_DURATION: &str = "redquorum.node.call.duration";
/// Problems the last start-up check found on a node (gauge).
pub const NODE_MISCONFIGURED: &str = "redquorum.node.misconfigured";
/// Whether the node answered its last call: 1 or 0 (gauge).
pub const NODE_UP: &str = "redquorum.node.up";

/// Gives every metric its unit and help text in the recorder installed
/// now (a Prometheus exporter shows them as `# HELP` lines). Does nothing
/// without the `metrics` feature.
///
/// ```
/// redquorum::metrics::describe(); // no recorder: nothing happens
/// ```
pub fn describe() {
    #[cfg(feature = "metrics")]
    {
        use ::metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
        let s = Unit::Seconds;
        describe_histogram!(ACQUIRE_DURATION, s, "One acquisition attempt, by outcome");
        describe_histogram!(WAIT_DURATION, s, "One lock() call, retries included");
        describe_histogram!(ACQUIRE_ATTEMPTS, Unit::Count, "Attempts per lock() call");
        describe_histogram!(HOLD_DURATION, s, "From acquisition to release, by outcome");
        describe_counter!(EXTENSIONS, Unit::Count, "Extension rounds, ok or failed");
        describe_histogram!(
            EXTENSION_MARGIN,
            s,
            "Validity left when an extension landed"
        );
        describe_counter!(LOST, Unit::Count, "Locks lost while held");
        describe_counter!(
            NODE_VOTES,
            Unit::Count,
            "Node answers, late ones included, by outcome"
        );
        describe_histogram!(NODE_CALL_DURATION, s, "One call to one node");
        describe_gauge!(
            NODE_MISCONFIGURED,
            Unit::Count,
            "Problems found on the node"
        );
        describe_gauge!(
            NODE_UP,
            "1 when the node answered its last call, 0 when it timed out or could not be reached"
        );
    }
}

/// The labels of one lock's metrics: its resource when the config asks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lock<'a> {
    resource: Option<&'a str>,
}

/// The metrics of `resource`'s lock under `config`.
pub(crate) fn lock<'a>(config: &Config, resource: &'a str) -> Lock<'a> {
    Lock {
        resource: config.metrics_resource_label().then_some(resource),
    }
}

impl Lock<'_> {
    /// One acquisition attempt ended with `outcome` after `elapsed`.
    pub(crate) fn attempt(&self, outcome: &'static str, elapsed: Duration) {
        #[cfg(feature = "metrics")]
        self.histogram(ACQUIRE_DURATION, Some(outcome), elapsed.as_secs_f64());
    }

    /// A `lock()` call returned with `outcome` after `waited` and `attempts`.
    pub(crate) fn acquisition(&self, outcome: &'static str, waited: Duration, attempts: u32) {
        #[cfg(feature = "metrics")]
        {
            self.histogram(WAIT_DURATION, Some(outcome), waited.as_secs_f64());
            self.histogram(ACQUIRE_ATTEMPTS, Some(outcome), f64::from(attempts));
        }
    }

    /// A hold ended with `outcome` after `held`.
    pub(crate) fn hold_ended(&self, outcome: &'static str, held: Duration) {
        #[cfg(feature = "metrics")]
        self.histogram(HOLD_DURATION, Some(outcome), held.as_secs_f64());
    }

    /// An extension round ended; `margin`: the validity left when it landed.
    pub(crate) fn extension(&self, margin: Option<Duration>) {
        #[cfg(feature = "metrics")]
        {
            let outcome = if margin.is_some() { "ok" } else { "failed" };
            let key = self.key(EXTENSIONS, Some(outcome));
            ::metrics::with_recorder(|r| r.register_counter(&key, &META).increment(1));
            if let Some(margin) = margin {
                self.histogram(EXTENSION_MARGIN, None, margin.as_secs_f64());
            }
        }
    }

    /// The lock was lost while held.
    pub(crate) fn lost(&self) {
        #[cfg(feature = "metrics")]
        {
            let key = self.key(LOST, None);
            ::metrics::with_recorder(|r| r.register_counter(&key, &META).increment(1));
        }
    }

    #[cfg(feature = "metrics")]
    fn histogram(&self, name: &'static str, outcome: Option<&'static str>, value: f64) {
        let key = self.key(name, outcome);
        ::metrics::with_recorder(|r| r.register_histogram(&key, &META).record(value));
    }

    /// `name` with `outcome` and, when asked for, the resource; without
    /// the resource the labels are static: nothing is allocated.
    #[cfg(feature = "metrics")]
    fn key(&self, name: &'static str, outcome: Option<&'static str>) -> ::metrics::Key {
        use ::metrics::{Key, Label};
        let fixed = match outcome {
            None => Some(&[][..]),
            Some(outcome) => OUTCOMES
                .iter()
                .position(|o| *o == outcome)
                .map(|i| &OUTCOME_LABELS[i][..]),
        };
        match (self.resource, fixed) {
            (None, Some(labels)) => Key::from_static_labels(name, labels),
            (resource, _) => {
                let mut labels = Vec::with_capacity(2);
                if let Some(outcome) = outcome {
                    labels.push(Label::from_static_parts("outcome", outcome));
                }
                if let Some(resource) = resource {
                    labels.push(Label::new("redquorum.resource", resource.to_owned()));
                }
                Key::from_parts(name, labels)
            }
        }
    }
}

/// Where every metric says it comes from.
#[cfg(feature = "metrics")]
static META: ::metrics::Metadata<'static> =
    ::metrics::Metadata::new(module_path!(), ::metrics::Level::INFO, None);

/// Every `outcome` of the lock metrics, and its label.
#[cfg(feature = "metrics")]
const OUTCOMES: [&str; 11] = [
    "acquired",
    "contended",
    "unavailable",
    "misconfigured",
    "validity_exhausted",
    "released",
    "expired",
    "dropped",
    "ok",
    "failed",
    "unconfirmed",
];
#[cfg(feature = "metrics")]
static OUTCOME_LABELS: [[::metrics::Label; 1]; OUTCOMES.len()] = {
    use ::metrics::Label;
    let o = OUTCOMES;
    [
        [Label::from_static_parts("outcome", o[0])],
        [Label::from_static_parts("outcome", o[1])],
        [Label::from_static_parts("outcome", o[2])],
        [Label::from_static_parts("outcome", o[3])],
        [Label::from_static_parts("outcome", o[4])],
        [Label::from_static_parts("outcome", o[5])],
        [Label::from_static_parts("outcome", o[6])],
        [Label::from_static_parts("outcome", o[7])],
        [Label::from_static_parts("outcome", o[8])],
        [Label::from_static_parts("outcome", o[9])],
        [Label::from_static_parts("outcome", o[10])],
    ]
};

/// The operations whose node calls are counted: `db.operation.name`.
#[cfg(feature = "metrics")]
const OPS: [&str; 4] = ["acquire", "fence", "extend", "release"];
/// The outcomes of a node vote.
#[cfg(feature = "metrics")]
const VOTES: [&str; 5] = ["granted", "refused", "timed_out", "quarantined", "failed"];

/// The label sets of one node's metrics, made once per server address
/// and kept for the life of the process (a few hundred bytes per distinct
/// address), so that recording a node call allocates nothing.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeLabels {
    #[cfg(feature = "metrics")]
    keys: &'static NodeKeys,
}

#[cfg(feature = "metrics")]
#[derive(Debug)]
struct NodeKeys {
    /// Per operation: `server.address`, `server.port`, `db.operation.name`.
    calls: [&'static [::metrics::Label]; OPS.len()],
    /// The same with each vote `outcome`.
    votes: [[&'static [::metrics::Label]; VOTES.len()]; OPS.len()],
    /// `server.address`, `server.port` alone.
    node: &'static [::metrics::Label],
}

impl NodeLabels {
    /// The labels of the node at `server` (`host:port`).
    pub(crate) fn new(server: &str) -> Self {
        #[cfg(feature = "metrics")]
        {
            use std::sync::{Mutex, PoisonError};
            static MADE: Mutex<Vec<(String, &'static NodeKeys)>> = Mutex::new(Vec::new());
            let mut made = MADE.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((_, keys)) = made.iter().find(|(s, _)| s == server) {
                return NodeLabels { keys };
            }
            let keys: &'static NodeKeys = Box::leak(Box::new(node_keys(server)));
            made.push((server.to_owned(), keys));
            NodeLabels { keys }
        }
        #[cfg(not(feature = "metrics"))]
        NodeLabels {}
    }
}

#[cfg(feature = "metrics")]
fn node_keys(server: &str) -> NodeKeys {
    use ::metrics::Label;
    let leak = |labels: Vec<Label>| -> &'static [Label] { Box::leak(labels.into_boxed_slice()) };
    let with = |op: &'static str, vote: Option<&'static str>| {
        let mut labels = node_labels(server);
        labels.push(Label::from_static_parts("db.operation.name", op));
        if let Some(vote) = vote {
            labels.push(Label::from_static_parts("outcome", vote));
        }
        leak(labels)
    };
    NodeKeys {
        calls: OPS.map(|op| with(op, None)),
        votes: OPS.map(|op| VOTES.map(|vote| with(op, Some(vote)))),
        node: leak(node_labels(server)),
    }
}

/// One call of `op` to the node labelled `node` took `elapsed` and ended
/// in `vote`, whether or not its round had been decided by then; `up`:
/// the server answered (an error reply included), `None` when a newer
/// call's answer already told (the gauge keeps that).
pub(crate) fn node_call(
    (op, node): (&'static str, &NodeLabels),
    (vote, up): (&'static str, Option<bool>),
    elapsed: Duration,
) {
    #[cfg(feature = "metrics")]
    {
        use ::metrics::Key;
        if let Some(up) = up {
            let key = Key::from_static_labels(NODE_UP, node.keys.node);
            ::metrics::with_recorder(|r| {
                r.register_gauge(&key, &META).set(f64::from(u8::from(up)));
            });
        }
        let Some(o) = OPS.iter().position(|o| *o == op) else {
            return;
        };
        if let Some(v) = VOTES.iter().position(|v| *v == vote) {
            let key = Key::from_static_labels(NODE_VOTES, node.keys.votes[o][v]);
            ::metrics::with_recorder(|r| r.register_counter(&key, &META).increment(1));
        }
        let key = Key::from_static_labels(NODE_CALL_DURATION, node.keys.calls[o]);
        ::metrics::with_recorder(|r| {
            r.register_histogram(&key, &META)
                .record(elapsed.as_secs_f64());
        });
    }
}

/// Sets each node's reachability where `news` says the checks are the
/// newest word on it (by position), and each reachable node's count of
/// problems found by the start-up checks, warnings left out (an
/// unreachable node keeps its last count).
pub(crate) fn checked(checks: &[crate::error::node_check::NodeCheck], news: &[bool]) {
    #[cfg(feature = "metrics")]
    for (check, _) in checks.iter().zip(news).filter(|(_, news)| **news) {
        ::metrics::gauge!(NODE_UP, node_labels(check.node()))
            .set(f64::from(u8::from(check.reachable())));
    }
    #[cfg(not(feature = "metrics"))]
    let _ = news;
    #[cfg(feature = "metrics")]
    for check in checks.iter().filter(|c| c.reachable()) {
        use crate::error::problem::NodeProblem;
        let problems = check.problems().iter();
        let found =
            problems.filter(|p| !p.is_warning() && !matches!(p, NodeProblem::Unreachable { .. }));
        ::metrics::gauge!(NODE_MISCONFIGURED, node_labels(check.node())).set(found.count() as f64);
    }
}

#[cfg(feature = "metrics")]
fn node_labels(server: &str) -> Vec<::metrics::Label> {
    let (address, port) = crate::spans::host_port(server);
    let mut labels = Vec::with_capacity(4);
    labels.push(::metrics::Label::new("server.address", address.to_owned()));
    if let Some(port) = port {
        labels.push(::metrics::Label::new("server.port", port.to_string()));
    }
    labels
}
