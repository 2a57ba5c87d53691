//! Plain commands answer as redis-server 7.0.15 answered them (each
//! expected reply below was read from a real server, in this order).

use super::{SimNode, ms, raw};

/// Runs `steps` in order on a fresh node, comparing each raw reply.
fn replay(steps: &[(&[&str], &str)]) {
    let mut node = SimNode::new(0, 1);
    for (i, (words, expected)) in steps.iter().enumerate() {
        let got = raw(&mut node, ms(i as u64), words);
        assert_eq!(got, *expected, "step {i}: {words:?}");
    }
}

#[test]
fn strings_and_keys_answer_in_redis_words() {
    replay(&[
        (&["PING"], "+PONG\r\n"),
        (&["PING", "a"], "$1\r\na\r\n"),
        (
            &["PING", "a", "b"],
            "-ERR wrong number of arguments for 'ping' command\r\n",
        ),
        (&["PiNg"], "+PONG\r\n"),
        (
            &["set"],
            "-ERR wrong number of arguments for 'set' command\r\n",
        ),
        (
            &["set", "a"],
            "-ERR wrong number of arguments for 'set' command\r\n",
        ),
        (&["set", "a", "b", "c"], "-ERR syntax error\r\n"),
        (
            &["set", "a", "b", "nx", "px", "0"],
            "-ERR invalid expire time in 'set' command\r\n",
        ),
        (
            &["set", "a", "b", "nx", "px", "-1"],
            "-ERR invalid expire time in 'set' command\r\n",
        ),
        (
            &["set", "a", "b", "nx", "px", "abc"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["set", "a", "b", "px", "01"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (&["set", "a", "b", "px", "10", "px", "20000"], "+OK\r\n"),
        (&["set", "a", "b", "nx", "xx"], "-ERR syntax error\r\n"),
        (
            &["set", "a", "b", "ex", "10", "px", "10"],
            "-ERR syntax error\r\n",
        ),
        (
            &["set", "a", "b", "keepttl", "px", "5"],
            "-ERR syntax error\r\n",
        ),
        (
            &["set", "a", "b", "px", "9223372036854775807"],
            "-ERR invalid expire time in 'set' command\r\n",
        ),
        (&["set", "a", "b", "px", "100000000000000000"], "+OK\r\n"),
        (
            &["get"],
            "-ERR wrong number of arguments for 'get' command\r\n",
        ),
        (
            &["get", "a", "b"],
            "-ERR wrong number of arguments for 'get' command\r\n",
        ),
        (&["get", "a"], "$1\r\nb\r\n"),
        (&["set", "a", "c", "get"], "$1\r\nb\r\n"),
        (&["set", "a", "d", "nx", "get"], "$1\r\nc\r\n"),
        (
            &["foo"],
            "-ERR unknown command 'foo', with args beginning with: \r\n",
        ),
        (
            &["foo", "a", "b"],
            "-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n",
        ),
        (
            &["", "a"],
            "-ERR unknown command '', with args beginning with: 'a' \r\n",
        ),
        (&["hset", "h", "a", "1"], ":1\r\n"),
        (
            &["get", "h"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (
            &["set", "h", "v", "get"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (&["set", "h", "1", "nx"], "$-1\r\n"),
        (&["type", "h"], "+hash\r\n"),
        (&["type", "a"], "+string\r\n"),
        (&["type", "nope"], "+none\r\n"),
        (
            &["pexpire", "a"],
            "-ERR wrong number of arguments for 'pexpire' command\r\n",
        ),
        (
            &["pexpire", "a", "abc"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["pexpire", "a", "100", "foo"],
            "-ERR Unsupported option foo\r\n",
        ),
        (
            &["pexpire", "a", "100", "nx", "xx"],
            "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
        ),
        (
            &["pexpire", "a", "100", "gt", "lt"],
            "-ERR GT and LT options at the same time are not compatible\r\n",
        ),
        (
            &["pexpire", "a", "9223372036854775807"],
            "-ERR invalid expire time in 'pexpire' command\r\n",
        ),
        (&["pexpire", "a", "100000", "nx"], ":1\r\n"),
        (&["pexpire", "a", "100000", "nx"], ":0\r\n"),
        (&["pexpire", "a", "200000", "gt"], ":1\r\n"),
        (&["pexpire", "a", "300000", "lt"], ":0\r\n"),
        (&["pexpire", "nope", "100"], ":0\r\n"),
        (&["pexpire", "a", "-5"], ":1\r\n"),
        (&["exists", "a"], ":0\r\n"),
        (
            &["exists"],
            "-ERR wrong number of arguments for 'exists' command\r\n",
        ),
        (&["set", "a", "x"], "+OK\r\n"),
        (&["exists", "a", "a", "b"], ":2\r\n"),
        (&["pttl", "a"], ":-1\r\n"),
        (&["pttl", "nope"], ":-2\r\n"),
        (&["del", "a", "a"], ":1\r\n"),
        (
            &["del"],
            "-ERR wrong number of arguments for 'del' command\r\n",
        ),
        (&["append", "a", "x"], ":1\r\n"),
        (&["append", "a", "y"], ":2\r\n"),
        (
            &["append", "h", "y"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (
            &["publish"],
            "-ERR wrong number of arguments for 'publish' command\r\n",
        ),
        (&["publish", "c", "m"], ":0\r\n"),
        (
            &["time", "x"],
            "-ERR wrong number of arguments for 'time' command\r\n",
        ),
    ]);
}

#[test]
fn hashes_keep_insertion_order_and_answer_in_redis_words() {
    replay(&[
        (
            &["hset", "h"],
            "-ERR wrong number of arguments for 'hset' command\r\n",
        ),
        (
            &["hset", "h", "a"],
            "-ERR wrong number of arguments for 'hset' command\r\n",
        ),
        (
            &["hset", "h", "a", "1", "b"],
            "-ERR wrong number of arguments for 'hset' command\r\n",
        ),
        (&["hget", "nope", "a"], "$-1\r\n"),
        (&["hgetall", "nope"], "*0\r\n"),
        (&["hset", "h", "a", "1"], ":1\r\n"),
        (
            &["hincrby", "h", "a", "x"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["hincrby", "h", "a", "9223372036854775807"],
            "-ERR increment or decrement would overflow\r\n",
        ),
        (&["hset", "h", "b", "x"], ":1\r\n"),
        (
            &["hincrby", "h", "b", "1"],
            "-ERR hash value is not an integer\r\n",
        ),
        (&["hincrby", "h", "a", "-1"], ":0\r\n"),
        (
            &["hincrby", "h", "c", "01"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (&["hget", "h", "a"], "$1\r\n0\r\n"),
        (
            &["hgetall", "h"],
            "*4\r\n$1\r\na\r\n$1\r\n0\r\n$1\r\nb\r\n$1\r\nx\r\n",
        ),
        (&["hset", "h", "a", "2", "a", "3"], ":0\r\n"),
        (&["hmget", "h", "a", "zz"], "*2\r\n$1\r\n3\r\n$-1\r\n"),
        (&["hdel", "h", "a", "b"], ":2\r\n"),
        (&["exists", "h"], ":0\r\n"),
        (&["hset", "h", "x", "1", "y", "2", "z", "3"], ":3\r\n"),
        (&["hdel", "h", "y"], ":1\r\n"),
        (&["hset", "h", "y", "9", "a", "0"], ":2\r\n"),
        (
            &["hgetall", "h"],
            "*8\r\n$1\r\nx\r\n$1\r\n1\r\n$1\r\nz\r\n$1\r\n3\r\n$1\r\ny\r\n$1\r\n9\r\n$1\r\na\r\n$1\r\n0\r\n",
        ),
        (&["hsetnx", "h", "x", "5"], ":0\r\n"),
        (&["hsetnx", "h", "w", "5"], ":1\r\n"),
        (
            &["hsetnx", "h", "a", "1", "2"],
            "-ERR wrong number of arguments for 'hsetnx' command\r\n",
        ),
        (&["hexists", "h", "w"], ":1\r\n"),
        (&["set", "s", "v"], "+OK\r\n"),
        (
            &["hget", "s", "a"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (
            &["hdel", "s", "a"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (
            &["hincrby", "s", "a", "1"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
    ]);
}

#[test]
fn server_commands_answer_in_redis_words() {
    replay(&[
        (
            &["CLIENT", "SETINFO", "LIB-NAME", "redis-rs"],
            "-ERR unknown subcommand 'SETINFO'. Try CLIENT HELP.\r\n",
        ),
        (&["CLIENT", "SETNAME", "x"], "+OK\r\n"),
        (
            &["client", "setname", "a b"],
            "-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
        ),
        (
            &["client"],
            "-ERR wrong number of arguments for 'client' command\r\n",
        ),
        (&["SELECT", "0"], "+OK\r\n"),
        (&["SELECT", "16"], "-ERR DB index is out of range\r\n"),
        (
            &["AUTH", "foo"],
            "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n",
        ),
        (
            &["AUTH", "u", "foo"],
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
        ),
        (&["AUTH", "default", "x"], "+OK\r\n"),
        (&["role"], "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"),
        (
            &["role", "x"],
            "-ERR wrong number of arguments for 'role' command\r\n",
        ),
        (
            &["config", "get"],
            "-ERR wrong number of arguments for 'config|get' command\r\n",
        ),
        (
            &["config", "get", "maxmemory-policy"],
            "*2\r\n$16\r\nmaxmemory-policy\r\n$10\r\nnoeviction\r\n",
        ),
        (
            &["config", "get", "appendonly"],
            "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n",
        ),
        (
            &["config", "get", "appendfsync"],
            "*2\r\n$11\r\nappendfsync\r\n$8\r\neverysec\r\n",
        ),
        (&["config", "get", "nope"], "*0\r\n"),
        (
            &["config", "foo"],
            "-ERR unknown subcommand 'foo'. Try CONFIG HELP.\r\n",
        ),
        (
            &["config"],
            "-ERR wrong number of arguments for 'config' command\r\n",
        ),
        (
            &["script"],
            "-ERR wrong number of arguments for 'script' command\r\n",
        ),
        (
            &["script", "load"],
            "-ERR wrong number of arguments for 'script|load' command\r\n",
        ),
        (
            &["script", "load", "return 1"],
            "$40\r\ne0e1f9fabfc9d4800c877a703b823ac0578ff8db\r\n",
        ),
        (
            &["script", "exists"],
            "-ERR wrong number of arguments for 'script|exists' command\r\n",
        ),
        (
            &[
                "script",
                "exists",
                "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB",
                "aa",
            ],
            "*2\r\n:1\r\n:0\r\n",
        ),
        (
            &["evalsha", "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "0"],
            ":1\r\n",
        ),
        (
            &["script", "flush", "foo"],
            "-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n",
        ),
        (&["script", "flush", "async"], "+OK\r\n"),
        (
            &["script", "foo"],
            "-ERR unknown subcommand 'foo'. Try SCRIPT HELP.\r\n",
        ),
        (
            &["evalsha", "aaa", "x"],
            "-NOSCRIPT No matching script. Please use EVAL.\r\n",
        ),
        (
            &["evalsha", "0000000000000000000000000000000000000000", "x"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["evalsha", "0000000000000000000000000000000000000000", "5"],
            "-ERR Number of keys can't be greater than number of args\r\n",
        ),
        (
            &["evalsha", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"],
            "-NOSCRIPT No matching script. Please use EVAL.\r\n",
        ),
        (
            &["eval"],
            "-ERR wrong number of arguments for 'eval' command\r\n",
        ),
        (
            &["eval", "return 1"],
            "-ERR wrong number of arguments for 'eval' command\r\n",
        ),
        (
            &["eval", "return 1", "x"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["eval", "return 1", "-1"],
            "-ERR Number of keys can't be negative\r\n",
        ),
        (
            &["eval", "return 1", "2", "a"],
            "-ERR Number of keys can't be greater than number of args\r\n",
        ),
        (
            &["pubsub", "numsub", "a", "b"],
            "*4\r\n$1\r\na\r\n:0\r\n$1\r\nb\r\n:0\r\n",
        ),
        (&["pubsub", "channels"], "*0\r\n"),
        (&["pubsub", "numpat"], ":0\r\n"),
        (
            &["pubsub"],
            "-ERR wrong number of arguments for 'pubsub' command\r\n",
        ),
        (
            &["pubsub", "nope"],
            "-ERR unknown subcommand 'nope'. Try PUBSUB HELP.\r\n",
        ),
        (
            &["pubsub", "numpat", "x"],
            "-ERR wrong number of arguments for 'pubsub|numpat' command\r\n",
        ),
        (&["flushall", "x"], "-ERR syntax error\r\n"),
        (&["flushall", "async"], "+OK\r\n"),
        (
            &["echo"],
            "-ERR wrong number of arguments for 'echo' command\r\n",
        ),
        (&["info", "nope"], "$0\r\n\r\n"),
        (
            &["info", "cluster"],
            "$30\r\n# Cluster\r\ncluster_enabled:0\r\n\r\n",
        ),
    ]);
}

#[test]
fn info_server_names_the_version_and_run_id() {
    let mut node = SimNode::new(0, 9);
    let info = raw(&mut node, ms(0), &["INFO", "server"]);
    assert!(info.contains("redis_version:7.0.15\r\n"), "{info}");
    assert!(
        info.contains(&format!("run_id:{}\r\n", node.run_id())),
        "{info}"
    );
    assert!(info.contains("tcp_port:6379\r\n"), "{info}");
    assert!(info.contains("uptime_in_seconds:0\r\n"), "{info}");
    let later = raw(&mut node, ms(2_500), &["INFO"]);
    assert!(later.contains("uptime_in_seconds:2\r\n"), "{later}");
    assert!(
        later.contains("# Replication\r\nrole:master\r\n"),
        "{later}"
    );
    assert!(later.contains("aof_enabled:0\r\n"), "{later}");
    node.set_config("appendonly", "yes");
    let persistence = raw(&mut node, ms(2_500), &["INFO", "persistence"]);
    assert!(persistence.contains("aof_enabled:1\r\n"), "{persistence}");
    assert!(!persistence.contains("# Server"), "{persistence}");
}

#[test]
fn published_messages_are_taken_in_order() {
    let mut node = SimNode::new(0, 1);
    raw(&mut node, ms(0), &["PUBLISH", "a", "1"]);
    raw(
        &mut node,
        ms(1),
        &["EVAL", "redis.call('publish', 'b', '2') return 1", "0"],
    );
    let expected = vec![
        (b"a".to_vec(), b"1".to_vec()),
        (b"b".to_vec(), b"2".to_vec()),
    ];
    assert_eq!(node.take_published(), expected);
    assert!(node.take_published().is_empty());
}
