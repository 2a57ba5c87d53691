//! The Lua scripts run on each node, with their KEYS/ARGV contracts.
//!
//! Every script compares the stored value with ours before touching a key,
//! so no script ever changes a lock that belongs to someone else. Reads use
//! `redis.pcall`, so a key of another type (a hash, say) counts as "not ours"
//! instead of raising `WRONGTYPE`. `redis::Script` sends `EVALSHA` and falls
//! back to loading the script on `NOSCRIPT`, so a `SCRIPT FLUSH` or a node
//! restart costs one extra round trip, never a failure.

use std::sync::LazyLock;

use redis::Script;

/// Takes every key of a multi-resource lock at once, or none.
///
/// KEYS: the lock keys. ARGV[1]: our value, ARGV[2]: TTL in milliseconds.
/// Returns 1 when every key was free and is now ours, 0 when any key exists
/// (nothing is written then).
pub(crate) static ACQUIRE_ALL: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
for i = 1, #KEYS do
  if redis.call('exists', KEYS[i]) == 1 then return 0 end
end
for i = 1, #KEYS do
  redis.call('set', KEYS[i], ARGV[1], 'px', ARGV[2])
end
return 1
",
    )
});

/// Compare-and-delete, announcing each release.
///
/// KEYS: the lock keys. ARGV[1]: our value; ARGV[1 + i] (optional): the
/// channel on which to publish our value once KEYS[i] is deleted (absent or
/// empty: publish nothing).
/// Deletes each key that holds our value; returns how many it deleted.
/// `PUBLISH` runs under `pcall`: a node whose ACL forbids it still releases.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local n = 0
for i = 1, #KEYS do
  if redis.pcall('get', KEYS[i]) == ARGV[1] then
    local deleted = redis.call('del', KEYS[i])
    n = n + deleted
    local channel = ARGV[i + 1]
    if deleted == 1 and channel and channel ~= '' then
      redis.pcall('publish', channel, ARGV[1])
    end
  end
end
return n
",
    )
});

/// Compare-and-pexpire. Never creates a key.
///
/// KEYS: the lock keys. ARGV[1]: our value, ARGV[2]: new TTL in milliseconds.
/// Returns 1 when every key holds our value and got the new TTL, 0 when any
/// key is missing or not ours (nothing is changed then).
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
for i = 1, #KEYS do
  if redis.pcall('get', KEYS[i]) ~= ARGV[1] then return 0 end
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
pub(crate) static EXTEND_OR_MISSING: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local missing = false
for i = 1, #KEYS do
  local v = redis.pcall('get', KEYS[i])
  if v == false then
    missing = true
  elseif v ~= ARGV[1] then
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
pub(crate) static RESEED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
for i = 1, #KEYS do
  local v = redis.pcall('get', KEYS[i])
  if v ~= false and v ~= ARGV[1] then return 0 end
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
