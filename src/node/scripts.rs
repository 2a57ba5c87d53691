//! The plain lock's Lua scripts and the others run on a node, each with its
//! KEYS/ARGV contract (which kind runs which: `node::kind`).
//!
//! Every script compares the stored value with ours before touching a key,
//! so no script ever changes a lock that belongs to someone else. Reads use
//! `redis.pcall`, so a key of another type (a hash, say) counts as "not ours"
//! instead of raising `WRONGTYPE`. `redis::Script` sends `EVALSHA` and falls
//! back to loading the script on `NOSCRIPT`, so a `SCRIPT FLUSH` or a node
//! restart costs one extra round trip, never a failure.

use std::sync::LazyLock;

use super::script::{Lua, lua};
use crate::value::MARKABLE_LUA;

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
/// the holder's value (the clean-up of [`RELEASE`]), so every script that
/// compares the value accepts both.
pub(crate) const OURS: &str = r"
local function ours(v) return v == ARGV[1] or v == ARGV[1] .. '+' end
";

/// A script whose body may call `ours(v)`.
pub(crate) fn with_ours(body: &str) -> Lua {
    lua(&format!("{OURS}{body}"))
}

/// Compare-and-delete: the release of a held lock, announced when someone
/// waits, or the clean-up of a failed attempt, announced never.
///
/// KEYS: the lock keys. ARGV[1]: our value; ARGV[2]: absent for a release,
/// `0` for a clean-up, `1` for a clean-up that marks.
/// Deletes each key that holds our value; returns how many it deleted.
///
/// A release publishes each deleted value that a waiter marked (`+`
/// appended) on the resource's channel: `{prefix}released:{resource}` for
/// the key `{prefix}lock:{resource}` (the first `lock:` in the key ends the
/// prefix: a prefix may not contain it, and no end of `lock:` starts it).
/// A release nobody waits for costs no `PUBLISH` and no extra call.
///
/// A clean-up that marks appends `+` to each other lock value of this
/// version by its whole grammar (`value::MARKABLE_LUA`: an uppercase
/// letter, 39 lowercase hex digits, an optional label) not yet marked: the
/// attempt's `lock()` waits, so that holder's release will announce
/// itself. Values of earlier versions, or of other software sharing the
/// prefix (whatever their first letter), are left as they are.
///
/// `PUBLISH` and `APPEND` run under `pcall`: a node whose ACL forbids them
/// still releases (and announces nothing).
pub(crate) static RELEASE: LazyLock<Lua> = LazyLock::new(|| {
    with_ours(&format!(
        r"{MARKABLE_LUA}
local deleted_keys = 0
for i = 1, #KEYS do
  local v = redis.pcall('get', KEYS[i])
  if ours(v) then
    deleted_keys = deleted_keys + redis.call('del', KEYS[i])
    if v ~= ARGV[1] and not ARGV[2] then
      local s, e = string.find(KEYS[i], 'lock:', 1, true)
      local channel = string.sub(KEYS[i], 1, s - 1) .. 'released:' .. string.sub(KEYS[i], e + 1)
      redis.pcall('publish', channel, ARGV[1])
    end
  elseif ARGV[2] == '1' and markable(v) then
    redis.pcall('append', KEYS[i], '+')
  end
end
return deleted_keys
"
    ))
});

/// Compare-and-pexpire. Never creates a key, never shortens one.
///
/// KEYS: the lock keys. ARGV[1]: our value, ARGV[2]: new TTL in milliseconds.
/// Returns 1 when every key holds our value and now lives at least the new
/// TTL (a key with more left keeps it), 0 when any key is missing or not
/// ours (nothing is changed then). Never shortening makes the order in
/// which a node receives two extensions of one lock not matter: an older,
/// shorter one that lands after a newer one (calls on several connections
/// may overtake each other) cannot cut what the newer round counted.
pub(crate) static EXTEND: LazyLock<Lua> = LazyLock::new(|| with_ours(EXTEND_LUA));

