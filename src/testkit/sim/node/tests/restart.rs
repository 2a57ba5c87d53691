//! Restarts under each persistence mode, failovers with lag, `FLUSHALL`.

use redis::Value;

use super::super::Persistence;
use super::{SimNode, error_text, ms, query, raw};

const SCRIPT: &str = "return redis.call('get', KEYS[1])";

/// The sha of [`SCRIPT`], loaded on `node`.
fn load(node: &mut SimNode) -> String {
    match query(node, ms(0), &["SCRIPT", "LOAD", SCRIPT]) {
        Value::BulkString(sha) => String::from_utf8(sha).unwrap(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_restart_empties_the_script_cache_and_evalsha_answers_noscript() {
    let mut node = SimNode::new(0, 1);
    let sha = load(&mut node);
    raw(&mut node, ms(1), &["SET", "k", "v"]);
    assert_eq!(
        query(&mut node, ms(2), &["EVALSHA", &sha, "1", "k"]),
        Value::BulkString(b"v".to_vec())
    );
    let before = node.run_id().to_owned();
    node.restart(ms(3), Persistence::Aof);
    assert_ne!(node.run_id(), before);
    assert_eq!(node.run_id().len(), 40);
    let reply = query(&mut node, ms(4), &["EVALSHA", &sha, "1", "k"]);
    assert_eq!(
        error_text(&reply),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    assert_eq!(
        query(&mut node, ms(4), &["SCRIPT", "EXISTS", &sha]),
        Value::Array(vec![Value::Int(0)])
    );
    // Loaded again, it runs on the keys AOF kept.
    assert_eq!(load(&mut node), sha);
    assert_eq!(
        query(&mut node, ms(5), &["EVALSHA", &sha, "1", "k"]),
        Value::BulkString(b"v".to_vec())
    );
}

#[test]
fn a_restart_sets_the_uptime_to_zero() {
    let mut node = SimNode::new(0, 1);
    let info = raw(&mut node, ms(5_000), &["INFO", "server"]);
    assert!(info.contains("uptime_in_seconds:5\r\n"), "{info}");
    node.restart(ms(5_000), Persistence::None);
    let info = raw(&mut node, ms(5_000), &["INFO", "server"]);
    assert!(info.contains("uptime_in_seconds:0\r\n"), "{info}");
}

#[test]
fn without_persistence_a_restart_forgets_every_key() {
    let mut node = SimNode::new(0, 1);
    raw(&mut node, ms(0), &["SET", "k", "v"]);
    node.restart(ms(10), Persistence::None);
    assert!(node.keys(ms(10)).is_empty());
}

#[test]
fn a_snapshot_restart_keeps_the_keyspace_as_it_was_when_taken() {
    let mut node = SimNode::new(0, 1);
    raw(&mut node, ms(0), &["SET", "old", "1"]);
    raw(&mut node, ms(0), &["SET", "short", "1", "PX", "500"]);
    raw(&mut node, ms(0), &["SET", "long", "1", "PX", "5000"]);
    raw(&mut node, ms(100), &["SET", "changed", "before"]);
    assert_eq!(raw(&mut node, ms(100), &["SAVE"]), "+OK\r\n");
    assert_eq!(node.last_save(), Some(ms(100)));
    raw(&mut node, ms(200), &["SET", "changed", "after"]);
    raw(&mut node, ms(200), &["SET", "new", "1"]);
    raw(&mut node, ms(200), &["DEL", "old"]);
    node.restart(ms(1_000), Persistence::Snapshot { taken_at: ms(100) });
    // `short` had expired by the restart; `long` keeps its deadline.
    assert_eq!(node.keys(ms(1_000)), ["changed", "long", "old"]);
    assert_eq!(
        node.value(ms(1_000), "changed").as_deref(),
        Some(&b"before"[..])
    );
    assert_eq!(node.pttl(ms(1_000), "long"), 4_000);
}

#[test]
fn an_aof_restart_keeps_every_write_with_its_deadline() {
    let mut node = SimNode::new(0, 1);
    raw(&mut node, ms(0), &["SET", "a", "1", "PX", "300"]);
    raw(&mut node, ms(0), &["SET", "b", "1", "PX", "3000"]);
    raw(&mut node, ms(100), &["HSET", "h", "f", "v"]);
    node.restart(ms(500), Persistence::Aof);
    assert_eq!(node.keys(ms(500)), ["b", "h"]);
    assert_eq!(node.pttl(ms(500), "b"), 2_500);
}

#[test]
fn snapshots_can_reach_back_across_an_earlier_restart() {
    let mut node = SimNode::new(0, 1);
    raw(&mut node, ms(0), &["SET", "a", "1"]);
    node.restart(ms(10), Persistence::None);
    raw(&mut node, ms(20), &["SET", "b", "1"]);
    node.restart(ms(30), Persistence::Snapshot { taken_at: ms(5) });
    assert_eq!(node.keys(ms(30)), ["a"]);
}

#[test]
fn a_failover_keeps_the_writes_older_than_the_lag() {
    let mut node = SimNode::new(0, 1);
    raw(&mut node, ms(0), &["SET", "early", "1"]);
    raw(&mut node, ms(900), &["SET", "late", "1"]);
    raw(&mut node, ms(950), &["SET", "early", "2"]);
    let sha = load(&mut node);
    let before = node.run_id().to_owned();
    node.failover(ms(1_000), ms(200));
    assert_eq!(node.keys(ms(1_000)), ["early"]);
    assert_eq!(node.value(ms(1_000), "early").as_deref(), Some(&b"1"[..]));
    assert_ne!(node.run_id(), before);
    let reply = query(&mut node, ms(1_000), &["EVALSHA", &sha, "1", "early"]);
    assert_eq!(
        error_text(&reply),
        "NOSCRIPT No matching script. Please use EVAL."
    );
}

#[test]
fn a_failover_without_lag_loses_nothing() {
    let mut node = SimNode::new(0, 1);
    raw(&mut node, ms(10), &["SET", "k", "1"]);
    node.failover(ms(10), ms(0));
    assert_eq!(node.keys(ms(10)), ["k"]);
}

#[test]
fn flushall_empties_the_keyspace_but_keeps_scripts() {
    let mut node = SimNode::new(0, 1);
    let sha = load(&mut node);
    raw(&mut node, ms(10), &["SET", "k", "1"]);
    node.flushall();
    assert!(node.keys(ms(10)).is_empty());
    assert_eq!(
        query(&mut node, ms(10), &["EVALSHA", &sha, "1", "k"]),
        Value::Nil
    );
    raw(&mut node, ms(20), &["SET", "k", "1"]);
    assert_eq!(raw(&mut node, ms(20), &["FLUSHALL"]), "+OK\r\n");
    assert!(node.keys(ms(20)).is_empty());
}
