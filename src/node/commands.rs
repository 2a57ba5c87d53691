//! Every lock command, as a [`Request`] built once per round: acquisition
//! (of each [`Kind`]), release, extension, re-seeding and the fenced
//! write-back. Each runs one command or script (see
//! [`scripts`](super::scripts)); the [`Grant`] it carries says which reply
//! is a vote for it.

use super::batch::{EXTEND_OR_MISSING_TWINS, EXTEND_TWINS};
use super::kind::Kind;
use super::request::{Grant, Request, command};
use super::restart_guard::{GUARDED_EXTEND_OR_MISSING, GUARDED_FENCE_WRITE_BACK, RestartGuard};
use super::scripts::{EXTEND_OR_MISSING, FENCE_WRITE_BACK, RESEED};
use super::{NodeError, NodeResult};

/// What the compare-and-pexpire found on one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// Every key held our value and got the new TTL.
    Extended,
    /// Some key holds another owner's value.
    Foreign,
    /// No key is foreign, but some are missing (a restarted node).
    Missing,
}

impl Found {
    /// Reads the reply of [`Request::extend_or_missing`].
    pub(crate) fn from_reply(found: i64) -> Self {
        match found {
            1 => Found::Extended,
            -1 => Found::Missing,
            _ => Found::Foreign,
        }
    }

    /// Whether the node's keys got the new TTL: the extension's grant.
    pub(crate) fn is_extended(&self) -> bool {
        *self == Found::Extended
    }
}

impl Request {
    /// Takes the lock of `kind` for `value` (and the kind's `owner`, if it
    /// has one): its acquire script, or behind the restart `guard` its
    /// guarded one; a plain lock on one key without the guard is a plain
    /// `SET key value NX PX ttl`. Granted when the lock is now ours on the
    /// node (a fenced acquisition answers the counters: read them with
    /// [`counters_known`]).
    pub(crate) fn acquire(
        kind: Kind,
        keys: &[String],
        (owner, value): (Option<&str>, &str),
        ttl_ms: &str,
        guard: Option<&RestartGuard>,
    ) -> Self {
        if kind == Kind::Plain
            && guard.is_none()
            && let [key] = keys
        {
            let args = [key.as_str(), value, "NX", "PX", ttl_ms];
            return Request::command(command("SET", args.into_iter()), Grant::NotNil);
        }
        let (scripts, grant) = (kind.scripts().acquire(), kind.scripts().grant);
        match owner {
            Some(owner) => {
                Request::vote_script(scripts, guard, keys, &[owner, value, ttl_ms], grant)
            }
            None => Request::vote_script(scripts, guard, keys, &[value, ttl_ms], grant),
        }
    }

    /// Compare-and-delete that announces the release if someone waits (a
    /// waiter marked our value). Granted when every key held our value and
    /// is gone (for a reentrant hold id: held the hold, which is gone; holds
    /// announce nothing).
    pub(crate) fn release(keys: &[String], value: &str) -> Self {
        #[cfg(feature = "sim")]
        if crate::controls::on(crate::testkit::sim::Control::ReleaseWithoutCompare) {
            let all = Grant::Int(i64::try_from(keys.len()).unwrap_or(i64::MAX));
            return Request::command(command("DEL", keys.iter().map(String::as_str)), all);
        }
        Request::delete(keys, value, None)
    }

    /// The clean-up of a failed attempt: compare-and-delete that announces
    /// nothing; with `mark`, the locks it lost are marked as awaited, so
    /// that their holders' releases announce themselves. Granted as
    /// [`release`](Self::release).
    pub(crate) fn cleanup(keys: &[String], value: &str, mark: bool) -> Self {
        Request::delete(keys, value, Some(if mark { "1" } else { "0" }))
    }

