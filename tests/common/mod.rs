//! Shared helpers of the integration tests: nodes to run against, key
//! inspection, and the mutual-exclusion checker.
#![allow(dead_code)]

pub mod acl;
pub mod workload;

use std::time::Duration;

use redquorum::testkit::LocalCluster;
use redquorum::{Config, Redlock};
use tokio::time::Instant;

/// Starts `n` local redis-server nodes, or explains what is missing.
pub fn cluster(n: usize) -> LocalCluster {
    match LocalCluster::start(n) {
        Ok(cluster) => cluster,
        Err(e) => panic!("cannot start local Redis nodes: {e}"),
    }
}

/// Nodes for tests that need no fault injection: those of `REDQUORUM_NODES`
/// when set, five local nodes otherwise.
pub use redquorum::testkit::Nodes;

/// [`Nodes::from_env`] with five nodes, or explains what is missing.
pub fn nodes() -> Nodes {
    match Nodes::from_env(5) {
        Ok(nodes) => nodes,
        Err(e) => panic!("cannot start local Redis nodes: {e}"),
    }
}

/// A resource name no other test (or earlier run on external nodes) uses.
pub fn unique(name: &str) -> String {
    format!("{name}-{:016x}", rand::random::<u64>())
}

/// The key redquorum uses for `resource` with the default prefix.
pub fn key(resource: &str) -> String {
    format!("redquorum:lock:{resource}")
}

/// A config for tests: fast retries, a node timeout that tolerates a
/// heavily loaded machine (dead nodes refuse at once anyway).
pub fn fast_config() -> Config {
    Config::default()
        .with_retries(3)
        .with_retry_delay(Duration::from_millis(20))
        .with_retry_jitter(Duration::from_millis(10))
        .with_node_timeout(Duration::from_secs(1))
}

pub fn redlock(urls: &[String], config: Config) -> Redlock {
    match Redlock::with_config(urls.iter().map(String::as_str), config) {
        Ok(r) => r,
        Err(e) => panic!("redlock: {e}"),
    }
}

/// A Redlock with the restart guard on `cluster`, its nodes marked
/// trusted at once (a fresh test cluster holds no lock).
pub async fn guarded(cluster: &LocalCluster, config: Config) -> Redlock {
    match cluster.redlock(config).await {
        Ok(r) => r,
        Err(e) => panic!("guarded redlock: {e}"),
    }
}

/// The port of a `redis://host:port/` URL, as text (for `REPLICAOF`).
pub fn port_of(url: &str) -> String {
    url.trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap_or("")
        .to_owned()
}

/// Runs a command on the node at `url` (direct, synchronous: for assertions).
pub fn query<T: redis::FromRedisValue>(url: &str, cmd: &redis::Cmd) -> redis::RedisResult<T> {
    let client = redis::Client::open(url)?;
    let mut con = client.get_connection_with_timeout(Duration::from_secs(2))?;
    con.set_read_timeout(Some(Duration::from_secs(2)))?;
    cmd.query(&mut con)
}

/// The value stored at `key` on the node at `url`, if any.
pub fn get(url: &str, key: &str) -> Option<String> {
    match query::<Option<String>>(url, redis::cmd("GET").arg(key)) {
        Ok(v) => v,
        Err(e) => panic!("GET {key} on {url}: {e}"),
    }
}

/// Sets `key` to `value` with a TTL on the node at `url`.
pub fn set(url: &str, key: &str, value: &str, ttl: Duration) {
    let ms = ttl.as_millis() as u64;
    if let Err(e) = query::<()>(url, redis::cmd("SET").arg(key).arg(value).arg("PX").arg(ms)) {
        panic!("SET {key} on {url}: {e}");
    }
}

/// How many of `urls` hold `key` with `value`, marked by a waiter (`+`
/// appended) or not: the same holder either way.
pub fn holders(urls: &[String], key: &str, value: &str) -> usize {
    holding(urls, key, value).len()
}

/// The indices of `urls` whose `key` holds `value` (or its marked form).
pub fn holding(urls: &[String], key: &str, value: &str) -> Vec<usize> {
    let marked = format!("{value}+");
    (0..urls.len())
        .filter(|&i| get(&urls[i], key).is_some_and(|v| v == value || v == marked))
        .collect()
}

/// How many of `urls` hold `key` with any value.
pub fn holders_any(urls: &[String], key: &str) -> usize {
    urls.iter().filter(|u| get(u, key).is_some()).count()
}

/// Polls `cond` every 10 ms until it holds or `limit` passes; returns whether it held.
pub async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let give_up = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= give_up {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits (up to 5 s) until exactly `count` of `urls` hold `key` with
/// `value`. A lock is granted at quorum; the slower nodes follow a moment
/// later, so counts of "every node" are checked this way.
pub async fn settles_on(urls: &[String], key: &str, value: &str, count: usize) -> bool {
    eventually(Duration::from_secs(5), || {
        holders(urls, key, value) == count
    })
    .await
}

/// Opens every node connection of `redlock` (a lock taken and released),
/// so that faults injected next hit an established session.
pub async fn warm_up(redlock: &Redlock) {
    let guard = match redlock
        .try_lock(&unique("warm-up"), Duration::from_secs(10))
        .await
    {
        Ok(guard) => guard,
        Err(e) => panic!("warm-up lock: {e}"),
    };
    if let Err(e) = guard.release().await {
        panic!("warm-up release: {e}");
    }
    // The calls the release left in flight (on a busy machine, a node's
    // script loads) are over before the test changes anything.
    redlock.shutdown().await;
}

/// The mutual-exclusion checker lives in the testkit.
#[allow(unused_imports)]
pub use redquorum::testkit::{History, Hold};

/// Runs `command` to completion; returns (exit code, stdout, stderr).
pub fn output(command: &mut std::process::Command) -> (Option<i32>, String, String) {
    match command.output() {
        Ok(out) => (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ),
        Err(e) => panic!("cannot run {command:?}: {e}"),
    }
}
