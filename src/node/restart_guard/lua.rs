//! The restart guard's Lua: the check every vote script starts with, the
//! lighter one of extensions, and the scripts that read the record, mark a
//! node trusted, set its quarantine or spread a longer one.
//!
//! Every one of them reads the record the same way ([`READ`]) and treats a
//! record of another process, of another replication history (a failover
//! and failback keep the `run_id` but not the `master_replid`), or without
//! a readable `since`, as no record: a new trust period begins with the
//! quarantine of whoever meets it first.

use std::sync::LazyLock;

use crate::node::reentrant::{PRELUDE, REENTRANT_ACQUIRE_LUA, REENTRANT_EXTEND_LUA};
use crate::node::script::{Lua, lua};
use crate::node::scripts::{
    ACQUIRE_ALL_LUA, EXTEND_LUA, EXTEND_OR_MISSING_LUA, FENCE_WRITE_BACK_LUA, FENCED_ACQUIRE_LUA,
    OURS, with_ours,
};

/// Lua that reads the live `run_id`, `master_replid` (nil where `INFO
/// replication` does not show it) and the node's clock (ms) into `run`,
/// `repl` and `at`, the record (`run_id`, `since`, `q`, `replid`) into
/// `rec`, and the quarantine it keeps into `kept` (nil when it keeps
/// none); `fresh` when the record is not this process's in this
/// replication history. `begin(since, q)` starts a trust period;
/// `adopt()` gives a record of an earlier version, which has no
/// `replid`, the live one. Expects `guard_key`. A field of `INFO` is
/// found by a plain search for its line's start (`\n` and its name), and
/// its value is the rest of that line: a pattern searched from the start
/// would be tried at every position before it, and even one anchored
/// there tests its value a character at a time, in every vote. `TIME`'s
/// strings go into arithmetic as they are: Lua 5.1's `tonumber` parses a
/// string twice.
const READ: &str = r"
local function info_field(text, name)
  local at = string.find(text, name, 1, true)
  if not at then return nil end
  local from = at + #name
  local to = string.find(text, '\r', from, true)
  local value = string.sub(text, from, to and to - 1 or -1)
  if value ~= '' then return value end
end
local run = info_field(redis.call('info', 'server'), '\nrun_id:')
if not run then return redis.error_reply('ERR restart guard: no run_id in INFO server') end
local repl = info_field(redis.call('info', 'replication'), '\nmaster_replid:')
local t = redis.call('time')
local at = t[1] * 1000 + math.floor(t[2] / 1000)
local rec = redis.call('hmget', guard_key, 'run_id', 'since', 'q', 'replid')
local kept = tonumber(rec[3])
local fresh = rec[1] ~= run or not tonumber(rec[2]) or (repl and rec[4] and rec[4] ~= repl)
local function begin(since, q)
  redis.call('hset', guard_key, 'run_id', run, 'since', since, 'q', q)
  if repl then redis.call('hset', guard_key, 'replid', repl) end
end
local function adopt()
  if repl and not rec[4] then redis.call('hset', guard_key, 'replid', repl) end
end
";

/// Lua: takes the record's key and the announced quarantine (ms) off the
/// end of KEYS and ARGV, reads the record, and on a new trust period
/// records one that begins now with the announced quarantine (`began` is
/// then true). A record that keeps no quarantine (marked trusted by a
/// client with the guard off) is given the announced one. A record that
/// keeps another quarantine is refused with `QUARANTINE_MISMATCH <kept>
/// <announced> ...`: no vote, no extension.
pub(crate) fn announce() -> String {
    format!(
        r"
local guard_key = table.remove(KEYS)
local guard_q = table.remove(ARGV)
{READ}
local q = tonumber(guard_q)
local began = false
if fresh then
  begin(string.format('%d', at), string.format('%d', q))
  began = true
else
  adopt()
  if not kept then
    redis.call('hset', guard_key, 'q', string.format('%d', q))
  elseif kept ~= q then
    return redis.error_reply('QUARANTINE_MISMATCH ' .. string.format('%d', kept) .. ' ' ..
      string.format('%d', q) .. ' ms: this node keeps a restart-guard quarantine of ' ..
      string.format('%d', kept) .. ' ms, this client announces ' .. string.format('%d', q) ..
      ' ms; max_ttl and the drift settings must be the same on every client of the nodes')
  end
end
"
    )
}

