//! `redquorum status`: which nodes hold a resource's lock, and for how long.

use std::time::Duration;

use crate::duration;
use crate::nodes::{self, Failure, Target};
use crate::{EX_CONFIG, EX_UNAVAILABLE, Exit};

/// One node's view of the lock key.
enum Seen {
    Free,
    /// A plain lock: the holder's random value.
    Held {
        value: String,
        ttl: Option<Duration>,
    },
    /// A reentrant lock: its owner and the number of holds on this node.
    Reentrant {
        owner: String,
        holds: u64,
        ttl: Option<Duration>,
    },
    /// The node answered, but the key is of a type no lock uses.
    Foreign(String),
    Failed(Failure),
}

impl Seen {
    /// Who holds the lock on this node, as the summary compares them.
    fn holder(&self) -> Option<Holder<'_>> {
        match self {
            Seen::Held { value, .. } => Some(Holder::Value(value)),
            Seen::Reentrant { owner, .. } => Some(Holder::Owner(owner)),
            _ => None,
        }
    }
}

/// A holder: a plain lock's value or a reentrant lock's owner.
#[derive(Clone, Copy, PartialEq)]
enum Holder<'a> {
    Value(&'a str),
    Owner(&'a str),
}

/// The reply to one look: TYPE, PTTL, then GET and HMGET, of which the one
/// that does not fit the key's type fails with WRONGTYPE.
type Look = (
    String,
    i64,
    redis::RedisResult<Option<String>>,
    redis::RedisResult<(Option<String>, Option<String>)>,
);

async fn look(target: &Target, key: &str, timeout: Duration) -> Seen {
    let mut conn = match target.connect(timeout).await {
        Ok(conn) => conn,
        Err(f) => return Seen::Failed(f),
    };
    // One transaction whatever the key's type: a plain lock is a string, a
    // reentrant one a hash with fields `owner` and `count`.
    let mut pipe = redis::pipe();
    pipe.atomic()
        .ignore_errors()
        .cmd("TYPE")
        .arg(key)
        .pttl(key)
        .get(key)
        .hmget(key, &["owner", "count"]);
    let reply = tokio::time::timeout(timeout, pipe.query_async::<Look>(&mut conn));
    let (kind, pttl, plain, reentrant) = match reply.await {
        Ok(Ok(reply)) => reply,
        Ok(Err(e)) => return Seen::Failed(Failure::from_redis(&e)),
        Err(_) => {
            return Seen::Failed(Failure::Unreachable(format!(
                "unreachable: no reply within {timeout:?}"
            )));
        }
    };
    let ttl = u64::try_from(pttl).ok().map(Duration::from_millis);
    match (kind.as_str(), plain, reentrant) {
        ("none", _, _) => Seen::Free,
        ("string", Ok(Some(value)), _) => Seen::Held { value, ttl },
        ("hash", _, Ok((owner, count))) => Seen::Reentrant {
            owner: owner.unwrap_or_else(|| "?".to_owned()),
            holds: count.and_then(|c| c.parse().ok()).unwrap_or(0),
            ttl,
        },
        // Any other type (or a reply that fits none of the cases above) is
        // not one of our locks.
        (kind, _, _) => Seen::Foreign(kind.to_owned()),
    }
}

/// The holder named by the most nodes, and on how many.
fn leader(seen: &[Seen]) -> Option<(Holder<'_>, usize)> {
    let holders: Vec<Holder<'_>> = seen.iter().filter_map(Seen::holder).collect();
    holders
        .iter()
        .map(|h| (*h, holders.iter().filter(|g| *g == h).count()))
        .max_by_key(|(_, n)| *n)
}

/// "2 holds" (or "1 hold"), or a range when nodes count differently.
fn holds_of(seen: &[Seen], owner: &str) -> String {
    let counts: Vec<u64> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Reentrant {
                owner: o, holds, ..
            } if o == owner => Some(*holds),
            _ => None,
        })
        .collect();
    let least = counts.iter().copied().min().unwrap_or(0);
    let most = counts.iter().copied().max().unwrap_or(0);
    if least == most {
        holds(most)
    } else {
        format!("{least} to {most} holds per node")
    }
}

fn holds(n: u64) -> String {
    if n == 1 {
        "1 hold".to_owned()
    } else {
        format!("{n} holds")
    }
}

fn show_ttl(ttl: Option<Duration>) -> String {
    ttl.map_or_else(|| "no expiry".to_owned(), duration::show)
}

/// Prints each node's holder and TTL left, then a summary. Exits 0 when a
/// quorum of nodes answered (held or not), 69 when too few did to tell.
pub async fn status(urls: &[String], quorum: usize, key: &str, timeout: Duration) -> Exit {
    let targets = match nodes::targets(urls) {
        Ok(t) => t,
        Err(why) => return Exit::error(EX_CONFIG, why),
    };
    let seen = futures_util::future::join_all(targets.iter().map(|t| look(t, key, timeout))).await;
    let rows: Vec<Vec<String>> = targets
        .iter()
        .zip(&seen)
        .map(|(target, s)| {
            let (held, value, ttl) = match s {
                Seen::Free => ("no".to_owned(), "-".to_owned(), "-".to_owned()),
                Seen::Held { value, ttl } => ("yes".to_owned(), value.clone(), show_ttl(*ttl)),
                Seen::Reentrant {
                    owner,
                    holds: n,
                    ttl,
                } => (
                    "yes".to_owned(),
                    format!("owner {owner}, {} (reentrant)", holds(*n)),
                    show_ttl(*ttl),
                ),
                Seen::Foreign(kind) => (
                    "?".to_owned(),
                    "-".to_owned(),
                    format!("not a lock: a key of type {kind}"),
                ),
                Seen::Failed(f) => ("?".to_owned(), "-".to_owned(), f.to_string()),
            };
            vec![target.name.clone(), held, ttl, value]
        })
        .collect();
    nodes::print_table(&["NODE", "HELD", "TTL", "VALUE"], &rows);
    let answered = seen
        .iter()
        .filter(|s| !matches!(s, Seen::Failed(_)))
        .count();
    let n = seen.len();
    match leader(&seen) {
        Some((Holder::Owner(owner), count)) if count >= quorum => println!(
            "{key}: held by owner {owner} (reentrant, {}) on {count} of {n} nodes (quorum {quorum})",
            holds_of(&seen, owner)
        ),
        Some((Holder::Value(value), count)) if count >= quorum => {
            println!("{key}: held by {value} on {count} of {n} nodes (quorum {quorum})");
        }
        Some((_, count)) => println!(
            "{key}: not held by a quorum ({count} of {n} nodes have one holder, quorum {quorum})"
        ),
        None => {
            let foreign = seen
                .iter()
                .filter(|s| matches!(s, Seen::Foreign(_)))
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
