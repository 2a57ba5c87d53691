//! ACL refusals, plain and inside scripts, and read-only replicas: the
//! texts redis-server 7.0.15 gave for each.

use redis::Value;

use super::{SimNode, error_text, ms, query, raw};

#[test]
fn a_denied_command_answers_noperm() {
    let mut node = SimNode::new(0, 1);
    node.deny("pexpire");
    assert_eq!(
        raw(&mut node, ms(0), &["PEXPIRE", "a", "1"]),
        "-NOPERM this user has no permissions to run the 'pexpire' command\r\n"
    );
    // Arity is checked first.
    assert_eq!(
        raw(&mut node, ms(0), &["PEXPIRE", "a"]),
        "-ERR wrong number of arguments for 'pexpire' command\r\n"
    );
    node.deny("config|get");
    assert_eq!(
        raw(&mut node, ms(0), &["CONFIG", "GET", "foo"]),
        "-NOPERM this user has no permissions to run the 'config|get' command\r\n"
    );
    node.deny("evalsha");
    assert_eq!(
        raw(
            &mut node,
            ms(0),
            &["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"]
        ),
        "-NOPERM this user has no permissions to run the 'evalsha' command\r\n"
    );
    node.allow("pexpire");
    assert_eq!(raw(&mut node, ms(0), &["PEXPIRE", "a", "1"]), ":0\r\n");
}

#[test]
fn a_denied_command_inside_a_script_raises_redis_7s_error() {
    let mut node = SimNode::new(0, 1);
    node.deny("pexpire");
    let call = "return redis.call('pexpire', 'a', 1)";
    let reply = query(&mut node, ms(0), &["EVAL", call, "0"]);
    assert_eq!(
        error_text(&reply),
        "ERR The user executing the script can't run this command or subcommand script: \
         a63e144aa692764e143e9c91cde473ccc4047a7b, on @user_script:1."
    );
    let pcall = "return redis.pcall('pexpire', 'a', 1)";
    assert_eq!(
        raw(&mut node, ms(0), &["EVAL", pcall, "0"]),
        "-ERR The user executing the script can't run this command or subcommand\r\n"
    );
}

#[test]
fn acl_check_cmd_says_false_for_a_denied_command() {
    let mut node = SimNode::new(0, 1);
    node.deny("pexpire");
    node.deny("config|get");
    let check = |node: &mut SimNode, lua: &str| query(node, ms(0), &["EVAL", lua, "0"]);
    assert_eq!(
        check(&mut node, "return redis.acl_check_cmd('pexpire', 'a', '1')"),
        Value::Nil
    );
    assert_eq!(
        check(&mut node, "return redis.acl_check_cmd('get', 'a')"),
        Value::Int(1)
    );
    assert_eq!(
        check(
            &mut node,
            "return redis.acl_check_cmd('config', 'get', 'x')"
        ),
        Value::Nil
    );
    assert_eq!(
        check(&mut node, "return redis.acl_check_cmd('config')"),
        Value::Int(1)
    );
    let unknown = check(&mut node, "return redis.acl_check_cmd('nope', 'a')");
    assert_eq!(
        error_text(&unknown),
        "ERR Invalid command passed to redis.acl_check_cmd() script: \
         4f2ed202aceebbce45d553ad440a92de88edd61a, on @user_script:1."
    );
}

#[test]
fn a_replica_refuses_writes_and_says_it_is_a_slave() {
    let mut node = SimNode::new(0, 1);
    raw(&mut node, ms(0), &["SET", "a", "1"]);
    node.set_replica_of(Some(("127.0.0.1".to_owned(), 7000)));
    let readonly = "-READONLY You can't write against a read only replica.\r\n";
    for words in [
        &["SET", "a", "2"][..],
        &["DEL", "a"],
        &["PEXPIRE", "a", "1"],
        &["HSET", "h", "a", "1"],
        &["APPEND", "a", "x"],
        &["FLUSHALL"],
    ] {
        assert_eq!(raw(&mut node, ms(0), words), readonly, "{words:?}");
    }
    assert_eq!(raw(&mut node, ms(0), &["GET", "a"]), "$1\r\n1\r\n");
    assert_eq!(raw(&mut node, ms(0), &["PUBLISH", "c", "m"]), ":0\r\n");
    assert_eq!(
        raw(&mut node, ms(0), &["ROLE"]),
        "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:7000\r\n$9\r\nconnected\r\n:0\r\n"
    );
    let role: redis::Role = redis::from_redis_value(query(&mut node, ms(0), &["ROLE"])).unwrap();
    assert!(matches!(
        role,
        redis::Role::Replica {
            primary_port: 7000,
            ..
        }
    ));
    let set = "return redis.call('set', 'a', 1)";
    assert_eq!(
        error_text(&query(&mut node, ms(0), &["EVAL", set, "0"])),
        "READONLY You can't write against a read only replica. script: \
         077e58c8635d4a7e55d5d5644be12af800cc5bd7, on @user_script:1."
    );
    let info = raw(&mut node, ms(0), &["INFO", "replication"]);
    assert!(
        info.contains("role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:7000\r\n"),
        "{info}"
    );
    node.set_replica_of(None);
    assert_eq!(raw(&mut node, ms(0), &["SET", "a", "2"]), "+OK\r\n");
}
