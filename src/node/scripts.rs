//! Every Lua script run on a node, with its KEYS/ARGV contract, and which
//! one fits a lock value ([`release_script`], [`extend_script`]).
//!
//! Every script compares the stored value with ours before touching a key,
//! so no script ever changes a lock that belongs to someone else. Reads use
//! `redis.pcall`, so a key of another type (a hash, say) counts as "not ours"
//! instead of raising `WRONGTYPE`. `redis::Script` sends `EVALSHA` and falls
//! back to loading the script on `NOSCRIPT`, so a `SCRIPT FLUSH` or a node
//! restart costs one extra round trip, never a failure.

use std::sync::LazyLock;

use super::acl::{Lua, lua};

/// Takes every key of a multi-resource lock at once, or none.
///
/// KEYS: the lock keys. ARGV[1]: our value, ARGV[2]: TTL in milliseconds.
/// Returns 1 when every key was free and is now ours, 0 when any key exists
/// (nothing is written then).
pub(crate) static ACQUIRE_ALL: LazyLock<Lua> = LazyLock::new(|| lua(ACQUIRE_ALL_LUA));

/// The source of [`ACQUIRE_ALL`] (the restart guard runs it after its check).
pub(crate) const ACQUIRE_ALL_LUA: &str = r"
for i = 1, #KEYS do
  if redis.call('exists', KEYS[i]) == 1 then return 0 end
end
for i = 1, #KEYS do
  redis.call('set', KEYS[i], ARGV[1], 'px', ARGV[2])
end
return 1
";

/// Lua: `ours(v)`, true when the stored value `v` is ours (ARGV[1]),
/// marked or not. A waiter marks a lock it waits for by appending `+` to
/// the holder's value ([`CLEANUP`]), so every script that compares the
/// value accepts both.
pub(crate) const OURS: &str = r"
local function ours(v) return v == ARGV[1] or v == ARGV[1] .. '+' end
";

/// A script whose body may call `ours(v)`.
pub(crate) fn with_ours(body: &str) -> Lua {
    lua(&format!("{OURS}{body}"))
}

/// Compare-and-delete, announcing the release when someone waits.
///
/// KEYS: the lock keys. ARGV[1]: our value.
/// Deletes each key that holds our value; returns how many it deleted. A
/// deleted value that a waiter marked (`+` appended) is published on the
/// resource's channel: `{prefix}released:{resource}` for the key
/// `{prefix}lock:{resource}` (the first `lock:` in the key ends the
/// prefix: a prefix may not contain it, and no end of `lock:` starts it).
/// A release nobody waits for costs no `PUBLISH` and no extra call.
/// `PUBLISH` runs under `pcall`: a node whose ACL forbids it still
/// releases.
pub(crate) static RELEASE: LazyLock<Lua> = LazyLock::new(|| {
    with_ours(
        r"
local deleted_keys = 0
for i = 1, #KEYS do
  local v = redis.pcall('get', KEYS[i])
  if ours(v) then
    deleted_keys = deleted_keys + redis.call('del', KEYS[i])
    if v ~= ARGV[1] then
      local s, e = string.find(KEYS[i], 'lock:', 1, true)
      local channel = string.sub(KEYS[i], 1, s - 1) .. 'released:' .. string.sub(KEYS[i], e + 1)
      redis.pcall('publish', channel, ARGV[1])
    end
  end
end
return deleted_keys
",
    )
});

/// The clean-up of a failed attempt: compare-and-delete that announces
/// nothing, and marks the locks it lost as awaited.
///
/// KEYS: the lock keys. ARGV[1]: our value; ARGV[2]: `1` to mark.
/// Deletes each key that holds our value (where the attempt won); with
/// ARGV[2] = `1`, appends `+` to each other lock value of this version (its
/// first digit an uppercase letter: see `value::fresh_labelled`) not yet
/// marked (its holder's release then announces itself: someone waits).
/// Values of earlier versions, or of other software, are left as they are.
/// Returns how many keys it deleted. `APPEND` runs under `pcall`: a node whose ACL
/// forbids it still cleans up (its releases just stay quiet).
pub(crate) static CLEANUP: LazyLock<Lua> = LazyLock::new(|| {
    with_ours(
        r"
local deleted_keys = 0
for i = 1, #KEYS do
  local v = redis.pcall('get', KEYS[i])
  if ours(v) then
    deleted_keys = deleted_keys + redis.call('del', KEYS[i])
  elseif ARGV[2] == '1' and type(v) == 'string' and string.find(v, '^[A-F]')
    and string.sub(v, -1) ~= '+' then
    redis.pcall('append', KEYS[i], '+')
  end
end
return deleted_keys
",
    )
});