/// The guard every vote script starts with: [`announce`], then a refusal
/// while the quarantine lasts (`QUARANTINED <ms left> ...`). It leaves
/// `guard_key` and `guard_since` (the record's `since`, a string) for the
/// body, which sees its usual KEYS and ARGV.
fn vote_guard() -> String {
    format!(
        r"{}
local function refuse(left)
  return redis.error_reply('QUARANTINED ' .. string.format('%d', left) .. ' ms left: this ' ..
    'node restarted, lost its data or is new, and votes once every lock it may have ' ..
    'forgotten has expired')
end
if began then return refuse(q) end
local guard_since = rec[2]
local since = tonumber(guard_since)
if since ~= 0 and since + q > at then return refuse(since + q - at) end
",
        announce()
    )
}

/// [`ACQUIRE_ALL`](crate::node::scripts::ACQUIRE_ALL) behind the guard
/// (one key or several). KEYS and ARGV as there, then the record's key
/// and the quarantine in ms.
pub(crate) static GUARDED_ACQUIRE_ALL: LazyLock<Lua> =
    LazyLock::new(|| lua(&format!("{}{ACQUIRE_ALL_LUA}", vote_guard())));

/// [`REENTRANT_ACQUIRE`](crate::node::reentrant::REENTRANT_ACQUIRE) behind
/// the guard.
pub(crate) static GUARDED_REENTRANT_ACQUIRE: LazyLock<Lua> =
    LazyLock::new(|| lua(&format!("{}{PRELUDE}{REENTRANT_ACQUIRE_LUA}", vote_guard())));

