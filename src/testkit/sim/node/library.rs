//! The library's own Lua scripts, by name, with their exact text: what
//! the simulated nodes run, and what the differential test sends to a
//! real server and a simulated one alike.

use redis::{Cmd, ConnectionLike, RedisResult, Value};

use crate::node::acl::DIAGNOSE;
use crate::node::registry::SCRIPTS;
use crate::node::script::Lua;

/// Every script the library sends, with its name
/// ([`registry`](crate::node::registry)).
fn all() -> impl Iterator<Item = (&'static str, &'static Lua)> {
    SCRIPTS.iter().map(|s| (s.name, &**s.script))
}

/// The library's Lua scripts: each one's name and exact text, as it sends
/// them with `SCRIPT LOAD` (`diagnose` is the ACL check run after a
/// refusal). For the differential test, which cannot reach the
/// crate-private scripts.
#[doc(hidden)]
pub fn scripts() -> Vec<(&'static str, String)> {
    let mut texts: Vec<(&'static str, String)> = all()
        .filter_map(|(name, lua)| text_of(lua).map(|text| (name, text)))
        .collect();
    if let Some(text) = text_of(&DIAGNOSE) {
        texts.push(("diagnose", text));
    }
    texts
}

/// The text of `script`: what its `SCRIPT LOAD` carries.
pub(super) fn text_of(script: &redis::Script) -> Option<String> {
    let mut capture = Capture(None);
    script.load(&mut capture).ok()?;
    capture.0
}

/// A connection that only records the script of a `SCRIPT LOAD` and
/// answers its hash.
struct Capture(Option<String>);

impl ConnectionLike for Capture {
    fn req_packed_command(&mut self, _: &[u8]) -> RedisResult<Value> {
        Err(refused())
    }

    fn req_packed_commands(&mut self, _: &[u8], _: usize, _: usize) -> RedisResult<Vec<Value>> {
        Err(refused())
    }

    fn req_command(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        let args: Vec<&[u8]> = cmd
            .args_iter()
            .filter_map(|arg| match arg {
                redis::Arg::Simple(bytes) => Some(bytes),
                _ => None,
            })
            .collect();
        match args.as_slice() {
            [script, load, body]
                if script.eq_ignore_ascii_case(b"SCRIPT") && load.eq_ignore_ascii_case(b"LOAD") =>
            {
                self.0 = Some(String::from_utf8_lossy(body).into_owned());
                Ok(Value::BulkString(
                    super::script::sha1_hex(body).into_bytes(),
                ))
            }
            _ => Err(refused()),
        }
    }

    fn get_db(&self) -> i64 {
        0
    }

    fn check_connection(&mut self) -> bool {
        true
    }

    fn is_open(&self) -> bool {
        true
    }
}

fn refused() -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Client, "only SCRIPT LOAD is captured"))
}
