//! [`Request`]: one round's command, built once and sent to every node of
//! the round ([`Node::send`](super::Node::send) sends it).

use redis::{Cmd, Value};
use tokio::time::Instant;

use super::reentrant::REENTRANT_RELEASE;
use super::script::Lua;
use super::scripts::RELEASE;

/// Which replies count as a grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Grant {
    /// Any reply but nil (`SET NX` answers `OK` or nil).
    NotNil,
    /// The integer reply equals this number.
    Int(i64),
}

impl Grant {
    /// Whether `reply` grants.
    pub(super) fn granted(self, reply: &Value) -> bool {
        match self {
            Grant::NotNil => !matches!(reply, Value::Nil),
            Grant::Int(n) => matches!(reply, Value::Int(i) if *i == n),
        }
    }
}

/// A script whose calls may share one call with other locks' calls: its
/// batched twin (`node::batch`).
pub(crate) struct Batchable {
    /// The batched twin.
    pub(super) script: &'static std::sync::LazyLock<Lua>,
    /// Whether the script is the restart guard's: the record's key and the
    /// quarantine end its KEYS and ARGV, once for the whole batch.
    pub(super) guarded: bool,
}

/// One command or script invocation, the same for every node of a round.
pub(crate) struct Request {
    pub(super) cmd: Cmd,
    pub(super) script: Option<&'static Lua>,
    pub(super) grant: Grant,
    /// For a vote or an extension: the instant after which it is not sent
    /// again after `NOSCRIPT` ([`Request::resent_by`]).
    pub(super) resend_by: Option<Instant>,
    /// For an extension: the batched script that may carry it with other
    /// locks' extensions ([`Request::batchable`]).
    pub(super) batch: Option<&'static Batchable>,
}

impl Request {
    /// A plain command; `grant` says which replies grant.
    pub(crate) fn command(cmd: Cmd, grant: Grant) -> Self {
        Request {
            cmd,
            script: None,
            grant,
            resend_by: None,
            batch: None,
        }
    }

    /// `script` with `keys` and `args`; `grant` says which replies grant.
    pub(crate) fn script(
        script: &'static Lua,
        keys: &[String],
        args: &[&str],
        grant: Grant,
    ) -> Self {
        Request::script_parts(script, keys.iter(), args, grant)
    }

    /// [`script`](Self::script) with the keys from an iterator.
    pub(crate) fn script_parts<'a>(
        script: &'static Lua,
        keys: impl Iterator<Item = &'a String> + Clone,
        args: &[&'a str],
        grant: Grant,
    ) -> Self {
        let key_count = keys.clone().count();
        let strings = keys.map(String::as_str).chain(args.iter().copied());
        // EVALSHA, the hash and the key count (at most 20 digits) first.
        let (count, size) = sized(strings.clone());
        let hash = script.get_hash();
        let mut cmd = Cmd::with_capacity(count + 3, size + "EVALSHA".len() + hash.len() + 20);
        cmd.arg("EVALSHA").arg(hash).arg(key_count);
        for string in strings {
            cmd.arg(string);
        }
        Request {
            cmd,
            script: Some(script),
            grant,
            resend_by: None,
            batch: None,
        }
    }

    /// This request, not sent again after `NOSCRIPT` once `by` has passed.
    /// For the calls of a round whose calls still in flight at its
    /// deadline are dropped (votes, extensions, fence write-backs): the
    /// next round's call to a node goes out once this round's call there
    /// is over, at the latest at this round's deadline, so a re-send
    /// written after `by` (the middle of the round) could reach the node
    /// after it over another connection of the same client (a `Redlock`
    /// used from several runtimes has one per runtime), and a stale `SET`
    /// or `PEXPIRE` would land after the newer call.
    pub(crate) fn resent_by(self, by: Instant) -> Self {
        Request {
            resend_by: Some(by),
            ..self
        }
    }

    /// True for a compare-and-delete (a release or a clean-up).
    pub(super) fn deletes(&self) -> bool {
        self.script.is_some_and(|script| {
            [&*RELEASE, &*REENTRANT_RELEASE]
                .iter()
                .any(|delete| delete.get_hash() == script.get_hash())
        })
    }

    /// The keys of a script invocation (after `EVALSHA sha numkeys`).
    pub(super) fn keys(&self) -> Vec<String> {
        let mut args = self.cmd.args_iter().skip(2).filter_map(|arg| match arg {
            redis::Arg::Simple(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
            _ => None,
        });
        let count: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        args.take(count).collect()
    }
}

/// `name` and `args`, in a command that allocates its buffers once.
pub(crate) fn command<'a>(name: &str, args: impl Iterator<Item = &'a str> + Clone) -> Cmd {
    let (count, size) = sized(args.clone());
    let mut cmd = Cmd::with_capacity(count + 1, size + name.len());
    cmd.arg(name);
    for arg in args {
        cmd.arg(arg);
    }
    cmd
}

/// How many strings and how many bytes in all.
fn sized<'a>(strings: impl Iterator<Item = &'a str>) -> (usize, usize) {
    strings.fold((0, 0), |(count, size), s| (count + 1, size + s.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_request_knows_its_keys() {
        let keys = ["a".to_owned(), "b".to_owned()];
        let request = Request::script(&RELEASE, &keys, &["v", "c"], Grant::Int(2));
        assert_eq!(request.keys(), keys);
    }

    #[test]
    fn grants_read_the_reply_they_were_built_for() {
        assert!(Grant::NotNil.granted(&Value::Okay));
        assert!(!Grant::NotNil.granted(&Value::Nil));
        assert!(Grant::Int(2).granted(&Value::Int(2)));
        assert!(!Grant::Int(2).granted(&Value::Int(1)));
        assert!(!Grant::Int(1).granted(&Value::Nil));
    }
}
