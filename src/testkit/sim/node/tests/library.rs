//! The library's own scripts, from their exact text, on a simulated node:
//! acquire, release (ours and not ours), extend, fencing, reentrant holds,
//! inspection, the restart guard and the ACL diagnosis.

use std::time::Duration;

use redis::Value;

use super::super::Persistence;
use super::super::library::text_of;
use super::{SimNode, bulk, error_text, ms, query, raw};
use crate::error::failure::{NodeFailure, is_script_denied};
use crate::keys::{channel, counter_key, guard_key, lock_key};
use crate::node::NodeError;
use crate::node::acl::DIAGNOSE;
use crate::node::reentrant::{REENTRANT_ACQUIRE, REENTRANT_EXTEND, REENTRANT_RELEASE};
use crate::node::restart_guard::{
    GUARDED_ACQUIRE_ALL, GUARDED_FENCE_WRITE_BACK, GUARDED_FENCED_ACQUIRE, MARK_TRUSTED,
    TRUST_STATUS, refusal as quarantined,
};
use crate::node::scripts::{
    ACQUIRE_ALL, EXTEND, EXTEND_OR_MISSING, FENCE_WRITE_BACK, FENCED_ACQUIRE, RELEASE, RESEED,
};

const PREFIX: &str = "rq:";
const OURS: &str = "Aour-value";
const THEIRS: &str = "Btheir-value";

/// Runs `script` as the library does: `EVALSHA`, and on `NOSCRIPT` a
/// `SCRIPT LOAD` of its text and `EVALSHA` again.
fn invoke(
    node: &mut SimNode,
    at: Duration,
    script: &redis::Script,
    keys: &[&str],
    args: &[&str],
) -> Value {
    let numkeys = keys.len().to_string();
    let mut words = vec!["EVALSHA", script.get_hash(), numkeys.as_str()];
    words.extend_from_slice(keys);
    words.extend_from_slice(args);
    let reply = query(node, at, &words);
    if matches!(&reply, Value::ServerError(e) if e.code() == "NOSCRIPT") {
        let text = text_of(script).unwrap();
        assert_eq!(
            bulk(&query(node, at, &["SCRIPT", "LOAD", &text])),
            script.get_hash()
        );
        return query(node, at, &words);
    }
    reply
}

fn lock(resource: &str) -> String {
    lock_key(PREFIX, resource)
}

fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) => items.iter().map(bulk).collect(),
        other => panic!("not an array: {other:?}"),
    }
}

#[test]
fn acquire_takes_every_key_or_none() {
    let mut node = SimNode::new(0, 1);
    let (a, b) = (lock("a"), lock("b"));
    let keys = [a.as_str(), b.as_str()];
    assert_eq!(
        invoke(&mut node, ms(0), &ACQUIRE_ALL, &keys, &[OURS, "1000"]),
        Value::Int(1)
    );
    assert_eq!(node.value(ms(0), &a).as_deref(), Some(OURS.as_bytes()));
    assert_eq!(node.pttl(ms(0), &b), 1000);
    // Held: another owner gets nothing, and nothing changes.
    let c = lock("c");
    let overlapping = [c.as_str(), b.as_str()];
    assert_eq!(
        invoke(
            &mut node,
            ms(10),
            &ACQUIRE_ALL,
            &overlapping,
            &[THEIRS, "1000"]
        ),
        Value::Int(0)
    );
    assert_eq!(node.value(ms(10), &c), None);
    // Expired: free again.
    assert_eq!(
        invoke(
            &mut node,
            ms(1000),
            &ACQUIRE_ALL,
            &overlapping,
            &[THEIRS, "1000"]
        ),
        Value::Int(1)
    );
}

#[test]
fn release_deletes_only_our_keys() {
    let mut node = SimNode::new(0, 1);
    let (a, b) = (lock("a"), lock("b"));
    raw(&mut node, ms(0), &["SET", &a, OURS, "PX", "1000"]);
    raw(&mut node, ms(0), &["SET", &b, THEIRS, "PX", "1000"]);
    let keys = [a.as_str(), b.as_str()];
    assert_eq!(
        invoke(&mut node, ms(5), &RELEASE, &keys, &[OURS]),
        Value::Int(1)
    );
    assert_eq!(node.keys(ms(5)), vec![b.clone()]);
    assert_eq!(node.value(ms(5), &b).as_deref(), Some(THEIRS.as_bytes()));
    assert!(
        node.take_published().is_empty(),
        "nobody waited: no PUBLISH"
    );
    // Not ours at all: nothing deleted.
    assert_eq!(
        invoke(&mut node, ms(6), &RELEASE, &[b.as_str()], &[OURS]),
        Value::Int(0)
    );
    assert_eq!(node.pttl(ms(6), &b), 994);
}

