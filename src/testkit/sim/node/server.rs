//! Server and connection commands: `PING`, `ECHO`, `INFO`, `ROLE`,
//! `CONFIG GET/SET`, `TIME`, `FLUSHALL`, `SAVE`, `PUBLISH`, `PUBSUB`,
//! `AUTH`, `SELECT`, `HELLO`, `CLIENT`, `DBSIZE`, `SCRIPT EXISTS/FLUSH`.

use super::core::{Core, at, is, rest, wrong_arity};
use super::info;
use super::number::parse_i64;
use super::reply::{Reply, not_integer, syntax_error};

/// `PING [message]`.
pub(super) fn ping(_: &mut Core, args: &[Vec<u8>]) -> Reply {
    match args.len() {
        1 => Reply::Status("PONG".to_owned()),
        2 => Reply::bulk(at(args, 1)),
        _ => wrong_arity("ping"),
    }
}

/// `ECHO message`.
pub(super) fn echo(_: &mut Core, args: &[Vec<u8>]) -> Reply {
    Reply::bulk(at(args, 1))
}

/// `QUIT`: the link closes the connection.
pub(super) fn quit(_: &mut Core, _: &[Vec<u8>]) -> Reply {
    Reply::ok()
}

/// `INFO [section ...]`.
pub(super) fn info(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    Reply::bulk(info::text(core, rest(args, 1)))
}

/// `ROLE`: `master` with no replicas, or `slave` of the master set with
/// `set_replica_of`, connected.
pub(super) fn role(core: &mut Core, _: &[Vec<u8>]) -> Reply {
    match &core.master {
        None => Reply::Array(vec![
            Reply::bulk("master"),
            Reply::Int(0),
            Reply::Array(Vec::new()),
        ]),
        Some((host, port)) => Reply::Array(vec![
            Reply::bulk("slave"),
            Reply::bulk(host.as_str()),
            Reply::Int(i64::from(*port)),
            Reply::bulk("connected"),
            Reply::Int(0),
        ]),
    }
}

/// `CONFIG GET pattern [pattern ...]`: name, value pairs (sorted by name).
pub(super) fn config_get(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    let patterns = rest(args, 2);
    let pairs = core
        .config
        .iter()
        .filter(|(name, _)| patterns.iter().any(|p| glob(p, name.as_bytes())))
        .flat_map(|(name, value)| [Reply::bulk(name.as_str()), Reply::bulk(value.as_str())])
        .collect();
    Reply::Array(pairs)
}

/// `CONFIG SET name value [name value ...]`, for the settings `CONFIG GET`
/// knows.
pub(super) fn config_set(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    if args.len() % 2 == 1 {
        return wrong_arity("config|set");
    }
    let pairs: Vec<(String, String)> = rest(args, 2)
        .chunks(2)
        .map(|pair| {
            (
                String::from_utf8_lossy(at(pair, 0)).to_ascii_lowercase(),
                String::from_utf8_lossy(at(pair, 1)).into_owned(),
            )
        })
        .collect();
    if let Some((name, _)) = pairs.iter().find(|(n, _)| !core.config.contains_key(n)) {
        return Reply::error(format!(
            "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
        ));
    }
    core.config.extend(pairs);
    Reply::ok()
}

/// Redis's glob (`*`, `?`, `[...]`, `\`), without case.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| glob(rest, &text[skip..])),
        Some((b'?', rest)) => !text.is_empty() && glob(rest, &text[1..]),
        Some((b'[', rest)) => {
            let Some(close) = rest.iter().position(|&b| b == b']') else {
                return false;
            };
            let (set, after) = (&rest[..close], &rest[close + 1..]);
            let (negate, set) = match set.split_first() {
                Some((b'^', set)) => (true, set),
                _ => (false, set),
            };
            let Some(&c) = text.first() else { return false };
            let c = c.to_ascii_lowercase();
            let mut hit = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == b'-' {
                    let (lo, hi) = (set[i].to_ascii_lowercase(), set[i + 2].to_ascii_lowercase());
                    hit |= (lo.min(hi)..=lo.max(hi)).contains(&c);
                    i += 3;
                } else {
                    hit |= set[i].to_ascii_lowercase() == c;
                    i += 1;
                }
            }
            hit != negate && glob(after, &text[1..])
        }
        Some((b'\\', rest)) if !rest.is_empty() => {
            text.first()
                .is_some_and(|c| c.eq_ignore_ascii_case(&rest[0]))
                && glob(&rest[1..], &text[1..])
        }
        Some((p, rest)) => {
            text.first().is_some_and(|c| c.eq_ignore_ascii_case(p)) && glob(rest, &text[1..])
        }
    }
}

/// `TIME`: the node clock, seconds and microseconds, as bulk strings.
pub(super) fn time(core: &mut Core, _: &[Vec<u8>]) -> Reply {
    let (secs, micros) = (core.us.div_euclid(1_000_000), core.us.rem_euclid(1_000_000));
    Reply::Array(vec![
        Reply::bulk(secs.to_string()),
        Reply::bulk(micros.to_string()),
    ])
}

/// `FLUSHALL [ASYNC|SYNC]` (and `FLUSHDB`: the node has one database).
pub(super) fn flushall(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    match args.get(1) {
        None => {}
        Some(mode) if args.len() == 2 && (is(mode, "async") || is(mode, "sync")) => {}
        Some(_) => return syntax_error(),
    }
    core.keys.replace(Default::default(), core.ms(), core.now);
    Reply::ok()
}

/// `SAVE`: records the snapshot time (the simulator decides what a
/// restart from it keeps).
pub(super) fn save(core: &mut Core, _: &[Vec<u8>]) -> Reply {
    core.process.last_save_us = core.us;
    core.process.saves += 1;
    core.last_save = Some(core.now);
    core.keys.dirty = 0;
    Reply::ok()
}

