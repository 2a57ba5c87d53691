#![cfg(all(feature = "sim", feature = "testkit"))]
//! The simulated node stays honest: the same commands, sent to a real
//! redis-server and to a [`SimNode`], get the same replies.
//!
//! Random sequences (one per seed of a fixed list, and one more for
//! `SIM_DIFF_SEED`) of single-node commands and of the library's own
//! scripts over a small key set go to both, one by one. The model's
//! virtual time follows the wall time measured between commands and its
//! clock starts at the real server's `TIME`, so both clocks agree; replies
//! must be equal, except that numbers that carry a time (a TTL, a
//! timestamp, the time left of a quarantine) may differ by the time a round
//! trip can account for. Commands are held back while a key is about to
//! expire, so that the two never disagree only because they expired it a
//! millisecond apart. A mismatch prints the seed, the command's index, the
//! command and both replies.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use redis::Value;
use redquorum::testkit::LocalCluster;
use redquorum::testkit::sim::node::{SimNode, scripts};

/// The seeds every run tries.
const SEEDS: [u64; 6] = [1, 2, 3, 7, 42, 20_240_611];
/// One more seed, to replay or explore.
const SEED_ENV: &str = "SIM_DIFF_SEED";
/// Commands per seed.
const COMMANDS: usize = 300;
/// The slack, beyond measured round trips, for numbers that carry time.
const SLACK_MS: i64 = 50;

/// A plain connection to the real server that returns each reply's bytes.
struct Real {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Real {
    fn connect(url: &str) -> Real {
        let addr = url
            .trim_start_matches("redis://")
            .trim_end_matches('/')
            .to_owned();
        let stream = TcpStream::connect(&addr).expect("connect to the real server");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        let writer = stream.try_clone().expect("clone the stream");
        Real {
            reader: BufReader::new(stream),
            writer,
        }
    }

    fn call(&mut self, args: &[Vec<u8>]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        self.writer
            .write_all(&out)
            .expect("send to the real server");
        let mut reply = Vec::new();
        self.read_reply(&mut reply);
        reply
    }

    /// Appends one whole RESP2 reply to `into`.
    fn read_reply(&mut self, into: &mut Vec<u8>) {
        let start = into.len();
        self.reader
            .read_until(b'\n', into)
            .expect("read from the real server");
        let line = String::from_utf8_lossy(&into[start..])
            .trim_end()
            .to_owned();
        let (kind, rest) = line.split_at(1);
        match kind {
            "$" => {
                let len: i64 = rest.parse().expect("bulk length");
                if len >= 0 {
                    let mut body = vec![0; usize::try_from(len).unwrap() + 2];
                    self.reader.read_exact(&mut body).expect("bulk body");
                    into.extend_from_slice(&body);
                }
            }
            "*" => {
                let n: i64 = rest.parse().expect("array length");
                for _ in 0..n.max(0) {
                    self.read_reply(into);
                }
            }
            _ => {}
        }
    }
}

/// The real server and the model, side by side.
struct Pair {
    real: Real,
    model: SimNode,
    /// Virtual time zero for the model.
    start: Instant,
    /// The longest round trip to the real server so far.
    max_rtt: Duration,
    /// When each key with a TTL expires on the model (virtual time), kept
    /// after it has expired: what [`settle`](Self::settle) keeps clear of.
    deadlines: std::collections::BTreeMap<&'static str, Duration>,
    compared: usize,
    /// Of those, script invocations and error replies.
    scripts: usize,
    errors: usize,
}

impl Pair {
    /// A fresh model for `seed` against `real`, its clock set to the real
    /// server's.
    fn new(mut real: Real, seed: u64) -> Pair {
        for reset in [&["FLUSHALL"][..], &["SCRIPT", "FLUSH"]] {
            real.call(&words(reset));
        }
        let before = Instant::now();
        let time = real.call(&words(&["TIME"]));
        let after = Instant::now();
        let real_ms = time_ms(&parse(&time)).expect("TIME answers two numbers");
        let start = before + (after - before) / 2;
        let mut model = SimNode::new(0, seed);
        let model_ms = model.clock().now_ms(Duration::ZERO);
        model.clock_mut().jump(real_ms - model_ms);
        Pair {
            real,
            model,
            start,
            max_rtt: after - before,
            deadlines: Default::default(),
            compared: 0,
            scripts: 0,
            errors: 0,
        }
    }

