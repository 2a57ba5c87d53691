//! Unit tests of the simulated node: commands in Redis's words, expiry on
//! the node's clock, restarts and failovers, ACL and replicas, Lua, and
//! the library's own scripts.

mod acl;
mod commands;
mod expiry;
mod library;
mod lua;
mod restart;

use std::time::Duration;

use redis::Value;

use super::SimNode;

/// A command's arguments from words.
pub(super) fn args(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

/// Virtual time `ms` milliseconds in.
pub(super) fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// The raw reply to `words` at `at`, as text.
pub(super) fn raw(node: &mut SimNode, at: Duration, words: &[&str]) -> String {
    String::from_utf8_lossy(&node.execute(at, &args(words))).into_owned()
}

/// The reply to `words` at `at`, parsed as a connection parses it.
pub(super) fn query(node: &mut SimNode, at: Duration, words: &[&str]) -> Value {
    match redis::parse_redis_value(&node.execute(at, &args(words))) {
        Ok(value) => value,
        Err(e) => panic!("unparsable reply to {words:?}: {e}"),
    }
}

/// The text (`code detail`) of a server error reply, or panics.
pub(super) fn error_text(value: &Value) -> String {
    match value {
        Value::ServerError(e) => match e.details() {
            Some(detail) => format!("{} {detail}", e.code()),
            None => e.code().to_owned(),
        },
        other => panic!("not an error: {other:?}"),
    }
}

#[test]
fn a_node_may_move_between_threads() {
    fn send<T: Send>(_: &T) {}
    let mut node = SimNode::new(0, 1);
    raw(&mut node, ms(0), &["EVAL", "return 1", "0"]);
    send(&node);
    let moved = std::thread::spawn(move || raw(&mut node, ms(1), &["EVAL", "return 2", "0"]));
    assert_eq!(moved.join().unwrap(), ":2\r\n");
}

/// A bulk string reply's text, or panics.
pub(super) fn bulk(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        other => panic!("not a bulk string: {other:?}"),
    }
}