/// Compare-and-pexpire. Never creates a key.
///
/// KEYS: the lock keys. ARGV[1]: our value, ARGV[2]: new TTL in milliseconds.
/// Returns 1 when every key holds our value and got the new TTL, 0 when any
/// key is missing or not ours (nothing is changed then).
pub(crate) static EXTEND: LazyLock<Lua> = LazyLock::new(|| {
    with_ours(
        r"
for i = 1, #KEYS do
  if not ours(redis.pcall('get', KEYS[i])) then return 0 end
end
for i = 1, #KEYS do
  redis.call('pexpire', KEYS[i], ARGV[2])
end
return 1
",
    )
});

/// Compare-and-pexpire that tells a missing key from a foreign one.
///
/// KEYS: the lock keys. ARGV[1]: our value, ARGV[2]: new TTL in milliseconds.
/// Returns 1 when every key holds our value and got the new TTL; 0 when any
/// key holds another value; -1 when no key is foreign but some are missing
/// (a restarted node). Nothing is changed unless it returns 1.
pub(crate) static EXTEND_OR_MISSING: LazyLock<Lua> = LazyLock::new(|| {
    with_ours(
        r"
local missing = false
for i = 1, #KEYS do
  local v = redis.pcall('get', KEYS[i])
  if v == false then
    missing = true
  elseif not ours(v) then
    return 0
  end
end
if missing then return -1 end
for i = 1, #KEYS do
  redis.call('pexpire', KEYS[i], ARGV[2])
end
return 1
",
    )
});

/// Re-seeds a lock on a node that lost it (restarted empty), once the lock
/// is known to be held on a quorum. Never overwrites another owner's key.
///
/// KEYS: the lock keys. ARGV[1]: our value, ARGV[2]: TTL in milliseconds.
/// Returns 0 when any key holds another value (nothing is written); else
/// sets each missing key (`SET NX PX`), gives the TTL to those already
/// ours, and returns 1.
pub(crate) static RESEED: LazyLock<Lua> = LazyLock::new(|| {
    with_ours(
        r"
for i = 1, #KEYS do
  local v = redis.pcall('get', KEYS[i])
  if v ~= false and not ours(v) then return 0 end
end
for i = 1, #KEYS do
  if not redis.call('set', KEYS[i], ARGV[1], 'nx', 'px', ARGV[2]) then
    redis.call('pexpire', KEYS[i], ARGV[2])
  end
end
return 1
",
    )
});

// Fencing tokens (see `lock::fenced`).

