//! The documented ACL lines (docs/deployment.md) allow every command each
//! script calls: a user set up from them can run every feature.

use super::reentrant::{REENTRANT_ACQUIRE, REENTRANT_EXTEND, REENTRANT_RELEASE};
use super::script::Lua;
use super::scripts::*;

/// The commands of one feature's line in docs/deployment.md.
fn documented(feature: &str) -> Vec<String> {
    let doc = include_str!("../../docs/deployment.md");
    let line = doc
        .lines()
        .find(|l| l.starts_with(&format!("{feature}:")))
        .unwrap_or_default();
    line.split_whitespace()
        .filter_map(|w| w.strip_prefix('+'))
        .map(str::to_owned)
        .collect()
}

fn assert_documented(feature: &[&str], scripts: &[&Lua]) {
    let allowed: Vec<String> = feature.iter().flat_map(|f| documented(f)).collect();
    for script in scripts {
        for call in script.calls() {
            if call == "publish" || call == "append" {
                continue; // allowed to fail: the notifications line
            }
            assert!(
                allowed.contains(call),
                "docs/deployment.md: {feature:?} lacks +{call}"
            );
        }
    }
}

#[test]
fn the_documented_acl_lines_allow_every_command_of_their_scripts() {
    let core: [&Lua; 5] = [&ACQUIRE_ALL, &RELEASE, &EXTEND, &EXTEND_OR_MISSING, &RESEED];
    assert_documented(&["core"], &core);
    assert_documented(&["core"], &[&FENCED_ACQUIRE, &FENCE_WRITE_BACK]);
    use crate::node::batch::*;
    assert_documented(&["core"], &[&BATCHED_EXTEND, &BATCHED_EXTEND_OR_MISSING]);
    assert_documented(
        &["core", "restart-guard"],
        &[&GUARDED_BATCHED_EXTEND, &GUARDED_BATCHED_EXTEND_OR_MISSING],
    );
    assert_documented(
        &["core", "reentrant"],
        &[&REENTRANT_ACQUIRE, &REENTRANT_RELEASE, &REENTRANT_EXTEND],
    );
    assert_documented(&["core", "inspect"], &[&crate::node::scripts::INSPECT]);
    use crate::node::restart_guard::*;
    let guarded: [&Lua; 9] = [
        &GUARDED_ACQUIRE_ALL,
        &GUARDED_FENCE_WRITE_BACK,
        &GUARDED_EXTEND,
        &GUARDED_EXTEND_OR_MISSING,
        &TRUST_STATUS,
        &MARK_TRUSTED,
        &SPREAD,
        &SET_QUARANTINE,
        &VOUCH_COUNTERS,
    ];
    assert_documented(&["core", "restart-guard"], &guarded);
    assert_documented(&["core", "restart-guard"], &[&GUARDED_FENCED_ACQUIRE]);
    assert_documented(
        &["core", "reentrant", "restart-guard"],
        &[&GUARDED_REENTRANT_ACQUIRE, &GUARDED_REENTRANT_EXTEND],
    );
    assert!(GUARDED_ACQUIRE_ALL.calls().contains(&"info".to_owned()));
    assert!(documented("notifications").contains(&"publish".to_owned()));
    for needed in ["evalsha", "script|load", "set"] {
        assert!(documented("core").contains(&needed.to_owned()), "{needed}");
    }
}