/// `DBSIZE`: live keys.
pub(super) fn dbsize(core: &mut Core, _: &[Vec<u8>]) -> Reply {
    let live = core.keys.live(core.ms()).count();
    Reply::Int(i64::try_from(live).unwrap_or(i64::MAX))
}

/// `PUBLISH channel message`: recorded for the simulator's links, which
/// deliver it; the node itself knows no subscribers (answers 0).
pub(super) fn publish(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    core.published
        .push((at(args, 1).to_vec(), at(args, 2).to_vec()));
    Reply::Int(0)
}

/// `PUBSUB CHANNELS [pattern]`: none (subscriptions live in the links).
pub(super) fn pubsub_channels(_: &mut Core, args: &[Vec<u8>]) -> Reply {
    if args.len() > 3 {
        return wrong_arity("pubsub|channels");
    }
    Reply::Array(Vec::new())
}

/// `PUBSUB NUMSUB [channel ...]`: 0 for each.
pub(super) fn pubsub_numsub(_: &mut Core, args: &[Vec<u8>]) -> Reply {
    Reply::Array(
        rest(args, 2)
            .iter()
            .flat_map(|c| [Reply::bulk(c.clone()), Reply::Int(0)])
            .collect(),
    )
}

/// `PUBSUB NUMPAT`: 0.
pub(super) fn pubsub_numpat(_: &mut Core, _: &[Vec<u8>]) -> Reply {
    Reply::Int(0)
}

/// `SUBSCRIBE` and the like: taken (the table has checked its arity and
/// the ACL); the subscriber connection, which the simulator's world
/// models, keeps the channels and gets the messages.
pub(super) fn subscribe(_: &mut Core, _: &[Vec<u8>]) -> Reply {
    Reply::ok()
}

/// `AUTH [user] password` against `requirepass` (the default user only;
/// without `requirepass` it takes any password, as Redis's `nopass` does).
pub(super) fn auth(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    let required = core.config.get("requirepass").cloned().unwrap_or_default();
    let wrong = || Reply::error("WRONGPASS invalid username-password pair or user is disabled.");
    match args.len() {
        2 if required.is_empty() => Reply::error(
            "ERR AUTH <password> called without any password configured for the default \
             user. Are you sure your configuration is correct?",
        ),
        2 => {
            if at(args, 1) == required.as_bytes() {
                Reply::ok()
            } else {
                wrong()
            }
        }
        3 => {
            let default = at(args, 1) == b"default";
            if default && (required.is_empty() || at(args, 2) == required.as_bytes()) {
                Reply::ok()
            } else {
                wrong()
            }
        }
        _ => syntax_error(),
    }
}

/// `SELECT index`: database 0 only.
pub(super) fn select(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    let Some(index) = parse_i64(at(args, 1)) else {
        return not_integer();
    };
    let databases = core
        .config
        .get("databases")
        .and_then(|d| d.parse::<i64>().ok())
        .unwrap_or(16);
    match index {
        0 => Reply::ok(),
        i if i < 0 || i >= databases => Reply::error("ERR DB index is out of range"),
        _ => Reply::error("ERR the simulated node keeps database 0 only"),
    }
}

/// `HELLO [2 [AUTH user pass] [SETNAME name]]`: RESP2 only.
pub(super) fn hello(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    if let Some(version) = args.get(1) {
        match parse_i64(version) {
            None => {
                return Reply::error("ERR Protocol version is not an integer or out of range");
            }
            Some(2) => {}
            Some(_) => return Reply::error("NOPROTO unsupported protocol version"),
        }
    }
    let role = if core.master.is_some() {
        "replica"
    } else {
        "master"
    };
    Reply::Array(vec![
        Reply::bulk("server"),
        Reply::bulk("redis"),
        Reply::bulk("version"),
        Reply::bulk(info::VERSION),
        Reply::bulk("proto"),
        Reply::Int(2),
        Reply::bulk("id"),
        Reply::Int(1),
        Reply::bulk("mode"),
        Reply::bulk("standalone"),
        Reply::bulk("role"),
        Reply::bulk(role),
        Reply::bulk("modules"),
        Reply::Array(Vec::new()),
    ])
}

/// `CLIENT GETNAME`: names live on connections, which the link models.
pub(super) fn client_getname(_: &mut Core, _: &[Vec<u8>]) -> Reply {
    Reply::Nil
}

/// `CLIENT SETNAME name`: checked as Redis checks it.
pub(super) fn client_setname(_: &mut Core, args: &[Vec<u8>]) -> Reply {
    if at(args, 2).iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Reply::error(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        );
    }
    Reply::ok()
}

/// `SCRIPT EXISTS sha [sha ...]`: 1 for each hash in the script cache.
pub(super) fn script_exists(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    Reply::Array(
        rest(args, 2)
            .iter()
            .map(|sha| {
                let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                Reply::Int(i64::from(core.scripts.contains(&sha)))
            })
            .collect(),
    )
}

/// `SCRIPT FLUSH [ASYNC|SYNC]`: empties the script cache.
pub(super) fn script_flush(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    let mode_ok = match args.len() {
        2 => true,
        3 => is(at(args, 2), "sync") || is(at(args, 2), "async"),
        _ => false,
    };
    if !mode_ok {
        return Reply::error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
    }
    core.scripts.clear();
    Reply::ok()
}

/// `SCRIPT KILL`: no script ever runs between commands.
pub(super) fn script_kill(_: &mut Core, _: &[Vec<u8>]) -> Reply {
    Reply::error("NOTBUSY No scripts in execution right now.")
}
