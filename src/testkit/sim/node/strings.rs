//! String and key commands: `SET`, `GET`, `DEL`, `EXISTS`, `PTTL`,
//! `TTL`, `PEXPIRE`, `MGET`, `TYPE`, `APPEND`, as Redis 7.0 runs them.

use super::core::{Core, at, is};
use super::keyspace::{Data, Entry};
use super::number::parse_i64;
use super::reply::{Reply, invalid_expire, not_integer, syntax_error, wrong_type};

/// The expiry option of a `SET`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expiry {
    Ex,
    Px,
    ExAt,
    PxAt,
}

/// `GET key`.
pub(super) fn get(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    match core.keys.get(at(args, 1), core.ms()).map(|e| &e.data) {
        None => Reply::Nil,
        Some(Data::Str(value)) => Reply::bulk(value.clone()),
        Some(_) => wrong_type(),
    }
}

/// `MGET key [key ...]`: each key's string value, nil for a key that is
/// missing or holds another type.
pub(super) fn mget(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    let now = core.ms();
    Reply::Array(
        (args.iter().skip(1))
            .map(|key| match core.keys.get(key, now).map(|e| &e.data) {
                Some(Data::Str(value)) => Reply::bulk(value.clone()),
                _ => Reply::Nil,
            })
            .collect(),
    )
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`.
pub(super) fn set(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    let (mut nx, mut xx, mut get, mut keep_ttl) = (false, false, false, false);
    let mut expiry: Option<(Expiry, &[u8])> = None;
    let mut j = 3;
    while j < args.len() {
        let opt = at(args, j);
        let next = args.get(j + 1).map(Vec::as_slice);
        let kind = expiry.map(|(k, _)| k);
        let other_expiry = |mine: Expiry| kind.is_some_and(|k| k != mine);
        if is(opt, "nx") && !xx {
            nx = true;
        } else if is(opt, "xx") && !nx {
            xx = true;
        } else if is(opt, "get") {
            get = true;
        } else if is(opt, "keepttl") && kind.is_none() {
            keep_ttl = true;
        } else if let Some(unit) = expiry_option(opt).filter(|u| !keep_ttl && !other_expiry(*u)) {
            let Some(value) = next else {
                return syntax_error();
            };
            expiry = Some((unit, value));
            j += 1;
        } else {
            return syntax_error();
        }
        j += 1;
    }
    let now_ms = core.ms();
    let expire_at = match expiry {
        None => None,
        Some((unit, text)) => match expire_time(unit, text, now_ms) {
            Ok(at) => Some(at),
            Err(reply) => return reply,
        },
    };
    let key = at(args, 1);
    let current = core.keys.get(key, now_ms);
    let old = match current.map(|e| &e.data) {
        None => Reply::Nil,
        Some(Data::Str(value)) => Reply::bulk(value.clone()),
        Some(_) if get => return wrong_type(),
        Some(_) => Reply::Nil,
    };
    let found = current.is_some();
    if (nx && found) || (xx && !found) {
        // With GET, the old value is the answer either way.
        return if get { old } else { Reply::Nil };
    }
    let kept = if keep_ttl {
        current.and_then(|e| e.expire_at)
    } else {
        None
    };
    let entry = Entry {
        data: Data::Str(at(args, 2).to_vec()),
        expire_at: expire_at.or(kept),
    };
    core.keys.put(key, entry, core.now);
    if get { old } else { Reply::ok() }
}

fn expiry_option(opt: &[u8]) -> Option<Expiry> {
    [
        ("ex", Expiry::Ex),
        ("px", Expiry::Px),
        ("exat", Expiry::ExAt),
        ("pxat", Expiry::PxAt),
    ]
    .into_iter()
    .find(|(name, _)| is(opt, name))
    .map(|(_, unit)| unit)
}

/// The absolute expiry (node ms) of a `SET` option, or Redis's error.
fn expire_time(unit: Expiry, text: &[u8], now_ms: i64) -> Result<i64, Reply> {
    let Some(mut ms) = parse_i64(text) else {
        return Err(not_integer());
    };
    let seconds = matches!(unit, Expiry::Ex | Expiry::ExAt);
    if ms <= 0 || (seconds && ms > i64::MAX / 1000) {
        return Err(invalid_expire("set"));
    }
    if seconds {
        ms *= 1000;
    }
    if matches!(unit, Expiry::Ex | Expiry::Px) {
        ms = ms.wrapping_add(now_ms);
    }
    if ms <= 0 {
        return Err(invalid_expire("set"));
    }
    Ok(ms)
}

/// `DEL key [key ...]`: how many live keys it removed.
pub(super) fn del(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    let (now_ms, now) = (core.ms(), core.now);
    let removed = args
        .iter()
        .skip(1)
        .filter(|key| core.keys.delete(key, now_ms, now))
        .count();
    Reply::Int(i64::try_from(removed).unwrap_or(i64::MAX))
}

/// `EXISTS key [key ...]`: each live key counts once per mention.
pub(super) fn exists(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    let now_ms = core.ms();
    let found = args
        .iter()
        .skip(1)
        .filter(|key| core.keys.get(key, now_ms).is_some())
        .count();
    Reply::Int(i64::try_from(found).unwrap_or(i64::MAX))
}

/// `PTTL key`: ms left, -1 without expiry, -2 missing.
pub(super) fn pttl(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    Reply::Int(ttl_ms(core, at(args, 1)))
}

/// `TTL key`: as `PTTL`, in seconds, rounded.
pub(super) fn ttl(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    Reply::Int(match ttl_ms(core, at(args, 1)) {
        ms if ms < 0 => ms,
        ms => (ms + 500) / 1000,
    })
}

pub(super) fn ttl_ms(core: &Core, key: &[u8]) -> i64 {
    let now_ms = core.ms();
    match core.keys.get(key, now_ms) {
        None => -2,
        Some(Entry {
            expire_at: None, ..
        }) => -1,
        Some(Entry {
            expire_at: Some(at),
            ..
        }) => at.saturating_sub(now_ms).max(0),
    }
}

/// `PEXPIRE key ms [NX|XX|GT|LT]`.
pub(super) fn pexpire(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in args.iter().skip(3) {
        if is(opt, "nx") {
            nx = true;
        } else if is(opt, "xx") {
            xx = true;
        } else if is(opt, "gt") {
            gt = true;
        } else if is(opt, "lt") {
            lt = true;
        } else {
            return Reply::error(format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(opt)
            ));
        }
    }
    if nx && (xx || gt || lt) {
        return Reply::error("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return Reply::error("ERR GT and LT options at the same time are not compatible");
    }
    let Some(ms) = parse_i64(at(args, 2)) else {
        return not_integer();
    };
    let now_ms = core.ms();
    let Some(when) = ms.checked_add(now_ms) else {
        return invalid_expire("pexpire");
    };
    let key = at(args, 1);
    let Some(entry) = core.keys.get(key, now_ms) else {
        return Reply::Int(0);
    };
    let current = entry.expire_at;
    let refused = (nx && current.is_some())
        || (xx && current.is_none())
        || (gt && current.is_none_or(|c| when <= c))
        || (lt && current.is_some_and(|c| when >= c));
    if refused {
        return Reply::Int(0);
    }
    if when <= now_ms {
        core.keys.delete(key, now_ms, core.now);
    } else {
        let entry = Entry {
            data: entry.data.clone(),
            expire_at: Some(when),
        };
        core.keys.put(key, entry, core.now);
    }
    Reply::Int(1)
}

/// `TYPE key`.
pub(super) fn type_of(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    let name = core
        .keys
        .get(at(args, 1), core.ms())
        .map_or("none", |e| e.data.type_name());
    Reply::Status(name.to_owned())
}

/// `APPEND key value`: the new length.
pub(super) fn append(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    let key = at(args, 1);
    let entry = match core.keys.get(key, core.ms()) {
        None => Entry::new(Data::Str(at(args, 2).to_vec())),
        Some(Entry {
            data: Data::Str(value),
            expire_at,
        }) => {
            let mut value = value.clone();
            value.extend_from_slice(at(args, 2));
            Entry {
                data: Data::Str(value),
                expire_at: *expire_at,
            }
        }
        Some(_) => return wrong_type(),
    };
    let len = match &entry.data {
        Data::Str(value) => value.len(),
        Data::Hash(_) => 0,
    };
    core.keys.put(key, entry, core.now);
    Reply::Int(i64::try_from(len).unwrap_or(i64::MAX))
}
