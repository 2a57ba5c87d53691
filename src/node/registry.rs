//! Every Lua script the library sends, in one list ([`SCRIPTS`]): its
//! name and, for a script that sets or extends a TTL, which `ARGV` (from
//! 0) carries that TTL in milliseconds. The Lua-portability check, the
//! fault proxy (which rewrites those TTLs to speed a node's clock) and the
//! simulation's script library read it, so a new script cannot be missed
//! by one of them. `DIAGNOSE`, the ACL check run
//! after a refusal, is no [`Lua`](super::script::Lua) and is listed by each user beside these.

use std::sync::LazyLock;

use super::batch::{
    BATCHED_EXTEND, BATCHED_EXTEND_OR_MISSING, GUARDED_BATCHED_EXTEND,
    GUARDED_BATCHED_EXTEND_OR_MISSING,
};
use super::kind::Kind;
use super::restart_guard::{
    GUARDED_EXTEND_OR_MISSING, GUARDED_FENCE_WRITE_BACK, MARK_TRUSTED, SET_QUARANTINE, SPREAD,
    TRUST_STATUS, VOUCH_COUNTERS,
};
use super::script::{Registered, entry};
use super::scripts::{EXTEND_OR_MISSING, FENCE_WRITE_BACK, INSPECT, RESEED};

/// The scripts no kind of lock owns as one of its steps ([`Kind`]'s
/// scripts are listed by it).
static OTHERS: [Registered; 15] = [
    entry("extend_or_missing", &EXTEND_OR_MISSING, Some(1)),
    entry(
        "guarded_extend_or_missing",
        &GUARDED_EXTEND_OR_MISSING,
        Some(1),
    ),
    entry("reseed", &RESEED, Some(1)),
    // ARGV[2..]: the tokens, no TTL.
    entry("fence_write_back", &FENCE_WRITE_BACK, None),
    // KEYS and ARGV as the plain one's, then the record's key.
    entry("guarded_fence_write_back", &GUARDED_FENCE_WRITE_BACK, None),
    entry("inspect", &INSPECT, None),
    entry("trust_status", &TRUST_STATUS, None),
    entry("mark_trusted", &MARK_TRUSTED, None),
    entry("set_quarantine", &SET_QUARANTINE, None),
    entry("spread", &SPREAD, None),
    entry("vouch_counters", &VOUCH_COUNTERS, None),
    // ARGV[1] is the TTL of every lock the batch carries.
    entry("batched_extend", &BATCHED_EXTEND, Some(0)),
    entry("guarded_batched_extend", &GUARDED_BATCHED_EXTEND, Some(0)),
    entry(
        "batched_extend_or_missing",
        &BATCHED_EXTEND_OR_MISSING,
        Some(0),
    ),
    entry(
        "guarded_batched_extend_or_missing",
        &GUARDED_BATCHED_EXTEND_OR_MISSING,
        Some(0),
    ),
];

/// Every script the library sends but `DIAGNOSE` (the ACL check): each
/// kind's (a script two kinds share listed once), then the others.
pub(crate) static SCRIPTS: LazyLock<Vec<&'static Registered>> = LazyLock::new(|| {
    let mut all: Vec<&'static Registered> = Vec::new();
    let kinds = Kind::ALL.iter().flat_map(|kind| kind.scripts().all());
    for script in kinds.chain(OTHERS.iter()) {
        if !all.iter().any(|listed| listed.name == script.name) {
            all.push(script);
        }
    }
    all
});

/// Which `ARGV` (from 0) of the script whose hash is `sha` is a TTL in
/// milliseconds; `None` for a script that sets none, or not ours.
#[cfg(feature = "testkit")]
pub(crate) fn ttl_argv(sha: &str) -> Option<usize> {
    SCRIPTS
        .iter()
        .find(|s| s.script.get_hash().eq_ignore_ascii_case(sha))
        .and_then(|s| s.ttl_argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_is_listed_once_and_the_kinds_share_what_they_share() {
        assert_eq!(SCRIPTS.len(), 27);
        for (i, script) in SCRIPTS.iter().enumerate() {
            let hash = script.script.get_hash();
            let twins = SCRIPTS[i + 1..]
                .iter()
                .filter(|s| s.script.get_hash() == hash);
            assert_eq!(twins.count(), 0, "{} listed twice", script.name);
        }
    }
}
