//! `redquorum status`: who holds a resource's lock on each node, and for
//! how long, read with `Redlock::inspect` (the lock value is never shown:
//! the holder label and a short id of the value are).

use std::time::Duration;

use redquorum::{Inspection, NodeHold, Redlock};

use crate::{EX_CONFIG, EX_UNAVAILABLE, Exit, duration, nodes};

fn show_ttl(ttl: Option<Duration>) -> String {
    ttl.map_or_else(|| "no expiry".to_owned(), duration::show)
}

fn holds(n: u64) -> String {
    if n == 1 {
        "1 hold".to_owned()
    } else {
        format!("{n} holds")
    }
}

/// Who holds it, as one phrase: `web-3:4242 (id 1a2b3c4d)`.
fn holder(hold: &NodeHold) -> String {
    match hold {
        NodeHold::Held {
            label: Some(label),
            id,
            ..
        } => format!("{label} (id {id})"),
        NodeHold::Held { id, .. } => format!("id {id} (no label)"),
        NodeHold::Reentrant {
            owner, holds: n, ..
        } => {
            format!("owner {owner}, {} (reentrant)", holds(*n))
        }
        _ => "-".to_owned(),
    }
}

/// One table row per node: NODE, HELD, TTL, HOLDER, FENCE.
fn rows(seen: &Inspection) -> Vec<Vec<String>> {
    seen.nodes()
        .iter()
        .map(|view| {
            let (held, ttl) = match view.hold() {
                NodeHold::Free => ("no".to_owned(), "-".to_owned()),
                NodeHold::Held { ttl, .. } | NodeHold::Reentrant { ttl, .. } => {
                    ("yes".to_owned(), show_ttl(*ttl))
                }
                NodeHold::Foreign { kind } => {
                    ("?".to_owned(), format!("not a lock: a key of type {kind}"))
                }
                NodeHold::Unknown(outcome) => ("?".to_owned(), outcome.to_string()),
                _ => ("?".to_owned(), "-".to_owned()),
            };
            let fence = view
                .counter()
                .map_or_else(|| "-".to_owned(), |c| c.to_string());
            vec![
                view.node().to_owned(),
                held,
                ttl,
                holder(view.hold()),
                fence,
            ]
        })
        .collect()
}

/// Prints each node's holder and TTL left, then a summary. Exits 0 when a
/// quorum of nodes answered (held or not), 69 when too few did to tell.
pub async fn status(redlock: &Redlock, resource: &str) -> Exit {
    let seen = match redlock.inspect(resource).await {
        Ok(seen) => seen,
        Err(e) => return Exit::error(EX_CONFIG, e.to_string()),
    };
    nodes::print_table(&["NODE", "HELD", "TTL", "HOLDER", "FENCE"], &rows(&seen));
    let n = seen.nodes().len();
    let quorum = redlock.quorum();
    let answered = seen
        .nodes()
        .iter()
        .filter(|v| !matches!(v.hold(), NodeHold::Unknown(_)))
        .count();
    let key = redlock.lock_key(resource);
    let agreeing = |hold: &NodeHold| {
        seen.nodes()
            .iter()
            .filter(|v| holder(v.hold()) == holder(hold))
            .count()
    };
    let busiest = seen
        .nodes()
        .iter()
        .map(|v| v.hold())
        .filter(|h| matches!(h, NodeHold::Held { .. } | NodeHold::Reentrant { .. }))
        .map(|h| (h, agreeing(h)))
        .max_by_key(|(_, count)| *count);
    match (seen.holder(), busiest) {
        (Some(hold), _) => println!(
            "{key}: held by {} on {} of {n} nodes (quorum {quorum})",
            holder(hold),
            agreeing(hold)
        ),
        (None, Some((_, count))) => println!(
            "{key}: not held by a quorum ({count} of {n} nodes have one holder, quorum {quorum})"
        ),
        (None, None) => {
            let foreign = seen
                .nodes()
                .iter()
                .filter(|v| matches!(v.hold(), NodeHold::Foreign { .. }))
                .count();
            if foreign == 0 {
                println!("{key}: free on all {answered} nodes that answered");
            } else {
                println!(
                    "{key}: not held; {foreign} of the {answered} nodes that answered have a key \
                     there that is not a lock"
                );
            }
        }
    }
    if answered < quorum {
        return Exit::error(
            EX_UNAVAILABLE,
            format!("only {answered} of {n} nodes answered, {quorum} needed to tell"),
        );
    }
    Exit::code(0)
}
