//! `redquorum check`: is every node a reachable, authenticated, independent
//! master that keeps lock keys until their TTL?

use std::time::Duration;

use redis::Value;
use tokio::time::Instant;

use crate::duration;
use crate::nodes::{self, Failure, Target};
use crate::{EX_CONFIG, EX_UNAVAILABLE, Exit};

/// What is wrong with one node.
#[derive(Debug, PartialEq)]
enum Problem {
    /// Down, or too slow to answer: a failing vote until it is back.
    Unreachable(String),
    /// Answers, but cannot hold locks safely (replica, password, eviction...).
    Misconfigured(String),
}

impl Problem {
    fn text(&self) -> &str {
        match self {
            Problem::Unreachable(why) | Problem::Misconfigured(why) => why,
        }
    }
}

/// What one node told us.
#[derive(Debug, Default)]
struct Probe {
    reachable: bool,
    role: Option<String>,
    eviction: Option<String>,
    latency: Option<Duration>,
    run_id: Option<String>,
    problems: Vec<Problem>,
}

/// The fields of `INFO` that matter for locks.
#[derive(Debug, Default, PartialEq)]
struct Info {
    run_id: Option<String>,
    maxmemory: Option<u64>,
    policy: Option<String>,
    cluster: bool,
}

fn parse_info(text: &str) -> Info {
    let mut info = Info::default();
    for line in text.lines() {
        let Some((key, value)) = line.trim_end().split_once(':') else {
            continue;
        };
        match key {
            "run_id" => info.run_id = Some(value.to_owned()),
            "maxmemory" => info.maxmemory = value.parse().ok(),
            "maxmemory_policy" => info.policy = Some(value.to_owned()),
            "cluster_enabled" => info.cluster = value == "1",
            _ => {}
        }
    }
    info
}

/// The problem with a node's role, if any. `ROLE` answers
/// `["master", ...]`, `["slave", host, port, ...]` or `["sentinel", ...]`.
fn role_problem(role: &[Value]) -> (String, Option<Problem>) {
    let text = |v: Option<&Value>| match v {
        Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(Value::SimpleString(s)) => s.clone(),
        Some(Value::Int(i)) => i.to_string(),
        _ => String::from("?"),
    };
    let name = text(role.first());
    match name.as_str() {
        "master" => (name, None),
        "slave" | "replica" => {
            let of = format!("{}:{}", text(role.get(1)), text(role.get(2)));
            let why = format!(
                "replica of {of}: writes fail with READONLY and it is not independent; \
                 use masters only"
            );
            ("replica".to_owned(), Some(Problem::Misconfigured(why)))
        }
        _ => {
            let why = format!("role {name}: not a Redis master; use masters only");
            (name, Some(Problem::Misconfigured(why)))
        }
    }
}

/// The problem with a node's eviction settings, if any. Lock keys all have
/// a TTL, so any policy but `noeviction` may drop them under memory
/// pressure; without a `maxmemory` limit nothing is evicted.
fn eviction_problem(info: &Info) -> Option<Problem> {
    let policy = info.policy.as_deref()?;
    let limited = info.maxmemory.is_none_or(|m| m > 0);
    (policy != "noeviction" && limited).then(|| {
        Problem::Misconfigured(format!(
            "maxmemory-policy {policy} can evict lock keys before their TTL; \
             set maxmemory-policy noeviction"
        ))
    })
}

fn from_failure(f: Failure) -> Problem {
    match f {
        Failure::Unreachable(why) => Problem::Unreachable(why),
        Failure::Auth(why) => Problem::Misconfigured(why),
    }
}

async fn probe(target: &Target, timeout: Duration) -> Probe {
    let mut probe = Probe::default();
    let mut conn = match target.connect(timeout).await {
        Ok(conn) => conn,
        Err(f) => {
            probe.reachable = matches!(f, Failure::Auth(_));
            probe.problems.push(from_failure(f));
            return probe;
        }
    };
    // Round trip: the best of three PINGs on the open connection.
    for _ in 0..3 {
        let start = Instant::now();
        match nodes::query::<String>(&mut conn, &redis::cmd("PING"), timeout).await {
            Ok(_) => {
                let took = start.elapsed();
                probe.latency = Some(probe.latency.map_or(took, |l| l.min(took)));
            }
            Err(f) => {
                probe.reachable = matches!(f, Failure::Auth(_));
                probe.problems.push(from_failure(f));
                return probe;
            }
        }
    }
    probe.reachable = true;
    match nodes::query::<Vec<Value>>(&mut conn, &redis::cmd("ROLE"), timeout).await {
        Ok(role) => {
            let (name, problem) = role_problem(&role);
            probe.role = Some(name);
            probe.problems.extend(problem);
        }
        Err(f) => probe.problems.push(from_failure(f)),
    }
    match nodes::query::<String>(&mut conn, &redis::cmd("INFO"), timeout).await {
        Ok(text) => {
            let info = parse_info(&text);
            probe.eviction = info.policy.clone().map(|p| match info.maxmemory {
                Some(0) => format!("{p} (no maxmemory)"),
                _ => p,
            });
            probe.problems.extend(eviction_problem(&info));
            if info.cluster {
                probe.problems.push(Problem::Misconfigured(
                    "cluster mode: keys are sharded (MOVED); use standalone masters".to_owned(),
                ));
            }
            probe.run_id = info.run_id;
        }
        Err(f) => probe.problems.push(from_failure(f)),
    }
    probe
}