#[test]
fn a_release_announces_itself_when_a_waiter_marked_the_lock() {
    let mut node = SimNode::new(0, 1);
    let (a, b) = (lock("a"), lock("b"));
    // Only a value of the library's own grammar is ever marked.
    let ours = crate::value::fresh_labelled(None);
    let ours = ours.as_str();
    raw(&mut node, ms(0), &["SET", &a, ours, "PX", "1000"]);
    // A waiter's clean-up marks the lock it lost (its own key: none).
    let cleanup = invoke(
        &mut node,
        ms(1),
        &RELEASE,
        &[a.as_str(), b.as_str()],
        &[THEIRS, "1"],
    );
    assert_eq!(cleanup, Value::Int(0));
    let marked = format!("{ours}+");
    assert_eq!(node.value(ms(1), &a).as_deref(), Some(marked.as_bytes()));
    assert_eq!(node.pttl(ms(1), &a), 999, "APPEND keeps the TTL");
    assert_eq!(
        invoke(&mut node, ms(2), &RELEASE, &[a.as_str()], &[ours]),
        Value::Int(1)
    );
    let announced = (channel(PREFIX, "a").into_bytes(), ours.as_bytes().to_vec());
    assert_eq!(node.take_published(), vec![announced]);
}

#[test]
fn extend_renews_only_our_keys_and_never_creates_one() {
    let mut node = SimNode::new(0, 1);
    let (a, b) = (lock("a"), lock("b"));
    raw(&mut node, ms(0), &["SET", &a, OURS, "PX", "1000"]);
    assert_eq!(
        invoke(&mut node, ms(500), &EXTEND, &[a.as_str()], &[OURS, "2000"]),
        Value::Int(1)
    );
    assert_eq!(node.pttl(ms(500), &a), 2000);
    assert_eq!(
        invoke(
            &mut node,
            ms(600),
            &EXTEND,
            &[a.as_str()],
            &[THEIRS, "5000"]
        ),
        Value::Int(0)
    );
    assert_eq!(node.pttl(ms(600), &a), 1900);
    assert_eq!(
        invoke(
            &mut node,
            ms(600),
            &EXTEND,
            &[a.as_str(), b.as_str()],
            &[OURS, "5000"]
        ),
        Value::Int(0)
    );
    assert_eq!(node.value(ms(600), &b), None);
    assert_eq!(
        invoke(
            &mut node,
            ms(600),
            &EXTEND_OR_MISSING,
            &[a.as_str(), b.as_str()],
            &[OURS, "5000"]
        ),
        Value::Int(-1)
    );
    // Re-seeding fills in the missing key and renews ours.
    assert_eq!(
        invoke(
            &mut node,
            ms(700),
            &RESEED,
            &[a.as_str(), b.as_str()],
            &[OURS, "3000"]
        ),
        Value::Int(1)
    );
    assert_eq!(
        (node.pttl(ms(700), &a), node.pttl(ms(700), &b)),
        (3000, 3000)
    );
    // Past its expiry, extend does not bring a lock back.
    assert_eq!(
        invoke(&mut node, ms(3700), &EXTEND, &[a.as_str()], &[OURS, "1000"]),
        Value::Int(0)
    );
    assert_eq!(node.value(ms(3700), &a), None);
}

#[test]
fn fenced_acquire_reads_the_counter_and_write_back_raises_it() {
    let mut node = SimNode::new(0, 1);
    let (key, counter) = (lock("r"), counter_key(PREFIX, "r"));
    let keys = [key.as_str(), counter.as_str()];
    let read = invoke(&mut node, ms(0), &FENCED_ACQUIRE, &keys, &[OURS, "1000"]);
    assert_eq!(strings(&read), ["0"]);
    assert_eq!(
        invoke(&mut node, ms(1), &FENCE_WRITE_BACK, &keys, &[OURS, "1"]),
        Value::Int(1)
    );
    assert_eq!(node.value(ms(1), &counter).as_deref(), Some(&b"1"[..]));
    // Held: no second holder, no read.
    assert_eq!(
        invoke(&mut node, ms(2), &FENCED_ACQUIRE, &keys, &[THEIRS, "1000"]),
        Value::Nil
    );
    // Not ours: no write-back.
    assert_eq!(
        invoke(&mut node, ms(3), &FENCE_WRITE_BACK, &keys, &[THEIRS, "9"]),
        Value::Int(0)
    );
    invoke(&mut node, ms(4), &RELEASE, &[key.as_str()], &[OURS]);
    let read = invoke(&mut node, ms(5), &FENCED_ACQUIRE, &keys, &[THEIRS, "1000"]);
    assert_eq!(strings(&read), ["1"]);
    // A lower token never lowers the counter.
    assert_eq!(
        invoke(&mut node, ms(6), &FENCE_WRITE_BACK, &keys, &[THEIRS, "0"]),
        Value::Int(1)
    );
    assert_eq!(node.value(ms(6), &counter).as_deref(), Some(&b"1"[..]));
}