/// Phase 1: takes every lock key at once, or none, and reads the counters.
///
/// KEYS: the n lock keys, then the n counter keys (same order).
/// ARGV[1]: our value, ARGV[2]: TTL in milliseconds.
/// Returns nil when any lock key exists (nothing is written then), else the
/// n counters as decimal strings ("0" for a counter never written).
pub(crate) static FENCED_ACQUIRE: LazyLock<Lua> = LazyLock::new(|| {
    lua(r"
local n = #KEYS / 2
for i = 1, n do
  if redis.call('exists', KEYS[i]) == 1 then return false end
end
local counters = {}
for i = 1, n do
  local c = redis.call('get', KEYS[n + i])
  if c and not string.match(c, '^%d+$') then
    return redis.error_reply('fence counter ' .. KEYS[n + i] .. ' is not a number')
  end
  counters[i] = c or '0'
end
for i = 1, n do
  redis.call('set', KEYS[i], ARGV[1], 'px', ARGV[2])
end
return counters
")
});

/// Phase 2: raises the counters to the tokens, only while the lock is ours.
///
/// KEYS: as [`FENCED_ACQUIRE`]. ARGV[1]: our value, ARGV[1 + i]: the token of
/// resource i, in decimal. Returns 1 when every lock key holds our value
/// and every counter is now at least its token, 0 when a lock key is
/// missing or not ours (nothing is written then). Counters are compared as
/// decimal strings (length, then digits), exact over the whole `u64` range.
pub(crate) static FENCE_WRITE_BACK: LazyLock<Lua> = LazyLock::new(|| {
    with_ours(
        r"
local n = #KEYS / 2
for i = 1, n do
  if not ours(redis.pcall('get', KEYS[i])) then return 0 end
end
for i = 1, n do
  local c = redis.call('get', KEYS[n + i])
  local t = ARGV[1 + i]
  if not c or #c < #t or (#c == #t and c < t) then
    redis.call('set', KEYS[n + i], t)
  end
end
return 1
",
    )
});

// Reentrant holds.
//
// Reentrant holds: one lock that the same caller-chosen owner may take
// several times, and that is free again once every hold is released.
//
// On each node the lock key of a reentrant lock is a hash (a plain lock's
// key is a string, so the two kinds exclude each other):
//
// | field | value |
// |---|---|
// | `owner` | the owner's identity |
// | `count` | the number of holds on this node |
// | `hold:<id>` | the hold's expiry (node clock, ms), one field per hold |
//
// Each acquisition has its own hold id (the guard's value, fresh random
// bits), so that releasing a hold, or cleaning up after an attempt that did
// not reach a quorum, removes exactly that hold and never another one of
// the same owner: a node that never saw the hold is left alone. The hold
// id starts with [`HOLD_ID_MARK`], which no plain value does; the node
// layer picks the reentrant release and extend scripts by it, so every
// path that releases or extends a lock (guard, drop, cancelled attempt,
// background extension) treats a reentrant hold correctly.
//
// The key's TTL is always the latest expiry among its holds: taking an
// inner hold with a short TTL cannot cut an outer hold short, and
// releasing an inner hold with a long TTL does not leave its TTL behind
// (were the outer holder to die, the lock frees at the outer expiry).

/// Lua shared by the scripts: `now()`, the node's clock in milliseconds,
/// and `refit(key, now)`, which gives `key` the TTL of the latest expiry
/// among its holds (deleting it when every hold has expired). Each hold
/// field stores its own expiry, so that releasing or extending one hold
/// leaves the key exactly as long-lived as the holds that remain. The
/// expiries are on the node's clock, as Redis's own key expiry is.
pub(crate) const PRELUDE: &str = r"
local function now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function refit(key, at)
  local latest = 0
  local fields = redis.call('hgetall', key)
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, 5) == 'hold:' then
      local expiry = tonumber(fields[i + 1]) or 0
      if expiry > latest then latest = expiry end
    end
  end
  if latest <= at then
    redis.call('del', key)
  else
    redis.call('pexpire', key, latest - at)
  end
end
";

/// A script made of [`PRELUDE`] and `body`.
fn with_prelude(body: &str) -> Lua {
    lua(&format!("{PRELUDE}{body}"))
}

/// Takes the lock for an owner, or one more hold for the owner holding it.
///
/// KEYS[1]: the lock key. ARGV[1]: owner, ARGV[2]: hold id, ARGV[3]: TTL in
/// milliseconds. Returns 1 when the hold is ours (the key was free, or is
/// held by this owner), 0 when the key holds anything else. The key's TTL
/// becomes the latest expiry among its holds, so never shorter than before.
pub(crate) static REENTRANT_ACQUIRE: LazyLock<Lua> =
    LazyLock::new(|| with_prelude(REENTRANT_ACQUIRE_LUA));

/// The body of [`REENTRANT_ACQUIRE`], after [`PRELUDE`].
pub(crate) const REENTRANT_ACQUIRE_LUA: &str = r"
local at = now()
local ttl = tonumber(ARGV[3])
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  redis.call('hset', KEYS[1], 'owner', ARGV[1], 'count', 1, 'hold:' .. ARGV[2], at + ttl)
  redis.call('pexpire', KEYS[1], ttl)
  return 1
