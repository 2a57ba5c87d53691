//! The key schema and resource names: every key and channel the library
//! uses on a node is
//! `{prefix}{kind}:{resource}`, with the kinds below. No key of one
//! `(prefix, kind, resource)` can equal a key of another, because no kind
//! ends another kind and a prefix may not contain any `{kind}:`. (Two keys
//! equal means one prefix extends the other by a run that starts the
//! shorter key's `{kind}:`; that run either contains a whole `{kind}:` or
//! leaves a tail of one kind that starts another.)

use crate::error::{Error, Result};

/// The kind of a lock key.
pub(crate) const LOCK: &str = "lock:";
/// The kind of a fencing counter.
pub(crate) const FENCE: &str = "fence:";
/// The kind of a release-notification channel.
pub(crate) const RELEASED: &str = "released:";
/// The kind of the restart guard's record (one per node, resource `node`).
pub(crate) const GUARD: &str = "restart-guard:";

/// Every kind; none ends another.
pub(crate) const KINDS: [&str; 4] = [LOCK, FENCE, RELEASED, GUARD];

/// The key of the restart guard's record on every node:
/// `{prefix}restart-guard:node`, a hash without TTL.
pub(crate) fn guard_key(prefix: &str) -> String {
    format!("{prefix}{GUARD}node")
}

/// The key of `resource`'s lock.
pub(crate) fn lock_key(prefix: &str, resource: &str) -> String {
    format!("{prefix}{LOCK}{resource}")
}

/// The key of `resource`'s fencing counter.
pub(crate) fn counter_key(prefix: &str, resource: &str) -> String {
    format!("{prefix}{FENCE}{resource}")
}

/// The channel on which releases of `resource` are announced.
pub(crate) fn channel(prefix: &str, resource: &str) -> String {
    format!("{prefix}{RELEASED}{resource}")
}

/// The channel of the lock key `{prefix}lock:{resource}`; empty (publish
/// nothing) for a key of another shape. The release script finds it
/// without the prefix (see [`channel_by_first_lock`]); tests hold the two
/// equal.
#[cfg(test)]
pub(crate) fn channel_of_key(prefix: &str, key: &str) -> String {
    key.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix(LOCK))
        .map_or_else(String::new, |resource| channel(prefix, resource))
}

/// The channel of a lock key as the release script derives it: the first
/// `lock:` in the key ends the prefix (a valid prefix contains none, and
/// no proper end of `lock:` is also its start, so none straddles the
/// prefix's end either).
#[cfg(test)]
pub(crate) fn channel_by_first_lock(key: &str) -> Option<String> {
    let at = key.find(LOCK)?;
    Some(format!(
        "{}{RELEASED}{}",
        &key[..at],
        &key[at + LOCK.len()..]
    ))
}

/// `resources` without repeats, in the order of their first appearance.
/// Linear: a hash set of the names seen.
pub(crate) fn unique_names(resources: &[&str]) -> Vec<String> {
    let mut seen = std::collections::HashSet::with_capacity(resources.len());
    resources
        .iter()
        .filter(|r| seen.insert(**r))
        .map(|r| (*r).to_owned())
        .collect()
}

/// Checks resource names: at least one, none empty.
pub(crate) fn check_resources(resources: &[&str]) -> Result<()> {
    if resources.is_empty() {
        return Err(Error::InvalidArgument(
            "no resource given: name at least one resource to lock".to_owned(),
        ));
    }
    if resources.iter().any(|r| r.is_empty()) {
        return Err(Error::InvalidArgument(
            "resource name is empty: name the thing the lock protects".to_owned(),
        ));
    }
    Ok(())
}

