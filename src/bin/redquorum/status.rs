//! `redquorum status`: which nodes hold a resource's lock, and for how long.

use std::time::Duration;

use crate::duration;
use crate::nodes::{self, Failure, Target};
use crate::{EX_CONFIG, EX_UNAVAILABLE, Exit};

/// One node's view of the lock key.
enum Seen {
    Free,
    Held {
        value: String,
        ttl: Option<Duration>,
    },
    Failed(Failure),
}

async fn look(target: &Target, key: &str, timeout: Duration) -> Seen {
    let mut conn = match target.connect(timeout).await {
        Ok(conn) => conn,
        Err(f) => return Seen::Failed(f),
    };
    let mut pipe = redis::pipe();
    pipe.atomic().get(key).pttl(key);
    let reply = tokio::time::timeout(
        timeout,
        pipe.query_async::<(Option<String>, i64)>(&mut conn),
    );
    match reply.await {
        Ok(Ok((None, _))) => Seen::Free,
        Ok(Ok((Some(value), pttl))) => Seen::Held {
            value,
            ttl: u64::try_from(pttl).ok().map(Duration::from_millis),
        },
        Ok(Err(e)) => Seen::Failed(Failure::from_redis(&e)),
        Err(_) => Seen::Failed(Failure::Unreachable(format!(
            "unreachable: no reply within {timeout:?}"
        ))),
    }
}

/// The value held by the most nodes, and on how many.
fn leader(seen: &[Seen]) -> Option<(&str, usize)> {
    let values: Vec<&str> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Held { value, .. } => Some(value.as_str()),
            _ => None,
        })
        .collect();
    values
        .iter()
        .map(|v| (*v, values.iter().filter(|w| *w == v).count()))
        .max_by_key(|(_, n)| *n)
}

/// Prints each node's holder and TTL left, then a summary. Exits 0 when a
/// quorum of nodes answered (held or not), 69 when too few did to tell.
pub async fn status(urls: &[String], quorum: usize, key: &str, timeout: Duration) -> Exit {
    let targets = match nodes::targets(urls) {
        Ok(t) => t,
        Err(why) => return Exit::error(EX_CONFIG, why),
    };
    let seen = futures::future::join_all(targets.iter().map(|t| look(t, key, timeout))).await;
    let rows: Vec<Vec<String>> = targets
        .iter()
        .zip(&seen)
        .map(|(target, s)| {
            let (held, value, ttl) = match s {
                Seen::Free => ("no".to_owned(), "-".to_owned(), "-".to_owned()),
                Seen::Held { value, ttl } => (
                    "yes".to_owned(),
                    value.clone(),
                    ttl.map_or_else(|| "no expiry".to_owned(), duration::show),
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
        Some((value, count)) if count >= quorum => {
            println!("{key}: held by {value} on {count} of {n} nodes (quorum {quorum})");
        }
        Some((_, count)) => println!(
            "{key}: not held by a quorum ({count} of {n} nodes hold one value, quorum {quorum})"
        ),
        None => println!("{key}: free on all {answered} nodes that answered"),
    }
    if answered < quorum {
        return Exit::error(
            EX_UNAVAILABLE,
            format!("only {answered} of {n} nodes answered, {quorum} needed to tell"),
        );
    }
    Exit::code(0)
}
