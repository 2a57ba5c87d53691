//! `redquorum check`: the library's start-up checks
//! ([`Redlock::check_report`]) printed as a table, with an exit code.

use redquorum::{NodeProblem, Redlock};

use crate::duration;
use crate::nodes;
use crate::{EX_CONFIG, EX_UNAVAILABLE, Exit};

/// Probes every node, prints a table and a summary line. Exits 0 when every
/// node is fine, 78 when one is misconfigured, 69 when the only problems are
/// unreachable nodes.
pub async fn check(redlock: &Redlock) -> Exit {
    let checks = redlock.check_report().await;
    let dash = || "-".to_owned();
    let rows: Vec<Vec<String>> = checks
        .iter()
        .map(|c| {
            // Warnings are listed under the table.
            let texts: Vec<String> = c
                .problems()
                .iter()
                .filter(|p| !p.is_warning())
                .map(ToString::to_string)
                .collect();
            let status = if texts.is_empty() {
                "ok".to_owned()
            } else {
                texts.join("; ")
            };
            vec![
                c.node().to_owned(),
                if c.reachable() { "yes" } else { "no" }.to_owned(),
                c.role().map_or_else(dash, |r| match r {
                    "slave" => "replica".to_owned(),
                    other => other.to_owned(),
                }),
                c.eviction_policy().map_or_else(dash, str::to_owned),
                c.latency().map_or_else(dash, duration::show),
                status,
            ]
        })
        .collect();
    nodes::print_table(
        &["NODE", "REACHABLE", "ROLE", "EVICTION", "LATENCY", "STATUS"],
        &rows,
    );
    for warning in checks
        .iter()
        .flat_map(|c| c.problems())
        .filter(|p| p.is_warning())
    {
        println!("warning: {warning}");
    }
    // Warnings (replicas, persistence) leave a node usable.
    let ok = checks
        .iter()
        .filter(|c| c.problems().iter().all(NodeProblem::is_warning))
        .count();
    let misconfigured = checks
        .iter()
        .filter(|c| {
            c.problems()
                .iter()
                .any(|p| !p.is_warning() && !matches!(p, NodeProblem::Unreachable { .. }))
        })
        .count();
    let unreachable = checks.len() - ok - misconfigured;
    let (n, quorum) = (checks.len(), redlock.quorum());
    let verdict = if ok >= quorum {
        "locks can be acquired"
    } else {
        "locks CANNOT be acquired"
    };
    println!(
        "{n} nodes, quorum {quorum}: {ok} ok, {misconfigured} misconfigured, \
         {unreachable} unreachable; {verdict}"
    );
    if misconfigured > 0 {
        Exit::code(EX_CONFIG)
    } else if unreachable > 0 {
        Exit::code(EX_UNAVAILABLE)
    } else {
        Exit::code(0)
    }
}