/// Flags nodes that are the same server under two addresses.
fn flag_duplicates(targets: &[Target], probes: &mut [Probe]) {
    for i in 1..probes.len() {
        let same =
            (0..i).find(|&j| probes[i].run_id.is_some() && probes[j].run_id == probes[i].run_id);
        if let Some(j) = same {
            let why = format!(
                "same server as {} (same run_id): each vote must come from an independent master",
                targets[j].name
            );
            probes[i].problems.push(Problem::Misconfigured(why));
        }
    }
}

/// Probes every node concurrently, prints a table and a summary line.
/// Exits 0 when every node is fine, 78 when one is misconfigured, 69 when
/// the only problems are unreachable nodes.
pub async fn check(urls: &[String], quorum: usize, timeout: Duration) -> Exit {
    let targets = match nodes::targets(urls) {
        Ok(t) => t,
        Err(why) => return Exit::error(EX_CONFIG, why),
    };
    let mut probes = futures::future::join_all(targets.iter().map(|t| probe(t, timeout))).await;
    flag_duplicates(&targets, &mut probes);
    let dash = || "-".to_owned();
    let rows: Vec<Vec<String>> = targets
        .iter()
        .zip(&probes)
        .map(|(target, p)| {
            let status = if p.problems.is_empty() {
                "ok".to_owned()
            } else {
                p.problems
                    .iter()
                    .map(Problem::text)
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            vec![
                target.name.clone(),
                if p.reachable { "yes" } else { "no" }.to_owned(),
                p.role.clone().unwrap_or_else(dash),
                p.eviction.clone().unwrap_or_else(dash),
                p.latency.map_or_else(dash, duration::show),
                status,
            ]
        })
        .collect();
    nodes::print_table(
        &["NODE", "REACHABLE", "ROLE", "EVICTION", "LATENCY", "STATUS"],
        &rows,
    );
    let ok = probes.iter().filter(|p| p.problems.is_empty()).count();
    let misconfigured = probes
        .iter()
        .filter(|p| {
            p.problems
                .iter()
                .any(|x| matches!(x, Problem::Misconfigured(_)))
        })
        .count();
    let unreachable = probes.len() - ok - misconfigured;
    let n = probes.len();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_master_is_fine_and_a_replica_is_flagged_with_its_master() {
        assert_eq!(role_problem(&[bulk("master"), Value::Int(0)]).1, None);
        let (name, problem) = role_problem(&[
            bulk("slave"),
            bulk("10.0.0.9"),
            Value::Int(6379),
            bulk("connected"),
        ]);
        assert_eq!(name, "replica");
        let why = problem.map(|p| p.text().to_owned()).unwrap_or_default();
        assert!(why.contains("replica of 10.0.0.9:6379"), "{why}");
    }

    #[test]
    fn info_fields_are_read_from_their_lines() {
        let info = parse_info(
            "# Server\r\nrun_id:abc\r\n# Memory\r\nmaxmemory:1048576\r\n\
             maxmemory_policy:allkeys-lru\r\n# Cluster\r\ncluster_enabled:0\r\n",
        );
        assert_eq!(
            info,
            Info {
                run_id: Some("abc".into()),
                maxmemory: Some(1_048_576),
                policy: Some("allkeys-lru".into()),
                cluster: false,
            }
        );
    }

    #[test]
    fn eviction_is_a_problem_only_with_a_memory_limit() {
        let mut info = Info {
            policy: Some("volatile-lru".into()),
            maxmemory: Some(0),
            ..Info::default()
        };
        assert_eq!(eviction_problem(&info), None);
        info.maxmemory = Some(1 << 30);
        assert!(eviction_problem(&info).is_some());
        info.policy = Some("noeviction".into());
        assert_eq!(eviction_problem(&info), None);
    }
}