/// Checks a key prefix: it must not contain any `{kind}:`.
pub(crate) fn check_prefix(prefix: &str) -> Result<()> {
    match KINDS.iter().find(|kind| prefix.contains(**kind)) {
        Some(kind) => Err(Error::Config(format!(
            "key prefix {prefix:?} contains {kind:?}, so its keys could equal keys of another \
             prefix (a lock key equal to a fencing counter, say); use a prefix without \
             \"lock:\", \"fence:\", \"released:\" or \"restart-guard:\", e.g. \"myapp:\""
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn channel_names_follow_the_prefix_and_resource() {
        assert_eq!(channel("rq:", "jobs"), "rq:released:jobs");
        assert_eq!(channel_of_key("rq:", "rq:lock:jobs"), "rq:released:jobs");
        assert_eq!(
            channel_of_key("rq:", "rq:lock:a:lock:b"),
            "rq:released:a:lock:b"
        );
        assert_eq!(channel_of_key("rq:", "other:lock:jobs"), "");
    }

    #[test]
    fn repeated_names_count_once_in_the_order_first_given() {
        assert_eq!(unique_names(&["b", "a", "b", "c", "a"]), ["b", "a", "c"]);
        assert!(unique_names(&[]).is_empty());
    }

    #[test]
    fn empty_resource_or_no_resource_is_rejected() {
        assert!(check_resources(&[]).is_err());
        assert!(check_resources(&["a", ""]).is_err());
        assert!(check_resources(&["a"]).is_ok());
    }

    #[test]
    fn no_kind_ends_another_or_holds_a_colon_before_its_end() {
        for a in KINDS {
            assert_eq!(a.find(':'), Some(a.len() - 1), "{a}");
            for b in KINDS {
                let (a, b) = (&a[..a.len() - 1], &b[..b.len() - 1]);
                assert!(a == b || !a.ends_with(b), "{a} ends with {b}");
            }
        }
    }

    #[test]
    fn a_refused_prefix_really_collides() {
        // The negative control of the property below: what the check refuses.
        assert_eq!(lock_key("X:fence:", "jobs"), counter_key("X:", "lock:jobs"));
        assert!(check_prefix("X:fence:").is_err());
    }

    #[test]
    fn the_default_prefix_is_accepted_and_kind_bearing_ones_are_not() {
        assert!(check_prefix(crate::config::DEFAULT_KEY_PREFIX).is_ok());
        assert!(check_prefix("").is_ok());
        assert!(check_prefix("app:lockers:").is_ok());
        for bad in ["X:fence:", "lock:", "a:released:b"] {
            assert!(check_prefix(bad).is_err(), "{bad}");
        }
    }

    /// Strings of `pieces` pieces that make collisions likely.
    fn tricky(pieces: std::ops::Range<usize>) -> impl Strategy<Value = String> {
        let piece = prop::sample::select(vec![
            "lock:",
            "fence:",
            "released:",
            "lock",
            "fence",
            ":",
            "l",
            "e",
            "x",
            "ck:",
            "d:",
        ]);
        prop::collection::vec(piece, pieces).prop_map(|p| p.concat())
    }

    /// A valid prefix close to an invalid one: each kind in it broken up.
    fn valid_prefix() -> impl Strategy<Value = String> {
        tricky(0..5).prop_map(|mut p| {
            while let Some(kind) = KINDS.iter().find(|k| p.contains(**k)) {
                p = p.replacen(kind, &kind[..kind.len() - 1], 1);
            }
            p
        })
    }

    proptest! {
        #[test]
        fn keys_of_valid_prefixes_never_collide_across_prefix_kind_or_resource(
            p1 in valid_prefix(), p2 in valid_prefix(), r1 in tricky(1..5), r2 in tricky(1..5),
            k1 in 0..KINDS.len(), k2 in 0..KINDS.len(),
        ) {
            prop_assert!(check_prefix(&p1).is_ok() && check_prefix(&p2).is_ok());
            let a = format!("{p1}{}{r1}", KINDS[k1]);
            let b = format!("{p2}{}{r2}", KINDS[k2]);
            if a == b {
                prop_assert_eq!((&p1, k1, &r1), (&p2, k2, &r2));
            }
        }

        #[test]
        fn the_release_script_finds_the_channel_of_every_valid_lock_key(
            p in valid_prefix(), r in tricky(1..5),
        ) {
            let key = lock_key(&p, &r);
            prop_assert_eq!(channel_by_first_lock(&key), Some(channel_of_key(&p, &key)));
            prop_assert_eq!(channel_by_first_lock(&key), Some(channel(&p, &r)));
        }

        #[test]
        fn the_check_rejects_exactly_the_prefixes_that_contain_a_kind(p in tricky(0..5)) {
            let contains = KINDS.iter().any(|k| p.contains(k));
            prop_assert_eq!(check_prefix(&p).is_err(), contains);
        }
    }
}
