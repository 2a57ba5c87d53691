//! Every Lua script the library sends, in one list ([`SCRIPTS`]): its
//! name and, for a script that sets or extends a TTL, which `ARGV` (from
//! 0) carries that TTL in milliseconds. The Lua-portability check, the
//! fault proxy (which rewrites those TTLs to speed a node's clock) and the
//! simulation's script library read it, so a new script cannot be missed
//! by one of them. `DIAGNOSE`, the ACL check run
//! after a refusal, is no [`Lua`] and is listed by each user beside these.

use std::sync::LazyLock;

use super::reentrant::{REENTRANT_ACQUIRE, REENTRANT_EXTEND, REENTRANT_RELEASE};
use super::restart_guard::{
    GUARDED_ACQUIRE_ALL, GUARDED_EXTEND, GUARDED_EXTEND_OR_MISSING, GUARDED_FENCE_WRITE_BACK,
    GUARDED_FENCED_ACQUIRE, GUARDED_REENTRANT_ACQUIRE, GUARDED_REENTRANT_EXTEND, MARK_TRUSTED,
    SET_QUARANTINE, SPREAD, TRUST_STATUS, VOUCH_COUNTERS,
};
use super::script::Lua;
use super::scripts::{
    ACQUIRE_ALL, EXTEND, EXTEND_OR_MISSING, FENCE_WRITE_BACK, FENCED_ACQUIRE, INSPECT, RELEASE,
    RESEED,
};

/// One script of [`SCRIPTS`].
pub(crate) struct Registered {
    /// Its name: the static's, in lower case (read by the simulation and
    /// the portability check, not by the fault proxy).
    #[cfg_attr(not(any(test, feature = "sim")), allow(dead_code))]
    pub(crate) name: &'static str,
    /// The script.
    pub(crate) script: &'static LazyLock<Lua>,
    /// Which `ARGV` (from 0) is a TTL in milliseconds, if it sets one.
    pub(crate) ttl_argv: Option<usize>,
}

const fn entry(
    name: &'static str,
    script: &'static LazyLock<Lua>,
    ttl_argv: Option<usize>,
) -> Registered {
    Registered {
        name,
        script,
        ttl_argv,
    }
}

/// Every script the library sends but `DIAGNOSE` (the ACL check).
pub(crate) static SCRIPTS: [Registered; 23] = [
    entry("acquire_all", &ACQUIRE_ALL, Some(1)),
    entry("release", &RELEASE, None),
    entry("extend", &EXTEND, Some(1)),
    entry("extend_or_missing", &EXTEND_OR_MISSING, Some(1)),
    entry("reseed", &RESEED, Some(1)),
    entry("fenced_acquire", &FENCED_ACQUIRE, Some(1)),
    // ARGV[2..]: the tokens, no TTL.
    entry("fence_write_back", &FENCE_WRITE_BACK, None),
    entry("reentrant_acquire", &REENTRANT_ACQUIRE, Some(2)),
    entry("reentrant_release", &REENTRANT_RELEASE, None),
    entry("reentrant_extend", &REENTRANT_EXTEND, Some(1)),
    entry("inspect", &INSPECT, None),
    // The restart guard's: KEYS and ARGV as the plain script's, then the
    // record's key and the quarantine.
    entry("guarded_acquire_all", &GUARDED_ACQUIRE_ALL, Some(1)),
    entry(
        "guarded_reentrant_acquire",
        &GUARDED_REENTRANT_ACQUIRE,
        Some(2),
    ),
    entry("guarded_fenced_acquire", &GUARDED_FENCED_ACQUIRE, Some(1)),
    entry("guarded_extend", &GUARDED_EXTEND, Some(1)),
    entry(
        "guarded_extend_or_missing",
        &GUARDED_EXTEND_OR_MISSING,
        Some(1),
    ),
    entry(
        "guarded_reentrant_extend",
        &GUARDED_REENTRANT_EXTEND,
        Some(1),
    ),
    entry("guarded_fence_write_back", &GUARDED_FENCE_WRITE_BACK, None),
    entry("trust_status", &TRUST_STATUS, None),
    entry("mark_trusted", &MARK_TRUSTED, None),
    entry("set_quarantine", &SET_QUARANTINE, None),
    entry("spread", &SPREAD, None),
    entry("vouch_counters", &VOUCH_COUNTERS, None),
];

/// Which `ARGV` (from 0) of the script whose hash is `sha` is a TTL in
/// milliseconds; `None` for a script that sets none, or not ours.
#[cfg(feature = "testkit")]
pub(crate) fn ttl_argv(sha: &str) -> Option<usize> {
    SCRIPTS
        .iter()
        .find(|s| s.script.get_hash().eq_ignore_ascii_case(sha))
        .and_then(|s| s.ttl_argv)
}