    /// Sends `args` to both; the two replies and the tolerance (ms) for
    /// numbers that carry time.
    fn send(&mut self, args: &[Vec<u8>]) -> (Vec<u8>, Vec<u8>, i64) {
        let sent = Instant::now();
        let real = self.real.call(args);
        let received = Instant::now();
        let rtt = received - sent;
        self.max_rtt = self.max_rtt.max(rtt);
        let now = (sent + rtt / 2).saturating_duration_since(self.start);
        let model = self.model.execute(now, args);
        self.compared += 1;
        let name = args.first().map(|n| n.to_ascii_uppercase());
        self.scripts += usize::from(matches!(name.as_deref(), Some(b"EVAL" | b"EVALSHA")));
        self.errors += usize::from(real.first() == Some(&b'-'));
        for key in KEYS {
            match self.model.pttl(now, key) {
                -1 => {
                    self.deadlines.remove(key);
                }
                ttl if ttl >= 0 => {
                    let ttl = Duration::from_millis(u64::try_from(ttl).unwrap_or(0));
                    self.deadlines.insert(key, now + ttl);
                }
                _ => {}
            }
        }
        let tolerance = SLACK_MS + millis(rtt) + millis(self.max_rtt);
        (real, model, tolerance)
    }

    /// The model's virtual time now.
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Waits while any key's expiry on the model is within reach (either
    /// side of it), so that the real server and the model agree on whether
    /// the key is alive.
    fn settle(&self) {
        let margin = Duration::from_millis(u64::try_from(SLACK_MS).unwrap_or(0)) + 2 * self.max_rtt;
        loop {
            let now = self.now();
            let wait = self
                .deadlines
                .values()
                .filter(|&&deadline| now + margin > deadline && now < deadline + margin)
                .map(|&deadline| deadline + margin - now)
                .max();
            match wait {
                Some(wait) => std::thread::sleep(wait),
                None => return,
            }
        }
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn words(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

fn parse(bytes: &[u8]) -> Value {
    redis::parse_redis_value(bytes)
        .unwrap_or_else(|e| panic!("unparsable reply {:?}: {e}", String::from_utf8_lossy(bytes)))
}

/// `TIME`'s answer in ms.
fn time_ms(value: &Value) -> Option<f64> {
    let Value::Array(parts) = value else {
        return None;
    };
    let number = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).parse::<f64>().ok(),
        _ => None,
    };
    Some(number(parts.first()?)? * 1000.0 + number(parts.get(1)?)? / 1000.0)
}

/// A seeded generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n).unwrap()).unwrap()
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const LOCKS: [&str; 2] = ["rq:lock:a", "rq:lock:b"];
const FENCES: [&str; 2] = ["rq:fence:a", "rq:fence:b"];
const GUARD: &str = "rq:restart-guard:node";
const HASH: &str = "h";
const STRING: &str = "s";
/// Every key the sequences touch.
const KEYS: [&str; 7] = [
    "rq:lock:a",
    "rq:lock:b",
    "rq:fence:a",
    "rq:fence:b",
    GUARD,
    HASH,
    STRING,
];
const VALUES: [&str; 5] = ["Aone", "Btwo", "Aone+", "x", "7"];
const TTLS: [&str; 5] = ["150", "400", "2000", "60000", "0"];
const FIELDS: [&str; 4] = ["f", "g", "owner", "count"];

/// One command of a sequence, and whether numbers in its reply carry time.
struct Step {
    args: Vec<Vec<u8>>,
    timed: bool,
}

fn plain(words: Vec<String>) -> Step {
    let timed = words
        .first()
        .is_some_and(|w| ["PTTL", "TIME", "HGET", "HGETALL", "HMGET"].contains(&w.as_str()));
    Step {
        args: words.into_iter().map(String::into_bytes).collect(),
        timed,
    }
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// The keys plain commands touch: all but the restart guard's record,
/// which holds the server's `run_id` (the model's is its own).
const PLAIN_KEYS: [&str; 6] = [
    "rq:lock:a",
    "rq:lock:b",
    "rq:fence:a",
    "rq:fence:b",
    HASH,
    STRING,
];

/// A random plain command over the key set.
fn random_command(rng: &mut Rng) -> Step {
    let key = rng.pick(&PLAIN_KEYS);
    let other = rng.pick(&KEYS);
    let value = rng.pick(&VALUES);
    let field = rng.pick(&FIELDS);
    let words: Vec<&str> = match rng.below(22) {
        0 | 1 => {
            let mut w = vec!["SET", key, value];
            if rng.chance(50) {
                w.push(if rng.chance(80) { "NX" } else { "XX" });
            }
            if rng.chance(60) {
                w.push("PX");
                w.push(rng.pick(&TTLS[..4]));
            }
            if rng.chance(10) {
                w.push("GET");
            }
            w
        }
        2 => vec!["GET", key],
        3 => vec!["DEL", key, other],
        4 => vec!["PTTL", key],
        5 => vec!["PEXPIRE", key, rng.pick(&TTLS)],
        6 => vec!["EXISTS", key, other],
        7 => vec!["TYPE", key],
        8 => vec!["APPEND", key, value],
        9 => vec!["HSET", rng.pick(&[HASH, key]), field, value],
        10 => vec!["HGET", rng.pick(&[HASH, key]), field],
        11 => vec!["HDEL", rng.pick(&[HASH, key]), field, "g"],
        12 => vec!["HGETALL", rng.pick(&[HASH, key])],
        13 => vec![
            "HINCRBY",
            rng.pick(&[HASH, key]),
            field,
            rng.pick(&["1", "-2", "x"]),
        ],
        14 => vec!["HSETNX", rng.pick(&[HASH, key]), field, value],
        15 => vec!["HMGET", rng.pick(&[HASH, key]), field, "f"],
        16 => vec!["HEXISTS", rng.pick(&[HASH, key]), field],
        17 => rng
            .pick(&["GET", "SET", "PTTL", "HSET", "PEXPIRE", "EVALSHA", "DEL"])
            .split(' ')
            .chain(std::iter::once(key).take(rng.below(2)))
            .collect(),
        18 => vec!["SET", key, value, "PX", rng.pick(&["0", "-5", "abc", "01"])],
        19 => vec!["FOOBAR", key],
        20 => vec!["TIME"],
        _ => vec!["INFO", "cluster"],
    };
    plain(owned(&words))
}

/// A random invocation of one of the library's scripts, with keys and
/// arguments of the shape the library gives it.
fn random_script(rng: &mut Rng, library: &[(&'static str, String)]) -> (Step, String) {
    let (name, text) = &library[rng.below(library.len())];
    let lock = rng.pick(&LOCKS);
    let both = rng.chance(30);
    let locks: Vec<&str> = if both { LOCKS.to_vec() } else { vec![lock] };
    let fences: Vec<&str> = locks
        .iter()
        .map(|l| if *l == LOCKS[0] { FENCES[0] } else { FENCES[1] })
        .collect();
    let value = rng.pick(&VALUES[..3]);
    let ttl = rng.pick(&TTLS[..4]);
    let q = rng.pick(&["0", "0", "60000"]);
    let hold = rng.pick(&["r:1", "r:2"]);
    let owner = rng.pick(&["me", "you"]);
    let token = rng.pick(&["1", "2", "10"]);
    let (keys, args, timed): (Vec<&str>, Vec<&str>, bool) = match *name {
        "acquire_all" | "extend" | "extend_or_missing" | "reseed" => {
            (locks, vec![value, ttl], false)
        }
        "release" => {
            let mut args = vec![value];
            if rng.chance(50) {
                args.push(rng.pick(&["0", "1"]));
            }
            (locks, args, false)
        }
        "fenced_acquire" => ([locks, fences].concat(), vec![value, ttl], false),
        "fence_write_back" => {
            let tokens = vec![token; fences.len()];
            (
                [locks, fences].concat(),
                [vec![value], tokens].concat(),
                false,
            )
        }
        "reentrant_acquire" => (vec![lock], vec![owner, hold, ttl], false),
        "reentrant_release" => (vec![lock], vec![hold], false),
        "reentrant_extend" => (vec![lock], vec![hold, ttl], false),
        "guarded_acquire_all" => ([locks, vec![GUARD]].concat(), vec![value, ttl, q], true),
        "guarded_reentrant_acquire" => (vec![lock, GUARD], vec![owner, hold, ttl, q], true),
        "guarded_fenced_acquire" => (
            [locks, fences, vec![GUARD]].concat(),
            vec![value, ttl, q],
            true,
        ),
        "guarded_fence_write_back" => {
            let tokens = vec![token; fences.len()];
            let keys = [locks, fences, vec![GUARD]].concat();
            (keys, [vec![value], tokens].concat(), false)
        }
        "guarded_extend" | "guarded_extend_or_missing" => {
            ([locks, vec![GUARD]].concat(), vec![value, ttl, q], true)
        }
        "guarded_reentrant_extend" => (vec![lock, GUARD], vec![hold, ttl, q], true),
        // One key per lock; the TTL, then each lock's value.
        "batched_extend" | "batched_extend_or_missing" => {
            let values: Vec<&str> = locks.iter().map(|_| rng.pick(&VALUES[..3])).collect();
            (locks, [vec![ttl], values].concat(), false)
        }
        "guarded_batched_extend" | "guarded_batched_extend_or_missing" => {
            let values: Vec<&str> = locks.iter().map(|_| rng.pick(&VALUES[..3])).collect();
            (
                [locks, vec![GUARD]].concat(),
                [vec![ttl], values, vec![q]].concat(),
                true,
            )
        }
        "trust_status" | "mark_trusted" | "set_quarantine" | "spread" => {
            (vec![GUARD], vec![q], true)
        }
        "vouch_counters" => {
            let counters = if rng.chance(50) { fences } else { vec![] };
            ([vec![GUARD], counters].concat(), vec![q], true)
        }
        "inspect" => (vec![lock, fences[0]], vec![], true),
        "diagnose" => (vec![lock], vec!["get", "pexpire", "time", "info"], false),
        other => panic!("no shape for the script {other}: add one"),
    };
    let count = keys.len().to_string();
    let by_sha = rng.chance(80);
    let sha = sha1_hex(text);
    let mut words: Vec<String> = vec![
        if by_sha { "EVALSHA" } else { "EVAL" }.to_owned(),
        if by_sha { sha } else { text.clone() },
        count,
    ];
    words.extend(keys.iter().map(|k| (*k).to_owned()));
    words.extend(args.iter().map(|a| (*a).to_owned()));
    let step = Step {
        args: words.into_iter().map(String::into_bytes).collect(),
        timed,
    };
    (step, (*name).to_owned())
}

/// The sha1 of a script, as `SCRIPT LOAD` answers it.
fn sha1_hex(text: &str) -> String {
    redis::Script::new(text).get_hash().to_owned()
}

/// True when `real` and `model` agree; in a `timed` reply, numbers of 20
/// or more (TTLs, timestamps, ms left) may differ by `tolerance`.
fn agree(real: &Value, model: &Value, timed: bool, tolerance: i64) -> bool {
    if real == model {
        return true;
    }
    if !timed {
        return false;
    }
    let close = |a: i64, b: i64| a.abs() >= 20 && b.abs() >= 20 && (a - b).abs() <= tolerance;
    match (real, model) {
        (Value::Int(a), Value::Int(b)) => close(*a, *b),
        (Value::BulkString(a), Value::BulkString(b)) => words_agree(a, b, &close),
        (Value::ServerError(a), Value::ServerError(b)) => {
            a.code() == b.code()
                && words_agree(
                    a.details().unwrap_or_default().as_bytes(),
                    b.details().unwrap_or_default().as_bytes(),
                    &close,
                )
        }
        (Value::Array(a), Value::Array(b)) => {
            if let (Some(x), Some(y)) = (time_ms(real), time_ms(model)) {
                return (x - y).abs() <= tolerance as f64;
            }
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| agree(x, y, timed, tolerance))
        }
        _ => false,
    }
}

/// Texts that agree word by word, numbers (a leading `?` aside) within
/// `close`.
fn words_agree(a: &[u8], b: &[u8], close: &dyn Fn(i64, i64) -> bool) -> bool {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    let (a, b): (Vec<&str>, Vec<&str>) = (a.split(' ').collect(), b.split(' ').collect());
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            x == y
                || match (
                    x.trim_start_matches('?').parse::<i64>(),
                    y.trim_start_matches('?').parse::<i64>(),
                ) {
                    (Ok(m), Ok(n)) => x.starts_with('?') == y.starts_with('?') && close(m, n),
                    _ => false,
                }
        })
}

fn show(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| {
            let text = String::from_utf8_lossy(a);
            if text.len() > 60 {
                format!("<{} bytes of Lua>", text.len())
            } else {
                format!("{text:?}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Sends one step to both and fails the test, saying where, when the
/// replies disagree. Returns the real server's reply.
fn compare(pair: &mut Pair, seed: u64, index: usize, step: &Step) -> Value {
    let (real, model, tolerance) = pair.send(&step.args);
    let (real_value, model_value) = (parse(&real), parse(&model));
    assert!(
        agree(&real_value, &model_value, step.timed, tolerance),
        "seed {seed}, command {index}: {}\n  real:  {:?}\n  model: {:?}\n(rerun one seed with {SEED_ENV}={seed})",
        show(&step.args),
        String::from_utf8_lossy(&real),
        String::from_utf8_lossy(&model),
    );
    real_value
}

/// One seed's sequence; returns how many commands were compared, how
/// many of them ran a script, and how many got an error.
fn run_seed(url: &str, seed: u64, library: &[(&'static str, String)]) -> [usize; 3] {
    let mut pair = Pair::new(Real::connect(url), seed);
    let mut rng = Rng(seed);
    for index in 0..COMMANDS {
        // Let time pass now and then, so that keys expire mid-sequence.
        if rng.chance(25) {
            let pause = 1 + rng.next() % 40;
            std::thread::sleep(Duration::from_millis(pause));
        }
        pair.settle();
        let (step, script) = if rng.chance(40) {
            let (step, name) = random_script(&mut rng, library);
            (step, Some(name))
        } else if rng.chance(2) {
            (plain(owned(&["SCRIPT", "FLUSH"])), None)
        } else {
            (random_command(&mut rng), None)
        };
        let reply = compare(&mut pair, seed, index, &step);
        // As the library does: NOSCRIPT, then SCRIPT LOAD and again.
        let noscript = matches!(&reply, Value::ServerError(e) if e.code() == "NOSCRIPT");
        if let (true, Some(name)) = (noscript, script) {
            let text = library
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, t)| t.clone())
                .unwrap_or_default();
            compare(
                &mut pair,
                seed,
                index,
                &plain(vec!["SCRIPT".into(), "LOAD".into(), text]),
            );
            compare(&mut pair, seed, index, &step);
        }
    }
    [pair.compared, pair.scripts, pair.errors]
}

#[test]
fn random_sequences_get_the_same_replies_from_the_model_and_a_real_server() {
    let cluster = LocalCluster::start(1).expect("start a redis-server");
    let url = cluster.direct_url(0);
    let library = scripts();
    assert!(
        library.len() >= 18,
        "every library script: {}",
        library.len()
    );
    let mut seeds = SEEDS.to_vec();
    if let Ok(extra) = std::env::var(SEED_ENV) {
        seeds.push(extra.parse().expect("SIM_DIFF_SEED is a number"));
    }
    let [mut compared, mut scripts, mut errors] = [0; 3];
    for seed in &seeds {
        let [c, s, e] = run_seed(&url, *seed, &library);
        (compared, scripts, errors) = (compared + c, scripts + s, errors + e);
    }
    eprintln!(
        "sim differential: {compared} commands compared over {} seeds \
         ({scripts} script invocations, {errors} error replies)",
        seeds.len()
    );
    assert!(compared >= seeds.len() * COMMANDS);
}

/// `library`'s script `name`.
fn script<'a>(library: &'a [(&'static str, String)], name: &str) -> &'a str {
    library
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| t.as_str())
        .unwrap_or_else(|| panic!("no script {name}"))
}

/// Runs `words` on both and asserts the replies are equal, byte for byte.
fn same(pair: &mut Pair, words: &[&str]) -> String {
    let args: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
    let (real, model, _) = pair.send(&args);
    let (real, model) = (
        String::from_utf8_lossy(&real).into_owned(),
        String::from_utf8_lossy(&model).into_owned(),
    );
    assert_eq!(real, model, "{}", show(&args));
    real
}

#[test]
fn after_script_flush_evalsha_is_noscript_on_both() {
    let cluster = LocalCluster::start(1).expect("start a redis-server");
    let library = scripts();
    let mut pair = Pair::new(Real::connect(&cluster.direct_url(0)), 5);
    let extend = script(&library, "extend");
    let sha = sha1_hex(extend);
    assert_eq!(
        same(&mut pair, &["SCRIPT", "LOAD", extend]),
        format!("$40\r\n{sha}\r\n")
    );
    same(&mut pair, &["SET", LOCKS[0], "Aone", "PX", "60000"]);
    assert_eq!(
        same(
            &mut pair,
            &["EVALSHA", &sha, "1", LOCKS[0], "Aone", "60000"]
        ),
        ":1\r\n"
    );
    assert_eq!(same(&mut pair, &["SCRIPT", "FLUSH"]), "+OK\r\n");
    assert_eq!(
        same(
            &mut pair,
            &["EVALSHA", &sha, "1", LOCKS[0], "Aone", "60000"]
        ),
        "-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
    assert_eq!(same(&mut pair, &["SCRIPT", "EXISTS", &sha]), "*1\r\n:0\r\n");
}

#[test]
fn a_user_without_pexpire_gets_the_same_extend_error_on_both() {
    let cluster = LocalCluster::start(1).expect("start a redis-server");
    let library = scripts();
    let mut pair = Pair::new(Real::connect(&cluster.direct_url(0)), 6);
    let setuser = [
        "ACL",
        "SETUSER",
        "nopexpire",
        "on",
        "nopass",
        "~*",
        "&*",
        "+@all",
        "-pexpire",
    ];
    assert_eq!(pair.real.call(&words(&setuser)), b"+OK\r\n");
    assert_eq!(
        pair.real.call(&words(&["AUTH", "nopexpire", "x"])),
        b"+OK\r\n"
    );
    pair.model.deny("pexpire");
    // Less left than the extension asks for: an extension never shortens.
    same(&mut pair, &["SET", LOCKS[0], "Aone", "PX", "30000"]);
    let extend = script(&library, "extend");
    let denied = same(&mut pair, &["EVAL", extend, "1", LOCKS[0], "Aone", "60000"]);
    assert!(
        denied.contains("The user executing the script can't run this command or subcommand"),
        "{denied}"
    );
    let sha = sha1_hex(extend);
    assert_eq!(
        same(
            &mut pair,
            &["EVALSHA", &sha, "1", LOCKS[0], "Aone", "60000"]
        ),
        denied
    );
    same(&mut pair, &["PEXPIRE", LOCKS[0], "10"]);
    let diagnose = script(&library, "diagnose");
    let found = same(
        &mut pair,
        &["EVAL", diagnose, "1", LOCKS[0], "get", "pexpire"],
    );
    let named = format!("pexpire {}", LOCKS[0]);
    assert_eq!(found, format!("${}\r\n{named}\r\n", named.len()));
    pair.real.call(&words(&["AUTH", "default", "x"]));
    pair.real.call(&words(&["ACL", "DELUSER", "nopexpire"]));
}

#[test]
fn a_replica_refuses_writes_in_the_same_words_on_both() {
    let cluster = LocalCluster::start(1).expect("start a redis-server");
    let library = scripts();
    let mut pair = Pair::new(Real::connect(&cluster.direct_url(0)), 8);
    same(&mut pair, &["SET", LOCKS[0], "Aone", "PX", "60000"]);
    // A master that does not exist: the real server stays a replica, with
    // the data it had.
    assert_eq!(
        pair.real.call(&words(&["REPLICAOF", "127.0.0.1", "1"])),
        b"+OK\r\n"
    );
    pair.model.set_replica_of(Some(("127.0.0.1".to_owned(), 1)));
    for words in [
        &["SET", LOCKS[1], "Aone"][..],
        &["DEL", LOCKS[0]],
        &["PEXPIRE", LOCKS[0], "10"],
        &["HSET", HASH, "f", "v"],
    ] {
        assert_eq!(
            same(&mut pair, words),
            "-READONLY You can't write against a read only replica.\r\n"
        );
    }
    let acquire = script(&library, "acquire_all");
    let refused = same(&mut pair, &["EVAL", acquire, "1", LOCKS[1], "Aone", "1000"]);
    assert!(
        refused.starts_with("-READONLY You can't write against a read only replica. script: "),
        "{refused}"
    );
    same(&mut pair, &["GET", LOCKS[0]]);
    assert_eq!(
        pair.real.call(&words(&["REPLICAOF", "NO", "ONE"])),
        b"+OK\r\n"
    );
}