/// The body of [`EXTEND`], after [`OURS`] (the restart guard runs it after
/// announcing its quarantine).
pub(crate) const EXTEND_LUA: &str = r"
for i = 1, #KEYS do
  if not ours(redis.pcall('get', KEYS[i])) then return 0 end
end
for i = 1, #KEYS do
  if redis.call('pttl', KEYS[i]) < tonumber(ARGV[2]) then
    redis.call('pexpire', KEYS[i], ARGV[2])
  end
end
return 1
";

/// Compare-and-pexpire that tells a missing key from a foreign one.
///
/// KEYS: the lock keys. ARGV[1]: our value, ARGV[2]: new TTL in milliseconds.
/// Returns 1 when every key holds our value and now lives at least the new
/// TTL (never shortened, as [`EXTEND`]); 0 when any key holds another
/// value; -1 when no key is foreign but some are missing (a restarted
/// node). Nothing is changed unless it returns 1.
pub(crate) static EXTEND_OR_MISSING: LazyLock<Lua> =
    LazyLock::new(|| with_ours(EXTEND_OR_MISSING_LUA));

/// The body of [`EXTEND_OR_MISSING`], after [`OURS`].
pub(crate) const EXTEND_OR_MISSING_LUA: &str = r"
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
  if redis.call('pttl', KEYS[i]) < tonumber(ARGV[2]) then
    redis.call('pexpire', KEYS[i], ARGV[2])
  end
end
return 1
";

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
    lua(&format!(
        "local function counted(i, c) return c end\n{FENCED_ACQUIRE_LUA}"
    ))
});

/// [`FENCED_ACQUIRE`]'s body: expects `counted(i, c)`, which gives the
/// counter of resource i as returned (the restart guard's marks one not
/// known intact).
pub(crate) const FENCED_ACQUIRE_LUA: &str = r"
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
  counters[i] = counted(i, c or '0')
end
for i = 1, n do
  redis.call('set', KEYS[i], ARGV[1], 'px', ARGV[2])
end
return counters
";

/// Phase 2: raises the counters to the tokens, only while the lock is ours.
///
/// KEYS: as [`FENCED_ACQUIRE`]. ARGV[1]: our value, ARGV[1 + i]: the token of
/// resource i, in decimal. Returns 1 when every lock key holds our value
/// and every counter is now at least its token, 0 when a lock key is
/// missing or not ours (nothing is written then). Counters are compared as
/// decimal strings (length, then digits), exact over the whole `u64` range.
pub(crate) static FENCE_WRITE_BACK: LazyLock<Lua> = LazyLock::new(|| {
    with_ours(&format!(
        "local function raised(i) end\n{FENCE_WRITE_BACK_LUA}"
    ))
});

/// The body of [`FENCE_WRITE_BACK`]: after counter i is at least its token
/// it calls `raised(i)`, which the script defines before it (the restart
/// guard's version records the trust period there).
pub(crate) const FENCE_WRITE_BACK_LUA: &str = r"
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
  raised(i)
end
return 1
";

// Inspection (`Redlock::inspect`).

/// Reads, without writing, KEYS[1] (a lock key) and KEYS[2] (its fence
/// counter): `{type, pttl, holder, holds, counter}`, absent parts as ''.
pub(crate) static INSPECT: LazyLock<Lua> = LazyLock::new(|| {
    lua(r"
local kind = redis.call('type', KEYS[1]).ok
local pttl = redis.call('pttl', KEYS[1])
local holder, holds = '', 0
if kind == 'string' then
  holder = redis.call('get', KEYS[1])
elseif kind == 'hash' then
  holder = redis.call('hget', KEYS[1], 'owner') or ''
  holds = tonumber(redis.call('hget', KEYS[1], 'count')) or 0
end
local counter = redis.pcall('get', KEYS[2])
if type(counter) ~= 'string' then counter = '' end
return {kind, pttl, holder, holds, counter}
")
});