    /// [`release`](Self::release), or with `cleanup` (`RELEASE`'s ARGV[2])
    /// a clean-up. Reentrant holds take no such argument.
    fn delete(keys: &[String], value: &str, cleanup: Option<&str>) -> Self {
        let all = Grant::Int(i64::try_from(keys.len()).unwrap_or(i64::MAX));
        let scripts = Kind::of_value(value).scripts();
        let release = scripts.release.script;
        match cleanup.filter(|_| scripts.announces) {
            Some(cleanup) => Request::script(release, keys, &[value, cleanup], all),
            None => Request::script(release, keys, &[value], all),
        }
    }

    /// Compare-and-pexpire. Granted when every key held our value and got
    /// the new TTL (for a reentrant hold id: at least the new TTL). With
    /// the restart `guard` on, it announces the quarantine first.
    pub(crate) fn extend(
        keys: &[String],
        value: &str,
        ttl_ms: &str,
        guard: Option<&RestartGuard>,
    ) -> Self {
        let kind = Kind::of_value(value);
        let scripts = kind.scripts().extend();
        #[cfg(feature = "sim")]
        if crate::controls::on(crate::testkit::sim::Control::RacingExtensions)
            && !matches!(kind, Kind::Reentrant)
        {
            let shortening = (
                &*crate::testkit::sim::shortening::EXTEND,
                &*crate::testkit::sim::shortening::GUARDED_EXTEND,
            );
            return Request::vote_script(shortening, guard, keys, &[value, ttl_ms], Grant::Int(1));
        }
        let request = Request::vote_script(scripts, guard, keys, &[value, ttl_ms], Grant::Int(1));
        match kind {
            // A hash of holds is extended on its own.
            Kind::Reentrant => request,
            Kind::Plain | Kind::Fenced => request.batchable(&EXTEND_TWINS, guard.is_some()),
        }
    }

    /// Compare-and-pexpire that tells a missing key from a foreign one
    /// (read the reply with [`Found::from_reply`]); with the restart
    /// `guard` on, it announces the quarantine first.
    pub(crate) fn extend_or_missing(
        keys: &[String],
        value: &str,
        ttl_ms: &str,
        guard: Option<&RestartGuard>,
    ) -> Self {
        let scripts = (&*EXTEND_OR_MISSING, &*GUARDED_EXTEND_OR_MISSING);
        Request::vote_script(scripts, guard, keys, &[value, ttl_ms], Grant::Int(1))
            .batchable(&EXTEND_OR_MISSING_TWINS, guard.is_some())
    }

    /// Sets the missing keys to our value (`SET NX PX`). Granted when done;
    /// refused when another owner holds one of them (nothing written then).
    pub(crate) fn reseed(keys: &[String], value: &str, ttl_ms: &str) -> Self {
        Request::script(&RESEED, keys, &[value, ttl_ms], Grant::Int(1))
    }

    /// Fencing phase 2: granted when the counters were raised under our
    /// lock. With the restart `guard` on, it also records that the counters
    /// were written in the node's current trust period.
    pub(crate) fn fence_write_back(
        keys: &[String],
        value: &str,
        tokens: &[String],
        guard: Option<&RestartGuard>,
    ) -> Self {
        let mut args: Vec<&str> = Vec::with_capacity(tokens.len() + 1);
        args.push(value);
        args.extend(tokens.iter().map(String::as_str));
        match guard {
            Some(guard) => {
                let keys = keys.iter().chain(std::iter::once(&guard.key));
                Request::script_parts(&GUARDED_FENCE_WRITE_BACK, keys, &args, Grant::Int(1))
            }
            None => Request::script(&FENCE_WRITE_BACK, keys, &args, Grant::Int(1)),
        }
    }
}

/// The counters of a fenced acquisition, when the node vouches for them.
///
/// With the restart guard on, a node whose counters are not known intact
/// (its trust period began after they were last written back) is no vote
/// in the fenced read: its answer is [`NodeError::CountersUnknown`] (its
/// lock keys are set all the same, and get the write-back).
pub(crate) fn counters_known(counters: Option<Vec<String>>) -> NodeResult<Option<Vec<String>>> {
    if counters.iter().flatten().any(|c| c.starts_with('?')) {
        return Err(NodeError::CountersUnknown);
    }
    Ok(counters)
}
