//! Reentrant holds: one lock that the same caller-chosen owner may take
//! several times, and that is free again once every hold is released.
//!
//! On each node the lock key of a reentrant lock is a hash (a plain lock's
//! key is a string, so the two kinds exclude each other):
//!
//! | field | value |
//! |---|---|
//! | `owner` | the owner's identity |
//! | `count` | the number of holds on this node |
//! | `hold:<id>` | the hold's expiry (node clock, ms), one field per hold |
//!
//! Each acquisition has its own hold id (the guard's value, fresh random
//! bits), so that releasing a hold, or cleaning up after an attempt that did
//! not reach a quorum, removes exactly that hold and never another one of
//! the same owner: a node that never saw the hold is left alone. The hold
//! id starts with [`HOLD_ID_MARK`], which no plain value does; the lock's
//! kind (`node::kind`) is read from it, and with it the reentrant release
//! and extend scripts, so every
//! path that releases or extends a lock (guard, drop, cancelled attempt,
//! background extension) treats a reentrant hold correctly.
//!
//! The key's TTL is always the latest expiry among its holds: taking an
//! inner hold with a short TTL cannot cut an outer hold short, and
//! releasing an inner hold with a long TTL does not leave its TTL behind
//! (were the outer holder to die, the lock frees at the outer expiry).
//!
//! The scripts of plain locks are in [`scripts`](super::scripts);
//! the lock kinds (`node::kind`) pick between them.

use std::sync::LazyLock;

use super::script::{Lua, lua};
#[cfg(doc)]
use crate::value::HOLD_ID_MARK;

/// Lua shared by the scripts: `now()`, the node's clock in milliseconds,
/// and `refit(key, now)`, which gives `key` the TTL of the latest expiry
/// among its holds (deleting it when every hold has expired). Each hold
/// field stores its own expiry, so that releasing or extending one hold
/// leaves the key exactly as long-lived as the holds that remain. The
/// expiries are on the node's clock, as Redis's own key expiry is.
pub(crate) const PRELUDE: &str = r"
local function now()
  local t = redis.call('time')
  return t[1] * 1000 + math.floor(t[2] / 1000)
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

/// Gives the hold the TTL from now, while the hold exists, unless it has
/// more left (never shortened, as [`EXTEND`](crate::node::scripts::EXTEND));
/// the key then lives until the latest expiry among its holds. Never
/// creates a key.
///
/// KEYS: the lock keys. ARGV[1]: the hold id, ARGV[2]: TTL in milliseconds.
/// Returns 1 when every key has the hold, 0 otherwise (nothing changed).
pub(crate) static REENTRANT_EXTEND: LazyLock<Lua> =
    LazyLock::new(|| with_prelude(REENTRANT_EXTEND_LUA));

/// The body of [`REENTRANT_EXTEND`], after [`PRELUDE`].
pub(crate) const REENTRANT_EXTEND_LUA: &str = r"
for i = 1, #KEYS do
  if redis.call('type', KEYS[i]).ok ~= 'hash'
      or redis.call('hexists', KEYS[i], 'hold:' .. ARGV[1]) == 0 then
    return 0
  end
end
local at = now()
local expiry = at + tonumber(ARGV[2])
local field = 'hold:' .. ARGV[1]
for i = 1, #KEYS do
  if (tonumber(redis.call('hget', KEYS[i], field)) or 0) < expiry then
    redis.call('hset', KEYS[i], field, expiry)
  end
  refit(KEYS[i], at)
end
return 1
";
