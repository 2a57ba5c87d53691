//! Scripts: Redis's conversions both ways, its error texts (with the
//! ` script: <sha>, on @user_script:<line>.` suffix), its protected
//! globals, and the compiled-script cache. Each expected reply was read
//! from redis-server 7.0.15.

use super::{SimNode, ms, raw};

/// Runs `script` (no keys) on a node where `h` is a hash, `s` and `k`
/// strings.
fn eval(script: &str) -> String {
    let mut node = SimNode::new(0, 1);
    raw(&mut node, ms(0), &["HSET", "h", "a", "1"]);
    raw(&mut node, ms(0), &["SET", "s", "1y"]);
    raw(&mut node, ms(0), &["SET", "k", "1e+20"]);
    raw(&mut node, ms(0), &["EVAL", script, "0"])
}

fn check(cases: &[(&str, &str)]) {
    for (script, expected) in cases {
        assert_eq!(eval(script), *expected, "{script}");
    }
}

#[test]
fn lua_values_become_replies_as_in_redis() {
    check(&[
        ("return 3.99", ":3\r\n"),
        ("return -3.99", ":-3\r\n"),
        ("return 1.5e20", ":-9223372036854775808\r\n"),
        ("return {1,2,nil,4}", "*2\r\n:1\r\n:2\r\n"),
        (
            "return {1,'a',{2,3},true,false}",
            "*5\r\n:1\r\n$1\r\na\r\n*2\r\n:2\r\n:3\r\n:1\r\n$-1\r\n",
        ),
        ("return true", ":1\r\n"),
        ("return false", "$-1\r\n"),
        ("return nil", "$-1\r\n"),
        ("return", "$-1\r\n"),
        ("", "$-1\r\n"),
        ("return 'str'", "$3\r\nstr\r\n"),
        ("return {n=1}", "*0\r\n"),
        ("return {err=5}", "*0\r\n"),
        ("return {ok='x', err='y'}", "-y\r\n"),
        ("return {err='a\\nb'}", "-a b\r\n"),
        ("return {ok='fine'}", "+fine\r\n"),
        ("return {1, {err='inner'}}", "*2\r\n:1\r\n-inner\r\n"),
        ("return redis.status_reply('fine')", "+fine\r\n"),
    ]);
}

