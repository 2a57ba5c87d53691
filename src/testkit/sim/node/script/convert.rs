//! Redis's conversions between replies and Lua values.
//!
//! Lua to reply (what a script returns): number → integer (truncated),
//! string → bulk, true → 1, false and nil → nil, a table with a string
//! `err` → error, with a string `ok` → status, with a number `double` →
//! its `%.17g` text, else an array up to its first nil. The other way
//! (what `redis.call` returns) is `call`'s.

use mlua::{Lua, MultiValue, Table, Value};

use super::super::number::{format_g17, lua_to_i64};
use super::super::reply::Reply;

/// How deep a returned table may nest before the reply gives up.
const MAX_DEPTH: usize = 200;

/// `{err = text}`.
pub(super) fn error_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set("err", lua.create_string(text)?)?;
    Ok(t)
}

/// The arguments of `redis.call` as a command: strings as they are,
/// numbers as `%.17g`; anything else is Redis's error.
pub(super) fn command_args(values: MultiValue) -> Result<Vec<Vec<u8>>, &'static str> {
    if values.is_empty() {
        return Err("ERR Please specify at least one argument for this redis lib call");
    }
    values
        .into_iter()
        .map(|value| match value {
            Value::String(s) => Ok(s.as_bytes().to_vec()),
            Value::Integer(i) => Ok(format_g17(i as f64).into_bytes()),
            Value::Number(n) => Ok(format_g17(n).into_bytes()),
            _ => Err("ERR Lua redis lib command arguments must be strings or integers"),
        })
        .collect()
}

/// A script's return value as the reply.
pub(super) fn lua_to_reply(value: &Value) -> Reply {
    to_reply(value, 0)
}

fn to_reply(value: &Value, depth: usize) -> Reply {
    match value {
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Integer(i) => Reply::Int(*i),
        Value::Number(n) => Reply::Int(lua_to_i64(*n)),
        Value::Boolean(true) => Reply::Int(1),
        Value::Table(_) if depth >= MAX_DEPTH => Reply::error("ERR reached lua stack limit"),
        Value::Table(t) => table_to_reply(t, depth),
        _ => Reply::Nil,
    }
}

fn table_to_reply(t: &Table, depth: usize) -> Reply {
    if let Ok(Value::String(err)) = t.raw_get::<Value>("err") {
        return Reply::Error(err.to_string_lossy());
    }
    if let Ok(Value::String(ok)) = t.raw_get::<Value>("ok") {
        return Reply::Status(ok.to_string_lossy());
    }
    match t.raw_get::<Value>("double") {
        Ok(Value::Number(n)) => return Reply::Bulk(format_g17(n).into_bytes()),
        Ok(Value::Integer(i)) => return Reply::Bulk(format_g17(i as f64).into_bytes()),
        _ => {}
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(item) => items.push(to_reply(&item, depth + 1)),
        }
    }
    Reply::Array(items)
}

/// The reply for a script that raised `error` (a table from the error
/// handler): its `err`, then Redis 7's ` script: <sha>, on <source>:<line>.`
pub(super) fn raised_to_reply(error: &Value, sha: &str) -> Reply {
    let Value::Table(t) = error else {
        return Reply::error("ERR unknown error");
    };
    let text = |name: &str| match t.raw_get::<Value>(name) {
        Ok(Value::String(s)) => Some(s.to_string_lossy()),
        Ok(Value::Integer(i)) => Some(i.to_string()),
        Ok(Value::Number(n)) => Some(format_g14(n)),
        _ => None,
    };
    let message = text("err").unwrap_or_else(|| "ERR unknown error".to_owned());
    match (text("source"), text("line")) {
        (Some(source), Some(line)) => {
            Reply::Error(format!("{message} script: {sha}, on {source}:{line}."))
        }
        _ => Reply::Error(message),
    }
}

/// A number as Lua's `tostring` writes it (`%.14g`), for the integral
/// values an error table carries.
fn format_g14(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e14 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}