/// [`FENCED_ACQUIRE`](crate::node::scripts::FENCED_ACQUIRE) behind the
/// guard. A counter not known intact (not written back in this trust
/// period, not vouched for, and the node not trusted at once) comes back
/// prefixed with `?`.
pub(crate) static GUARDED_FENCED_ACQUIRE: LazyLock<Lua> = LazyLock::new(|| {
    lua(&format!(
        r"{}
local fence_known = guard_since == '0' or redis.call('hget', guard_key, 'counters') == guard_since
local function counted(i, c)
  if not fence_known and redis.call('hget', guard_key, KEYS[#KEYS / 2 + i]) ~= guard_since then
    return '?' .. c
  end
  return c
end
{FENCED_ACQUIRE_LUA}",
        vote_guard()
    ))
});

/// [`EXTEND`](crate::node::scripts::EXTEND) that announces the quarantine
/// first ([`announce`]): an extension is no new vote, so a quarantine does
/// not stop it, but it gives a node that restarted its holder's quarantine,
/// and a node that keeps another one refuses it.
pub(crate) static GUARDED_EXTEND: LazyLock<Lua> = LazyLock::new(|| announced(EXTEND_LUA));

/// `body` after what every guarded extension runs before its own: the
/// announcement of the quarantine and `ours` (the simulation's negative
/// controls make theirs with it too).
pub(crate) fn announced(body: &str) -> Lua {
    lua(&format!("{}{OURS}{body}", announce()))
}

/// [`EXTEND_OR_MISSING`](crate::node::scripts::EXTEND_OR_MISSING) that
/// announces the quarantine first, as [`GUARDED_EXTEND`].
pub(crate) static GUARDED_EXTEND_OR_MISSING: LazyLock<Lua> =
    LazyLock::new(|| announced(EXTEND_OR_MISSING_LUA));

/// [`REENTRANT_EXTEND`](crate::node::reentrant::REENTRANT_EXTEND) that
/// announces the quarantine first, as [`GUARDED_EXTEND`].
pub(crate) static GUARDED_REENTRANT_EXTEND: LazyLock<Lua> =
    LazyLock::new(|| lua(&format!("{}{PRELUDE}{REENTRANT_EXTEND_LUA}", announce())));

/// [`FENCE_WRITE_BACK`](crate::node::scripts::FENCE_WRITE_BACK) that also
/// marks each counter as written in the node's current trust period. KEYS
/// and ARGV as there, then the record's key. No vote: no guard.
pub(crate) static GUARDED_FENCE_WRITE_BACK: LazyLock<Lua> = LazyLock::new(|| {
    with_ours(&format!(
        r"
local guard_key = table.remove(KEYS)
local since = redis.call('hget', guard_key, 'since')
local function raised(i)
  if since and since ~= '0' then redis.call('hset', guard_key, KEYS[#KEYS / 2 + i], since) end
end
{FENCE_WRITE_BACK_LUA}"
    ))
});

/// Reads the guard's state without writing. KEYS[1]: the record, ARGV[1]:
/// this client's quarantine in ms. Returns `{state, ms, kept}`: `trusted`
/// (0), `quarantined` (ms left, by the quarantine the node keeps) or
/// `untrusted` (no record for this process: the next vote starts a
/// quarantine of ms); `kept` is the quarantine the node keeps, -1 for none.
pub(crate) static TRUST_STATUS: LazyLock<Lua> = LazyLock::new(|| {
    lua(&format!(
        r"
local guard_key = KEYS[1]
{READ}
local q = kept or tonumber(ARGV[1])
if fresh then return {{'untrusted', tonumber(ARGV[1]), -1}} end
local since = tonumber(rec[2])
if since ~= 0 and since + q > at then return {{'quarantined', since + q - at, kept or -1}} end
return {{'trusted', 0, kept or -1}}
"
    ))
});

/// Marks the live process trusted at once (`since` 0) with this client's
/// quarantine. KEYS[1]: the record, ARGV[1]: the quarantine in ms, or
/// empty with the guard off (the record's quarantine is then left as it
/// is, or recorded by the first guarded vote).
pub(crate) static MARK_TRUSTED: LazyLock<Lua> = LazyLock::new(|| {
    lua(&format!(
        r"
local guard_key = KEYS[1]
{READ}
begin('0', ARGV[1] ~= '' and ARGV[1] or rec[3] or '')
return 1
"
    ))
});

/// Gives every node still in quarantine the longer of two quarantines met
/// (see `spread`). KEYS[1]: the record, ARGV[1]: the longer quarantine in
/// ms. A node with no record for its process begins a trust period with
/// it; a node whose trust period began less than that long ago and that
/// keeps a shorter one keeps it instead (and so refuses votes until it has
/// passed). Returns 1 when it wrote, else 0 (a node trusted at once, or
/// since longer than that, is left as it is).
pub(crate) static SPREAD: LazyLock<Lua> = LazyLock::new(|| {
    lua(&format!(
        r"
local guard_key = KEYS[1]
{READ}
local big = tonumber(ARGV[1])
if fresh then
  begin(string.format('%d', at), ARGV[1])
  return 1
end
adopt()
local since = tonumber(rec[2])
if since ~= 0 and since + big > at and (not kept or kept < big) then
  redis.call('hset', guard_key, 'q', ARGV[1])
  return 1
end
return 0
"
    ))
});

/// Makes the node keep this client's quarantine, whatever it kept (an
/// operator's decision: see `Redlock::set_node_quarantine`); a node with
/// no record for its process begins a trust period with it, as a vote
/// would. KEYS[1]: the record, ARGV[1]: the quarantine in ms. Returns 1.
pub(crate) static SET_QUARANTINE: LazyLock<Lua> = LazyLock::new(|| {
    lua(&format!(
        r"
local guard_key = KEYS[1]
{READ}
if fresh then
  begin(string.format('%d', at), ARGV[1])
else
  adopt()
  redis.call('hset', guard_key, 'q', ARGV[1])
end
return 1
"
    ))
});

/// Vouches for fence counters: records them as known intact in the
/// node's current trust period (what a token's write-back records), and
/// touches nothing else. KEYS[1]: the record, then the counter keys (none:
/// every counter of the node, field `counters`); ARGV[1]: this client's
/// quarantine in ms. A node with no record for its process begins a trust
/// period first, as a vote would (quarantine included). Returns 1.
pub(crate) static VOUCH_COUNTERS: LazyLock<Lua> = LazyLock::new(|| {
    lua(&format!(
        r"
local guard_key = KEYS[1]
{READ}
local since = rec[2]
if fresh then
  since = string.format('%d', at)
  begin(since, ARGV[1])
else
  adopt()
end
if since ~= '0' and #KEYS == 1 then
  redis.call('hset', guard_key, 'counters', since)
elseif since ~= '0' then
  for i = 2, #KEYS do redis.call('hset', guard_key, KEYS[i], since) end
end
return 1
"
    ))
});