/// A script's error reply as the node layer reads it.
fn node_error(reply: &Value) -> NodeError {
    let Value::ServerError(e) = reply else {
        panic!("not an error: {reply:?}");
    };
    NodeError::Failed(NodeFailure::from_redis(&redis::RedisError::from(e.clone())))
}

#[test]
fn the_guarded_acquire_refuses_while_the_node_is_quarantined() {
    let mut node = SimNode::new(0, 1);
    let guard = guard_key(PREFIX);
    let (key, g) = (lock("r"), guard.as_str());
    let acquire = |node: &mut SimNode, at: Duration| {
        invoke(
            node,
            at,
            &GUARDED_ACQUIRE_ALL,
            &[key.as_str(), g],
            &[OURS, "500", "1000"],
        )
    };
    // A node without a record starts a quarantine and refuses.
    let first = acquire(&mut node, ms(0));
    assert!(
        error_text(&first).starts_with("QUARANTINED 1000 ms left: "),
        "{first:?}"
    );
    assert!(matches!(
        quarantined(node_error(&first)),
        NodeError::Quarantined(left) if left == ms(1000)
    ));
    assert_eq!(node.value(ms(0), &key), None);
    let status = invoke(&mut node, ms(400), &TRUST_STATUS, &[g], &["1000"]);
    assert_eq!(
        status,
        Value::Array(vec![
            Value::BulkString(b"quarantined".to_vec()),
            Value::Int(600),
            Value::Int(1000)
        ])
    );
    let again = acquire(&mut node, ms(400));
    assert!(matches!(
        quarantined(node_error(&again)),
        NodeError::Quarantined(left) if left == ms(600)
    ));
    // Once the quarantine has passed, it votes.
    assert_eq!(acquire(&mut node, ms(1000)), Value::Int(1));
    assert_eq!(node.value(ms(1000), &key).as_deref(), Some(OURS.as_bytes()));
    // After a restart (a new run_id, even with AOF) it refuses again.
    node.restart(ms(2000), Persistence::Aof);
    let after = acquire(&mut node, ms(2000));
    assert!(
        error_text(&after).starts_with("QUARANTINED 1000 ms left: "),
        "{after:?}"
    );
    // Marked trusted at once, it votes at once.
    assert_eq!(
        invoke(&mut node, ms(2001), &MARK_TRUSTED, &[g], &["1000"]),
        Value::Int(1)
    );
    assert_eq!(acquire(&mut node, ms(2002)), Value::Int(1));
}

#[test]
fn guarded_fencing_marks_counters_not_known_intact() {
    let mut node = SimNode::new(0, 1);
    let guard = guard_key(PREFIX);
    let (key, counter) = (lock("r"), counter_key(PREFIX, "r"));
    let keys = [key.as_str(), counter.as_str(), guard.as_str()];
    invoke(&mut node, ms(0), &MARK_TRUSTED, &[guard.as_str()], &["0"]);
    // Trusted at once: counters count.
    let read = invoke(
        &mut node,
        ms(1),
        &GUARDED_FENCED_ACQUIRE,
        &keys,
        &[OURS, "1000", "0"],
    );
    assert_eq!(strings(&read), ["0"]);
    assert_eq!(
        invoke(
            &mut node,
            ms(2),
            &GUARDED_FENCE_WRITE_BACK,
            &keys,
            &[OURS, "4"]
        ),
        Value::Int(1)
    );
    invoke(&mut node, ms(3), &RELEASE, &[key.as_str()], &[OURS]);
    // Restarted from a snapshot: a new trust period, the counter unknown.
    node.restart(ms(10), Persistence::Snapshot { taken_at: ms(5) });
    let refused = invoke(
        &mut node,
        ms(11),
        &GUARDED_FENCED_ACQUIRE,
        &keys,
        &[OURS, "1000", "100"],
    );
    assert!(
        error_text(&refused).starts_with("QUARANTINED 100 ms left"),
        "{refused:?}"
    );
    let read = invoke(
        &mut node,
        ms(111),
        &GUARDED_FENCED_ACQUIRE,
        &keys,
        &[OURS, "1000", "100"],
    );
    assert_eq!(strings(&read), ["?4"]);
    assert_eq!(
        invoke(
            &mut node,
            ms(112),
            &GUARDED_FENCE_WRITE_BACK,
            &keys,
            &[OURS, "5"]
        ),
        Value::Int(1)
    );
    invoke(&mut node, ms(113), &RELEASE, &[key.as_str()], &[OURS]);
    let read = invoke(
        &mut node,
        ms(114),
        &GUARDED_FENCED_ACQUIRE,
        &keys,
        &[OURS, "1000", "100"],
    );
    assert_eq!(strings(&read), ["5"]);
}

