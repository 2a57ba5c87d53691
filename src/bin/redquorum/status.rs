//! `redquorum status`: who holds a resource's lock on each node, and for
//! how long, read with `Redlock::inspect`, as a table or as JSON (the lock
//! value is never shown: the holder label and a short id of the value are).

use std::time::Duration;

use redquorum::{Error, Inspection, NodeHold, NodeView, Redlock};

use crate::json::Json;
use crate::{EX_CONFIG, EX_UNAVAILABLE, EX_USAGE, Exit, duration, table};

/// Version of the JSON layout; bumped when a field changes meaning or goes.
const SCHEMA: u64 = 1;

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

/// Who holds it, as one phrase: `web-3:4242 sh (id 1a2b3c4d)`.
pub fn holder(hold: &NodeHold) -> String {
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

/// True when `a` and `b` are the same lock: the same value (by its id), or
/// a reentrant lock of the same owner.
fn same_lock(a: &NodeHold, b: &NodeHold) -> bool {
    match (a, b) {
        (NodeHold::Held { id: x, .. }, NodeHold::Held { id: y, .. }) => x == y,
        (NodeHold::Reentrant { owner: x, .. }, NodeHold::Reentrant { owner: y, .. }) => x == y,
        _ => false,
    }
}

/// What one node's view is: `free`, `held`, `reentrant`, `foreign`,
/// `unavailable` or `misconfigured`.
fn state(view: &NodeView) -> &'static str {
    match view.hold() {
        NodeHold::Free => "free",
        NodeHold::Held { .. } => "held",
        NodeHold::Reentrant { .. } => "reentrant",
        NodeHold::Foreign { .. } => "foreign",
        NodeHold::Unknown(outcome) if outcome.is_misconfigured() => "misconfigured",
        _ => "unavailable",
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

/// The summary of one inspection.
struct Summary<'a> {
    nodes: usize,
    quorum: usize,
    answered: usize,
    misconfigured: usize,
    /// The hold a quorum agrees on, and on how many nodes.
    holder: Option<(&'a NodeHold, usize)>,
    /// The lock held on the most nodes, and on how many.
    busiest: Option<(&'a NodeHold, usize)>,
    foreign: usize,
}

impl<'a> Summary<'a> {
    fn of(seen: &'a Inspection, quorum: usize) -> Summary<'a> {
        let views = seen.nodes();
        let count = |f: &dyn Fn(&NodeView) -> bool| views.iter().filter(|v| f(v)).count();
        let agreeing = |hold: &NodeHold| count(&|v| same_lock(v.hold(), hold));
        Summary {
            nodes: views.len(),
            quorum,
            answered: count(&|v| !matches!(v.hold(), NodeHold::Unknown(_))),
            misconfigured: count(&|v| state(v) == "misconfigured"),
            holder: seen.holder().map(|h| (h, agreeing(h))),
            busiest: views
                .iter()
                .map(NodeView::hold)
                .filter(|h| matches!(h, NodeHold::Held { .. } | NodeHold::Reentrant { .. }))
                .map(|h| (h, agreeing(h)))
                .max_by_key(|(_, n)| *n),
            foreign: count(&|v| matches!(v.hold(), NodeHold::Foreign { .. })),
        }
    }

    /// `held`, `free`, `partial` (held somewhere, but not by one holder on
    /// a quorum) or `unknown` (too few answers), with the exit code.
    fn status(&self) -> (&'static str, i32) {
        if self.answered < self.quorum {
            let code = if self.misconfigured > 0 {
                EX_CONFIG
            } else {
                EX_UNAVAILABLE
            };
            ("unknown", code)
        } else if self.holder.is_some() {
            ("held", 0)
        } else if self.busiest.is_some() {
            ("partial", 0)
        } else {
            ("free", 0)
        }
    }
}

/// Prints each node's holder and TTL left and a summary, or the JSON.
/// Exits 0 when a quorum of nodes answered (held or not); 69 when too few
/// did to tell, 78 when misconfigured nodes are among those that did not.
pub async fn status(redlock: &Redlock, resource: &str, json: bool) -> Exit {
    let seen = match redlock.inspect(resource).await {
        Ok(seen) => seen,
        Err(Error::InvalidArgument(why)) => return Exit::error(EX_USAGE, why),
        Err(e) => return Exit::error(EX_CONFIG, e.to_string()),
    };
    let summary = Summary::of(&seen, redlock.quorum());
    let key = redlock.lock_key(resource);
    if json {
        println!("{}", to_json(resource, &seen, &summary, &key).render());
    } else {
        print_text(&seen, &summary, &key);
    }
    let (status, code) = summary.status();
    if status == "unknown" {
        let Summary {
            answered,
            nodes,
            quorum,
            ..
        } = summary;
        let why = if code == EX_CONFIG {
            "; misconfigured nodes among the others"
        } else {
            ""
        };
        return Exit::error(
            code,
            format!("only {answered} of {nodes} nodes answered, {quorum} needed to tell{why}"),
        );
    }
    Exit::code(code)
}

fn print_text(seen: &Inspection, summary: &Summary, key: &str) {
    table::print_table(&["NODE", "HELD", "TTL", "HOLDER", "FENCE"], &rows(seen));
    for view in seen.nodes() {
        if let Some(left) = view.quarantine() {
            println!(
                "{}: no vote for {} (restart guard: restarted or lost its data)",
                view.node(),
                duration::show(left)
            );
        }
    }
    let Summary {
        nodes: n,
        quorum,
        answered,
        foreign,
        ..
    } = *summary;
    match (summary.holder, summary.busiest) {
        (Some((hold, count)), _) => println!(
            "{key}: held by {} on {count} of {n} nodes (quorum {quorum})",
            holder(hold)
        ),
        (None, Some((_, count))) => println!(
            "{key}: not held by a quorum ({count} of {n} nodes have one holder, quorum {quorum})"
        ),
        (None, None) if foreign == 0 => {
            println!("{key}: free on all {answered} nodes that answered");
        }
        (None, None) => println!(
            "{key}: not held; {foreign} of the {answered} nodes that answered have a key there \
             that is not a lock"
        ),
    }
}

/// The hold as JSON fields: kind, label, id, owner, holds.
fn hold_json(hold: &NodeHold) -> Vec<(&'static str, Json)> {
    let (label, id, owner, holds) = match hold {
        NodeHold::Held { label, id, .. } => (label.as_deref(), Some(id.as_str()), None, None),
        NodeHold::Reentrant { owner, holds, .. } => {
            (None, None, Some(owner.as_str()), Some(*holds))
        }
        _ => (None, None, None, None),
    };
    vec![
        ("label", Json::opt_str(label)),
        ("id", Json::opt_str(id)),
        ("owner", Json::opt_str(owner)),
        ("holds", Json::opt_int(holds)),
    ]
}

fn node_json(view: &NodeView) -> Json {
    let ttl = match view.hold() {
        NodeHold::Held { ttl, .. } | NodeHold::Reentrant { ttl, .. } => {
            ttl.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX))
        }
        _ => None,
    };
    let (key_type, error) = match view.hold() {
        NodeHold::Foreign { kind } => (Some(kind.clone()), None),
        NodeHold::Unknown(outcome) => (None, Some(outcome.to_string())),
        _ => (None, None),
    };
    let mut fields = vec![
        ("node", Json::str(view.node())),
        ("state", Json::str(state(view))),
    ];
    fields.extend(hold_json(view.hold()));
    fields.extend([
        ("ttl_ms", Json::opt_int(ttl)),
        ("key_type", Json::opt_str(key_type)),
        ("error", Json::opt_str(error)),
        ("fence_counter", Json::opt_int(view.counter())),
        (
            "quarantine_ms",
            Json::opt_int(
                view.quarantine()
                    .map(|q| u64::try_from(q.as_millis()).unwrap_or(u64::MAX)),
            ),
        ),
    ]);
    Json::Object(fields)
}

fn to_json(resource: &str, seen: &Inspection, summary: &Summary, key: &str) -> Json {
    let (status, code) = summary.status();
    let holder = summary.holder.map_or(Json::Null, |(hold, count)| {
        let kind = if matches!(hold, NodeHold::Reentrant { .. }) {
            "reentrant"
        } else {
            "plain"
        };
        let mut fields = vec![("kind", Json::str(kind))];
        fields.extend(hold_json(hold));
        fields.push(("nodes", Json::count(count)));
        Json::Object(fields)
    });
    Json::Object(vec![
        ("schema", Json::Int(SCHEMA)),
        ("resource", Json::str(resource)),
        ("key", Json::str(key)),
        ("status", Json::str(status)),
        ("exit_code", Json::Int(u64::try_from(code).unwrap_or(0))),
        ("nodes_total", Json::count(summary.nodes)),
        ("quorum", Json::count(summary.quorum)),
        ("answered", Json::count(summary.answered)),
        ("holder", holder),
        ("fence_counter", Json::opt_int(seen.counter())),
        (
            "nodes",
            Json::Array(seen.nodes().iter().map(node_json).collect()),
        ),
    ])
}
