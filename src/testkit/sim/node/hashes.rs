//! Hash commands: `HSET`, `HGET`, `HMGET`, `HDEL`, `HEXISTS`, `HGETALL`,
//! `HINCRBY`, `HSETNX`, `HLEN`, as Redis 7.0 runs them on a small hash
//! (fields kept in insertion order).

use super::core::{Core, at, rest, wrong_arity};
use super::keyspace::{Data, Entry};
use super::number::parse_i64;
use super::reply::{Reply, not_integer, wrong_type};

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// The fields of the hash at `key`: `Ok(None)` when missing, `Err` with
/// `WRONGTYPE` for a string.
fn read<'a>(core: &'a Core, key: &[u8]) -> Result<Option<&'a Fields>, Reply> {
    match core.keys.get(key, core.ms()).map(|e| &e.data) {
        None => Ok(None),
        Some(Data::Hash(fields)) => Ok(Some(fields)),
        Some(_) => Err(wrong_type()),
    }
}

/// The hash at `key` to change (a copy, empty when missing) and its
/// expiry, or `WRONGTYPE`.
fn for_write(core: &Core, key: &[u8]) -> Result<(Fields, Option<i64>), Reply> {
    match core.keys.get(key, core.ms()) {
        None => Ok((Vec::new(), None)),
        Some(Entry {
            data: Data::Hash(fields),
            expire_at,
        }) => Ok((fields.clone(), *expire_at)),
        Some(_) => Err(wrong_type()),
    }
}

/// Stores `fields` at `key` (deleting the key when no field is left).
fn write(core: &mut Core, key: &[u8], fields: Fields, expire_at: Option<i64>) {
    if fields.is_empty() {
        core.keys.delete(key, core.ms(), core.now);
    } else {
        let entry = Entry {
            data: Data::Hash(fields),
            expire_at,
        };
        core.keys.put(key, entry, core.now);
    }
}

fn find<'a>(fields: &'a Fields, field: &[u8]) -> Option<&'a [u8]> {
    fields
        .iter()
        .find(|(f, _)| f == field)
        .map(|(_, v)| v.as_slice())
}

/// Sets `field` to `value`; true when the field is new.
fn upsert(fields: &mut Fields, field: &[u8], value: &[u8]) -> bool {
    match fields.iter_mut().find(|(f, _)| f == field) {
        Some((_, v)) => {
            *v = value.to_vec();
            false
        }
        None => {
            fields.push((field.to_vec(), value.to_vec()));
            true
        }
    }
}

fn count(n: usize) -> Reply {
    Reply::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// `HSET key field value [field value ...]`: how many fields are new.
pub(super) fn hset(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    if args.len() % 2 == 1 {
        return wrong_arity("hset");
    }
    let key = at(args, 1);
    let (mut fields, expire_at) = match for_write(core, key) {
        Ok(found) => found,
        Err(reply) => return reply,
    };
    let added = rest(args, 2)
        .chunks(2)
        .filter(|pair| upsert(&mut fields, at(pair, 0), at(pair, 1)))
        .count();
    write(core, key, fields, expire_at);
    count(added)
}

/// `HSETNX key field value`: 1 when set, 0 when the field exists.
pub(super) fn hsetnx(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    let key = at(args, 1);
    let (mut fields, expire_at) = match for_write(core, key) {
        Ok(found) => found,
        Err(reply) => return reply,
    };
    if find(&fields, at(args, 2)).is_some() {
        return Reply::Int(0);
    }
    upsert(&mut fields, at(args, 2), at(args, 3));
    write(core, key, fields, expire_at);
    Reply::Int(1)
}

/// `HGET key field`.
pub(super) fn hget(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    match read(core, at(args, 1)) {
        Ok(fields) => fields
            .and_then(|f| find(f, at(args, 2)))
            .map_or(Reply::Nil, Reply::bulk),
        Err(reply) => reply,
    }
}

/// `HMGET key field [field ...]`.
pub(super) fn hmget(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    match read(core, at(args, 1)) {
        Ok(fields) => Reply::Array(
            rest(args, 2)
                .iter()
                .map(|field| {
                    fields
                        .and_then(|f| find(f, field))
                        .map_or(Reply::Nil, Reply::bulk)
                })
                .collect(),
        ),
        Err(reply) => reply,
    }
}

/// `HEXISTS key field`.
pub(super) fn hexists(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    match read(core, at(args, 1)) {
        Ok(fields) => Reply::Int(i64::from(
            fields.and_then(|f| find(f, at(args, 2))).is_some(),
        )),
        Err(reply) => reply,
    }
}

/// `HGETALL key`: field, value, ... in insertion order.
pub(super) fn hgetall(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    match read(core, at(args, 1)) {
        Ok(fields) => Reply::Array(
            fields
                .into_iter()
                .flatten()
                .flat_map(|(f, v)| [Reply::bulk(f.clone()), Reply::bulk(v.clone())])
                .collect(),
        ),
        Err(reply) => reply,
    }
}

/// `HLEN key`.
pub(super) fn hlen(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    match read(core, at(args, 1)) {
        Ok(fields) => count(fields.map_or(0, Vec::len)),
        Err(reply) => reply,
    }
}

/// `HDEL key field [field ...]`: how many fields it removed.
pub(super) fn hdel(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    let key = at(args, 1);
    let (mut fields, expire_at) = match for_write(core, key) {
        Ok(found) => found,
        Err(reply) => return reply,
    };
    if fields.is_empty() {
        return Reply::Int(0);
    }
    let before = fields.len();
    for field in rest(args, 2) {
        fields.retain(|(f, _)| f != field);
    }
    let removed = before - fields.len();
    if removed > 0 {
        write(core, key, fields, expire_at);
    }
    count(removed)
}

/// `HINCRBY key field increment`: the new value.
pub(super) fn hincrby(core: &mut Core, args: &[Vec<u8>]) -> Reply {
    let Some(incr) = parse_i64(at(args, 3)) else {
        return not_integer();
    };
    let key = at(args, 1);
    let (mut fields, expire_at) = match for_write(core, key) {
        Ok(found) => found,
        Err(reply) => return reply,
    };
    let old = match find(&fields, at(args, 2)) {
        None => 0,
        Some(text) => match parse_i64(text) {
            Some(n) => n,
            None => return Reply::error("ERR hash value is not an integer"),
        },
    };
    let Some(new) = old.checked_add(incr) else {
        return Reply::error("ERR increment or decrement would overflow");
    };
    upsert(&mut fields, at(args, 2), new.to_string().as_bytes());
    write(core, key, fields, expire_at);
    Reply::Int(new)
}