#[test]
fn reentrant_holds_count_and_refit_the_ttl() {
    let mut node = SimNode::new(0, 1);
    let key = lock("r");
    let k = [key.as_str()];
    assert_eq!(
        invoke(
            &mut node,
            ms(0),
            &REENTRANT_ACQUIRE,
            &k,
            &["me", "r:1", "1000"]
        ),
        Value::Int(1)
    );
    assert_eq!(
        invoke(
            &mut node,
            ms(100),
            &REENTRANT_ACQUIRE,
            &k,
            &["me", "r:2", "300"]
        ),
        Value::Int(1)
    );
    assert_eq!(
        invoke(
            &mut node,
            ms(100),
            &REENTRANT_ACQUIRE,
            &k,
            &["you", "r:3", "300"]
        ),
        Value::Int(0)
    );
    // The inner hold's short TTL does not cut the outer one short.
    assert_eq!(node.pttl(ms(100), &key), 900);
    assert_eq!(
        invoke(&mut node, ms(200), &REENTRANT_EXTEND, &k, &["r:2", "2000"]),
        Value::Int(1)
    );
    assert_eq!(node.pttl(ms(200), &key), 2000);
    assert_eq!(
        invoke(&mut node, ms(300), &REENTRANT_RELEASE, &k, &["r:2"]),
        Value::Int(1)
    );
    assert_eq!(node.pttl(ms(300), &key), 700);
    assert_eq!(
        invoke(&mut node, ms(300), &REENTRANT_RELEASE, &k, &["r:9"]),
        Value::Int(0)
    );
    assert_eq!(
        invoke(&mut node, ms(400), &REENTRANT_RELEASE, &k, &["r:1"]),
        Value::Int(1)
    );
    assert!(node.keys(ms(400)).is_empty());
    // A plain lock and a reentrant one exclude each other.
    raw(&mut node, ms(500), &["SET", &key, OURS, "PX", "1000"]);
    assert_eq!(
        invoke(
            &mut node,
            ms(500),
            &REENTRANT_ACQUIRE,
            &k,
            &["me", "r:4", "1000"]
        ),
        Value::Int(0)
    );
}

#[test]
fn inspect_reads_the_holder_ttl_and_counter() {
    let mut node = SimNode::new(0, 1);
    let (key, counter) = (lock("r"), counter_key(PREFIX, "r"));
    let keys = [key.as_str(), counter.as_str()];
    raw(&mut node, ms(0), &["SET", &key, OURS, "PX", "1000"]);
    raw(&mut node, ms(0), &["SET", &counter, "7"]);
    let seen = invoke(
        &mut node,
        ms(250),
        &crate::node::scripts::INSPECT,
        &keys,
        &[],
    );
    assert_eq!(
        seen,
        Value::Array(vec![
            Value::BulkString(b"string".to_vec()),
            Value::Int(750),
            Value::BulkString(OURS.as_bytes().to_vec()),
            Value::Int(0),
            Value::BulkString(b"7".to_vec()),
        ])
    );
}

#[test]
fn a_denied_pexpire_makes_extend_fail_as_the_library_expects_and_diagnose_names_it() {
    let mut node = SimNode::new(0, 1);
    let key = lock("r");
    raw(&mut node, ms(0), &["SET", &key, OURS, "PX", "1000"]);
    node.deny("pexpire");
    let reply = invoke(&mut node, ms(1), &EXTEND, &[key.as_str()], &[OURS, "2000"]);
    let NodeError::Failed(failure) = node_error(&reply) else {
        panic!("not a failure");
    };
    assert!(is_script_denied(failure.message()), "{}", failure.message());
    assert_eq!(
        failure.kind(),
        &crate::FailureKind::NoPermission { command: None }
    );
    let diagnosis = invoke(
        &mut node,
        ms(2),
        &DIAGNOSE,
        &[key.as_str()],
        &["get", "pexpire"],
    );
    assert_eq!(bulk(&diagnosis), format!("pexpire {key}"));
    node.allow("pexpire");
    let clean = invoke(
        &mut node,
        ms(3),
        &DIAGNOSE,
        &[key.as_str()],
        &["get", "pexpire"],
    );
    assert_eq!(clean, Value::Nil);
}