#[test]
fn replies_become_lua_values_as_in_redis() {
    check(&[
        (
            "return type(redis.call('get', 'nokey'))",
            "$7\r\nboolean\r\n",
        ),
        ("return type(redis.call('time')[1])", "$6\r\nstring\r\n"),
        ("return redis.call('type', 'h')", "+hash\r\n"),
        ("return redis.call('type', 'h').ok", "$4\r\nhash\r\n"),
        (
            "return redis.pcall('hget', 's', 'x')",
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (
            "return redis.pcall('hget', 's', 'x').err",
            "$65\r\nWRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (
            "return redis.call('hgetall', 'h')",
            "*2\r\n$1\r\na\r\n$1\r\n1\r\n",
        ),
        ("return redis.call('exists', 'h') + 1", ":2\r\n"),
        ("return redis.call('ping')", "+PONG\r\n"),
    ]);
}

#[test]
fn numbers_given_to_redis_call_are_written_as_printf_g17() {
    check(&[
        (
            "redis.call('set', 'k', 0.1) return redis.call('get', 'k')",
            "$19\r\n0.10000000000000001\r\n",
        ),
        (
            "redis.call('set', 'k', 1700000000123) return redis.call('get', 'k')",
            "$13\r\n1700000000123\r\n",
        ),
        (
            "redis.call('set', 'k', 1e20) return redis.call('get', 'k')",
            "$5\r\n1e+20\r\n",
        ),
        ("return redis.call('get', 1.5)", "$-1\r\n"),
    ]);
}

#[test]
fn errors_carry_redis_7s_text_and_suffix() {
    check(&[
        (
            "return redis.error_reply('QUARANTINED 5 ms left')",
            "-QUARANTINED 5 ms left\r\n",
        ),
        ("return redis.error_reply('my error')", "-my error\r\n"),
        ("return redis.error_reply('-my error')", "-my error\r\n"),
        ("return redis.error_reply('single')", "-ERR single\r\n"),
        ("return redis.error_reply('- x')", "- x\r\n"),
        ("return redis.error_reply('')", "-ERR \r\n"),
        (
            "return redis.error_reply(5)",
            "-ERR wrong number or type of arguments\r\n",
        ),
        ("return {err='X boom'}", "-X boom\r\n"),
        (
            "error('boom')",
            "-ERR user_script:1: boom script: 82903a0434f1503e152f89c03c9acd881a0e8150, on @user_script:1.\r\n",
        ),
        (
            "error({err='TAB boom'})",
            "-TAB boom script: bc8e864050fdd1605b464c26426a17eca90e65b6, on @user_script:1.\r\n",
        ),
        (
            "return redis.call('nope')",
            "-ERR Unknown Redis command called from script script: f01f0776df71cc5b400c2268135aa7f30dce2e53, on @user_script:1.\r\n",
        ),
        (
            "return redis.call('get')",
            "-ERR Wrong number of args calling Redis command from script script: f187dee77f607f7cff00bbabc9df38507582c78d, on @user_script:1.\r\n",
        ),
        (
            "return redis.call()",
            "-ERR Please specify at least one argument for this redis lib call script: 0a907e1429221a4d85516cab7fd219a82a9439d8, on @user_script:1.\r\n",
        ),
        (
            "return redis.call({})",
            "-ERR Lua redis lib command arguments must be strings or integers script: 80747816df1f4411f7c442b928fce6a814214839, on @user_script:1.\r\n",
        ),
        (
            "return redis.pcall('get', {})",
            "-ERR Lua redis lib command arguments must be strings or integers\r\n",
        ),
        (
            "return redis.pcall('nope')",
            "-ERR Unknown Redis command called from script\r\n",
        ),
        (
            "return redis.call('eval', 'return 1', 0)",
            "-ERR This Redis command is not allowed from script script: 310efa61ec0f2edf6c2e5b4007966dd555e75546, on @user_script:1.\r\n",
        ),
        (
            "return redis.pcall('config', 'get', 'x')",
            "-ERR This Redis command is not allowed from script\r\n",
        ),
        (
            "return redis.pcall('CONFIG')",
            "-ERR Wrong number of args calling Redis command from script\r\n",
        ),
        (
            "return redis.call('ping', 'a', 'b')",
            "-ERR wrong number of arguments for 'ping' command script: 54bb24c858fab5a4c01933df40cd77926cc27e78, on @user_script:1.\r\n",
        ),
        (
            "return redis.call('set', 'k', 'v', 'px', 1.5)",
            "-ERR value is not an integer or out of range script: 0527bfe009d9a635fe4d353ae03f998affb57142, on @user_script:1.\r\n",
        ),
        (
            "return redis.sha1hex()",
            "-ERR wrong number of arguments script: 3c7ce947ae74a835cc575b6ee87fb27503cb7ba4, on @user_script:1.\r\n",
        ),
        (
            "syntax error here",
            "-ERR Error compiling script (new function): user_script:1: '=' expected near 'error'\r\n",
        ),
        (
            "return 1 end",
            "-ERR Error compiling script (new function): user_script:1: '<eof>' expected near 'end'\r\n",
        ),
    ]);
}

#[test]
fn errors_name_the_line_of_the_script_where_they_happened() {
    check(&[
        (
            "local t = {}\nt = t + 1",
            "-ERR user_script:2: attempt to perform arithmetic on local 't' (a table value) script: 1c31a15f2cf6b2da8143812d2d9a6a50f3ba336c, on @user_script:2.\r\n",
        ),
        (
            "\n\nreturn redis.call('get')",
            "-ERR Wrong number of args calling Redis command from script script: b856adb96b7a85343fe2d3a9c94a2783136c74a3, on @user_script:3.\r\n",
        ),
        (
            "local function f()\n  return redis.call('get')\nend\nreturn f()",
            "-ERR Wrong number of args calling Redis command from script script: 368ec90ca9b6be43cdda863f470d9f07b3502dc9, on @user_script:2.\r\n",
        ),
        (
            "local function f()\n  return redis.call('hget', 'k', 'x')\nend\nreturn f()",
            "-WRONGTYPE Operation against a key holding the wrong kind of value script: 093d3aeda26cf59860ea3c0857d6ee6b72373b24, on @user_script:2.\r\n",
        ),
        (
            "\n  error('x')",
            "-ERR user_script:2: x script: 33ed77e17deb77f465b344da83270edcf56290a0, on @user_script:2.\r\n",
        ),
        (
            "return string.format('%d')",
            "-ERR user_script:1: bad argument #2 to 'format' (no value) script: 05feaa4990f14508c855a12844d0665b829def5d, on @user_script:1.\r\n",
        ),
        (
            "local a = nil; return a.b",
            "-ERR user_script:1: attempt to index local 'a' (a nil value) script: a4f98b90454ae717765b45eb6f71312d37f994c6, on @user_script:1.\r\n",
        ),
    ]);
}

#[test]
fn globals_are_protected_as_in_redis_7() {
    check(&[
        (
            "return x",
            "-ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: 03c387736bb5cc009ff35151572cee04677aa374, on @user_script:1.\r\n",
        ),
        (
            "x = 1",
            "-ERR user_script:1: Attempt to modify a readonly table script: 34bce5f775de97f557a34088509c8bfe1ea17e52, on @user_script:1.\r\n",
        ),
        (
            "\n\nx = 1",
            "-ERR user_script:3: Attempt to modify a readonly table script: d74b3f2db63a3b3b1b3d76b6a509be2a91f872be, on @user_script:3.\r\n",
        ),
        (
            "KEYS = 1; return 1",
            "-ERR user_script:1: Attempt to modify a readonly table script: 837fec46788ffa9741764ae563859e2c1b5659dd, on @user_script:1.\r\n",
        ),
        (
            "string.x = 1 return 1",
            "-ERR user_script:1: Attempt to modify a readonly table script: 6770cad2130b462700dfd84be362e79b2d26a288, on @user_script:1.\r\n",
        ),
        (
            "rawset(_G, 'z', 1); return z",
            "-ERR Attempt to modify a readonly table script: c24d5c48ba649491fc720204520743d7cb3a28e8, on @user_script:1.\r\n",
        ),
        (
            "return type(print)",
            "-ERR user_script:1: Script attempted to access nonexistent global variable 'print' script: 296aa29e565df267b5e30e498f3872c9f9e8e8cc, on @user_script:1.\r\n",
        ),
        (
            "return type(os)",
            "-ERR user_script:1: Script attempted to access nonexistent global variable 'os' script: 88bfcb2247db0b6fa4925f3cddc3fd0651459f99, on @user_script:1.\r\n",
        ),
        ("return _VERSION", "$7\r\nLua 5.1\r\n"),
        ("return type(loadstring)", "$8\r\nfunction\r\n"),
        ("return redis.REDIS_VERSION", "$6\r\n7.0.15\r\n"),
        ("return redis.REDIS_VERSION_NUM", ":458767\r\n"),
        (
            "return redis.sha1hex('')",
            "$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n",
        ),
        (
            "return redis.sha1hex(5)",
            "$40\r\nac3478d69a3c81fa62e60f5c3696165a4e5e6ac4\r\n",
        ),
        ("return redis.setresp(2)", "$-1\r\n"),
        ("return redis.log(redis.LOG_WARNING, 'x')", "$-1\r\n"),
        ("local a = {}; a.b = 1; return a.b", ":1\r\n"),
        ("return table.concat({'a','b'}, ',')", "$3\r\na,b\r\n"),
    ]);
}

#[test]
fn keys_and_argv_are_set_per_call_and_may_be_changed() {
    let mut node = SimNode::new(0, 1);
    assert_eq!(
        raw(
            &mut node,
            ms(0),
            &["EVAL", "table.remove(KEYS) return KEYS", "2", "a", "b"]
        ),
        "*1\r\n$1\r\na\r\n"
    );
    assert_eq!(
        raw(
            &mut node,
            ms(0),
            &["EVAL", "return {#KEYS, ARGV[1]}", "1", "k", "x"]
        ),
        "*2\r\n:1\r\n$1\r\nx\r\n"
    );
    assert_eq!(
        raw(&mut node, ms(0), &["EVAL", "return ARGV", "0", "x", "y"]),
        "*2\r\n$1\r\nx\r\n$1\r\ny\r\n"
    );
}

#[test]
fn math_random_is_redis_rand48() {
    // 27 and 69: what redis-server 7.0.15 answered after the same seed.
    let lua = "math.randomseed(7) return {math.random(100), math.random(100)}";
    assert_eq!(eval(lua), "*2\r\n:27\r\n:69\r\n");
}

#[test]
fn a_script_is_compiled_once_whatever_runs_it() {
    let mut node = SimNode::new(0, 1);
    assert_eq!(
        node.compilations(),
        0,
        "no Lua state before the first script"
    );
    let body = "return redis.call('exists', KEYS[1])";
    let sha = super::super::script::sha1_hex(body.as_bytes());
    for i in 0..50 {
        raw(&mut node, ms(i), &["EVAL", body, "1", "k"]);
        raw(&mut node, ms(i), &["EVALSHA", &sha, "1", "k"]);
    }
    assert_eq!(node.compilations(), 1);
    raw(&mut node, ms(60), &["SCRIPT", "FLUSH"]);
    node.restart(ms(61), super::super::Persistence::None);
    assert_eq!(
        raw(&mut node, ms(62), &["EVALSHA", &sha, "1", "k"]),
        "-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
    raw(&mut node, ms(63), &["SCRIPT", "LOAD", body]);
    raw(&mut node, ms(64), &["EVALSHA", &sha, "1", "k"]);
    raw(&mut node, ms(65), &["EVAL", "return 2", "0"]);
    assert_eq!(node.compilations(), 2);
}
