//! `redquorum check`: the library's start-up checks
//! ([`Redlock::check_report`]) printed as a table or as JSON, with an exit
//! code: 0 healthy, 80 degraded but usable, 69 no quorum, 78 misconfigured.

use redquorum::{NodeCheck, NodeProblem, Redlock};

use crate::json::Json;
use crate::words::cli_words;
use crate::{DEGRADED, EX_CONFIG, EX_UNAVAILABLE, Exit, duration, table};

/// Version of the JSON layout; bumped when a field changes meaning or goes.
const SCHEMA: u64 = 1;

/// What one node is, for the counts: usable (warnings at most),
/// misconfigured, or unreachable.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Ok,
    Misconfigured,
    Unreachable,
}

impl State {
    fn of(check: &NodeCheck) -> State {
        let serious = || check.problems().iter().filter(|p| !p.is_warning());
        if serious().any(|p| !matches!(p, NodeProblem::Unreachable { .. })) {
            State::Misconfigured
        } else if serious().next().is_some() {
            State::Unreachable
        } else {
            State::Ok
        }
    }

    fn name(self) -> &'static str {
        match self {
            State::Ok => "ok",
            State::Misconfigured => "misconfigured",
            State::Unreachable => "unreachable",
        }
    }
}

/// The counts and what they mean.
struct Verdict {
    nodes: usize,
    quorum: usize,
    ok: usize,
    misconfigured: usize,
    unreachable: usize,
}

impl Verdict {
    fn of(checks: &[NodeCheck], quorum: usize) -> Verdict {
        let count = |state| checks.iter().filter(|c| State::of(c) == state).count();
        Verdict {
            nodes: checks.len(),
            quorum,
            ok: count(State::Ok),
            misconfigured: count(State::Misconfigured),
            unreachable: count(State::Unreachable),
        }
    }

    /// Whether a lock can be acquired: a quorum of usable nodes.
    fn usable(&self) -> bool {
        self.ok >= self.quorum
    }

    /// `healthy`, `degraded`, `unavailable` or `misconfigured`, with its
    /// exit code. A misconfiguration wins: waiting does not mend it.
    fn status(&self) -> (&'static str, i32) {
        if self.misconfigured > 0 {
            ("misconfigured", EX_CONFIG)
        } else if !self.usable() {
            ("unavailable", EX_UNAVAILABLE)
        } else if self.unreachable > 0 {
            ("degraded", DEGRADED)
        } else {
            ("healthy", 0)
        }
    }
}

/// Probes every node and prints the table and a summary line, or the JSON.
pub async fn check(redlock: &Redlock, json: bool) -> Exit {
    let checks = redlock.check_report().await;
    let verdict = Verdict::of(&checks, redlock.quorum());
    if json {
        println!("{}", to_json(&checks, &verdict).render());
    } else {
        print_table(&checks, &verdict);
    }
    Exit::code(verdict.status().1)
}

/// `ROLE`'s first word, with `slave` called `replica`.
fn role(check: &NodeCheck) -> Option<&str> {
    check
        .role()
        .map(|r| if r == "slave" { "replica" } else { r })
}

fn print_table(checks: &[NodeCheck], verdict: &Verdict) {
    let dash = || "-".to_owned();
    let rows: Vec<Vec<String>> = checks
        .iter()
        .map(|c| {
            // Warnings are listed under the table.
            let texts: Vec<String> = c
                .problems()
                .iter()
                .filter(|p| !p.is_warning())
                .map(|p| cli_words(&p.to_string()))
                .collect();
            let status = if texts.is_empty() {
                "ok".to_owned()
            } else {
                texts.join("; ")
            };
            vec![
                c.node().to_owned(),
                if c.reachable() { "yes" } else { "no" }.to_owned(),
                role(c).map_or_else(dash, str::to_owned),
                c.eviction_policy().map_or_else(dash, str::to_owned),
                c.latency().map_or_else(dash, duration::show),
                status,
            ]
        })
        .collect();
    table::print_table(
        &["NODE", "REACHABLE", "ROLE", "EVICTION", "LATENCY", "STATUS"],
        &rows,
    );
    for warning in checks
        .iter()
        .flat_map(|c| c.problems())
        .filter(|p| p.is_warning())
    {
        println!("warning: {}", cli_words(&warning.to_string()));
    }
    let Verdict {
        nodes,
        quorum,
        ok,
        misconfigured,
        unreachable,
    } = verdict;
    let can = if verdict.usable() {
        "locks can be acquired"
    } else {
        "locks CANNOT be acquired"
    };
    println!(
        "{nodes} nodes, quorum {quorum}: {ok} ok, {misconfigured} misconfigured, \
         {unreachable} unreachable; {can}"
    );
}

/// A stable name for each kind of problem.
fn kind(problem: &NodeProblem) -> &'static str {
    match problem {
        NodeProblem::Unreachable { .. } => "unreachable",
        NodeProblem::AuthFailed { .. } => "auth_failed",
        NodeProblem::NotMaster { .. } => "not_master",
        NodeProblem::Eviction { .. } => "eviction",
        NodeProblem::Duplicate { .. } => "duplicate",
        NodeProblem::Cluster { .. } => "cluster",
        NodeProblem::AclDenied { .. } => "acl_denied",
        NodeProblem::Tls { .. } => "tls",
        NodeProblem::Replicas { .. } => "replicas",
        NodeProblem::Persistence { .. } => "persistence",
        NodeProblem::Quarantined { .. } => "quarantined",
        NodeProblem::QuarantineMismatch { .. } => "quarantine_mismatch",
        NodeProblem::Unchecked { .. } => "unchecked",
        _ => "other",
    }
}

fn node_json(index: usize, c: &NodeCheck) -> Json {
    let problems = c
        .problems()
        .iter()
        .map(|p| {
            Json::Object(vec![
                ("kind", Json::str(kind(p))),
                ("warning", Json::Bool(p.is_warning())),
                ("message", Json::str(cli_words(&p.to_string()))),
            ])
        })
        .collect();
    let latency = c
        .latency()
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    Json::Object(vec![
        ("index", Json::count(index)),
        ("node", Json::str(c.node())),
        ("state", Json::str(State::of(c).name())),
        ("reachable", Json::Bool(c.reachable())),
        ("role", Json::opt_str(role(c))),
        ("eviction_policy", Json::opt_str(c.eviction_policy())),
        ("latency_us", Json::opt_int(latency)),
        ("replicas", c.replicas().map_or(Json::Null, Json::count)),
        ("appendonly", Json::opt_str(c.persistence().map(|p| p.0))),
        ("appendfsync", Json::opt_str(c.persistence().map(|p| p.1))),
        ("problems", Json::Array(problems)),
    ])
}

fn to_json(checks: &[NodeCheck], verdict: &Verdict) -> Json {
    let (status, code) = verdict.status();
    Json::Object(vec![
        ("schema", Json::Int(SCHEMA)),
        ("status", Json::str(status)),
        ("exit_code", Json::Int(u64::try_from(code).unwrap_or(0))),
        ("usable", Json::Bool(verdict.usable())),
        ("nodes_total", Json::count(verdict.nodes)),
        ("quorum", Json::count(verdict.quorum)),
        ("ok", Json::count(verdict.ok)),
        ("misconfigured", Json::count(verdict.misconfigured)),
        ("unreachable", Json::count(verdict.unreachable)),
        (
            "nodes",
            Json::Array(
                checks
                    .iter()
                    .enumerate()
                    .map(|(i, c)| node_json(i, c))
                    .collect(),
            ),
        ),
    ])
}