end
if kind ~= 'hash' or redis.call('hget', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
if redis.call('hsetnx', KEYS[1], 'hold:' .. ARGV[2], at + ttl) == 1 then
  redis.call('hincrby', KEYS[1], 'count', 1)
else
  redis.call('hset', KEYS[1], 'hold:' .. ARGV[2], at + ttl)
end
refit(KEYS[1], at)
return 1
";

/// Removes one hold; frees the lock when it was the last, else gives the
/// key the TTL of the latest expiry among the holds that remain.
///
/// KEYS: the lock keys. ARGV[1]: the hold id. Returns how many keys had the
/// hold (and lost it).
pub(crate) static REENTRANT_RELEASE: LazyLock<Lua> = LazyLock::new(|| {
    with_prelude(
        r"
local at = now()
local n = 0
for i = 1, #KEYS do
  if redis.call('type', KEYS[i]).ok == 'hash'
      and redis.call('hdel', KEYS[i], 'hold:' .. ARGV[1]) == 1 then
    if redis.call('hincrby', KEYS[i], 'count', -1) <= 0 then
      redis.call('del', KEYS[i])
    else
      refit(KEYS[i], at)
    end
    n = n + 1
  end
end
return n
",
    )
});

/// Gives the hold the TTL from now, while the hold exists; the key then
/// lives until the latest expiry among its holds. Never creates a key.
///
/// KEYS: the lock keys. ARGV[1]: the hold id, ARGV[2]: TTL in milliseconds.
/// Returns 1 when every key has the hold, 0 otherwise (nothing changed).
pub(crate) static REENTRANT_EXTEND: LazyLock<Lua> = LazyLock::new(|| {
    with_prelude(
        r"
for i = 1, #KEYS do
  if redis.call('type', KEYS[i]).ok ~= 'hash'
      or redis.call('hexists', KEYS[i], 'hold:' .. ARGV[1]) == 0 then
    return 0
  end
end
local at = now()
for i = 1, #KEYS do
  redis.call('hset', KEYS[i], 'hold:' .. ARGV[1], at + tonumber(ARGV[2]))
  refit(KEYS[i], at)
end
return 1
",
    )
});

/// The compare-and-delete script for `value`: the reentrant one for a hold id.
pub(crate) fn release_script(value: &str) -> &'static Lua {
    if crate::value::is_hold_id(value) {
        &REENTRANT_RELEASE
    } else {
        &RELEASE
    }
}

/// The compare-and-pexpire script for `value`: the reentrant one for a hold id.
pub(crate) fn extend_script(value: &str) -> &'static Lua {
    if crate::value::is_hold_id(value) {
        &REENTRANT_EXTEND
    } else {
        &EXTEND
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_ids_get_the_reentrant_scripts_and_plain_values_the_plain_ones() {
        let id = crate::value::hold_id();
        assert!(std::ptr::eq(release_script(&id), &*REENTRANT_RELEASE));
        assert!(std::ptr::eq(extend_script(&id), &*REENTRANT_EXTEND));
        let plain = crate::value::fresh();
        assert!(std::ptr::eq(release_script(&plain), &*RELEASE));
        assert!(std::ptr::eq(extend_script(&plain), &*EXTEND));
    }
}

#[cfg(test)]
mod acl_docs {
    use super::*;

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
        let core: [&Lua; 6] = [
            &ACQUIRE_ALL,
            &RELEASE,
            &CLEANUP,
            &EXTEND,
            &EXTEND_OR_MISSING,
            &RESEED,
        ];
        assert_documented(&["core"], &core);
        assert_documented(&["core"], &[&FENCED_ACQUIRE, &FENCE_WRITE_BACK]);
        assert_documented(
            &["core", "reentrant"],
            &[&REENTRANT_ACQUIRE, &REENTRANT_RELEASE, &REENTRANT_EXTEND],
        );
        assert_documented(&["core", "inspect"], &[&crate::inspect::INSPECT]);
        use crate::node::guard::*;
        let guarded: [&Lua; 4] = [
            &GUARDED_ACQUIRE_ALL,
            &GUARDED_FENCE_WRITE_BACK,
            &TRUST_STATUS,
            &MARK_TRUSTED,
        ];
        assert_documented(&["core", "restart-guard"], &guarded);
        assert_documented(&["core", "restart-guard"], &[&GUARDED_FENCED_ACQUIRE]);
        assert_documented(
            &["core", "reentrant", "restart-guard"],
            &[&GUARDED_REENTRANT_ACQUIRE],
        );
        assert!(GUARDED_ACQUIRE_ALL.calls().contains(&"info".to_owned()));
        assert!(documented("notifications").contains(&"publish".to_owned()));
        for needed in ["evalsha", "script|load", "set"] {
            assert!(documented("core").contains(&needed.to_owned()), "{needed}");
        }
    }
}
