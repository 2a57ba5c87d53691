//! Expiry, `PTTL` and `TIME` follow the node's own clock.

use redis::Value;

use super::{SimNode, bulk, ms, query, raw};

#[test]
fn a_key_expires_when_the_node_clock_reaches_its_deadline() {
    let mut node = SimNode::new(0, 1);
    raw(&mut node, ms(100), &["SET", "k", "v", "PX", "1000"]);
    assert_eq!(node.pttl(ms(100), "k"), 1000);
    assert_eq!(query(&mut node, ms(600), &["PTTL", "k"]), Value::Int(500));
    assert_eq!(node.value(ms(1099), "k").as_deref(), Some(&b"v"[..]));
    assert_eq!(node.value(ms(1100), "k"), None);
    assert_eq!(query(&mut node, ms(1100), &["GET", "k"]), Value::Nil);
    assert_eq!(query(&mut node, ms(1100), &["PTTL", "k"]), Value::Int(-2));
}

#[test]
fn a_fast_clock_makes_keys_live_half_as_long_in_virtual_time() {
    let mut node = SimNode::new(0, 1);
    node.clock_mut().set_rate(ms(0), 2.0);
    raw(&mut node, ms(0), &["SET", "k", "v", "PX", "1000"]);
    assert_eq!(query(&mut node, ms(250), &["PTTL", "k"]), Value::Int(500));
    assert_eq!(node.value(ms(499), "k").as_deref(), Some(&b"v"[..]));
    assert_eq!(node.value(ms(500), "k"), None);
}

#[test]
fn a_slow_clock_makes_keys_live_longer() {
    let mut node = SimNode::new(0, 1);
    raw(&mut node, ms(0), &["SET", "k", "v", "PX", "1000"]);
    node.clock_mut().set_rate(ms(500), 0.5);
    // 500 ms of the node's clock gone, the rest at half speed.
    assert_eq!(node.pttl(ms(1000), "k"), 250);
    // The remaining 500 ms of its clock take 1000 ms of virtual time.
    assert_eq!(node.value(ms(1498), "k").as_deref(), Some(&b"v"[..]));
    assert_eq!(node.value(ms(1501), "k"), None);
}

#[test]
fn a_clock_jump_expires_keys_at_once_and_rate_changes_keep_the_clock_continuous() {
    let mut node = SimNode::new(0, 1);
    let before = node.clock().now_ms(ms(300));
    node.clock_mut().set_rate(ms(300), 3.0);
    assert_eq!(node.clock().now_ms(ms(300)), before);
    assert_eq!(node.clock().now_ms(ms(400)), before + 300.0);
    raw(&mut node, ms(400), &["SET", "k", "v", "PX", "10000"]);
    node.clock_mut().jump(9_999.0);
    assert_eq!(node.pttl(ms(400), "k"), 1);
    node.clock_mut().jump(1.0);
    assert_eq!(query(&mut node, ms(400), &["EXISTS", "k"]), Value::Int(0));
}

#[test]
fn time_answers_the_node_clock_in_seconds_and_microseconds() {
    let mut node = SimNode::new(0, 1);
    let expected_us = (node.clock().now_ms(ms(1234)) * 1000.0).floor() as i64;
    let Value::Array(parts) = query(&mut node, ms(1234), &["TIME"]) else {
        panic!("TIME is not an array");
    };
    let secs: i64 = bulk(&parts[0]).parse().unwrap();
    let micros: i64 = bulk(&parts[1]).parse().unwrap();
    assert!((0..1_000_000).contains(&micros));
    assert_eq!(secs * 1_000_000 + micros, expected_us);
}

#[test]
fn time_stands_still_inside_a_script() {
    let mut node = SimNode::new(0, 1);
    let script = "local a = redis.call('time') \
                  for i = 1, 100000 do end \
                  local b = redis.call('time') \
                  return a[1] == b[1] and a[2] == b[2]";
    assert_eq!(
        query(&mut node, ms(5), &["EVAL", script, "0"]),
        Value::Int(1)
    );
}

#[test]
fn keys_lists_live_keys_sorted() {
    let mut node = SimNode::new(0, 1);
    raw(&mut node, ms(0), &["SET", "b", "1"]);
    raw(&mut node, ms(0), &["SET", "a", "1", "PX", "10"]);
    raw(&mut node, ms(0), &["HSET", "c", "f", "v"]);
    assert_eq!(node.keys(ms(5)), ["a", "b", "c"]);
    assert_eq!(node.keys(ms(10)), ["b", "c"]);
    assert_eq!(node.value(ms(10), "c"), None);
    assert_eq!(node.pttl(ms(10), "b"), -1);
}
