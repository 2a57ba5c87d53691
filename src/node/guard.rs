//! The restart guard on one node: the check that every vote script runs
//! first, its record, and the scripts that read it (for the start-up
//! checks and inspection) or mark the node trusted at once.
//!
//! The record is a hash without TTL, `{prefix}restart-guard:node`, in the
//! same database as the locks:
//!
//! | field | value |
//! |---|---|
//! | `run_id` | the `run_id` (`INFO server`) of the process that began the trust period |
//! | `since` | when it began, node `TIME` in ms; `0`: trusted at once (`init_nodes`) |
//! | `q` | the longest quarantine, in ms, any client announced; only grows |
//! | `{prefix}fence:{resource}` | `since` of the trust period in which that counter was last written back |
//!
//! A vote script passes the guard only when the live `run_id` is the
//! record's and `since + q` has passed (or `since` is 0). A missing record
//! (or one without a readable `since`) or another `run_id` (a restart under any persistence mode, a failover,
//! `FLUSHALL`, a lost record) starts a new trust period and refuses. The
//! refusal is the error `QUARANTINED <ms left> ...`, which the node layer
//! turns into [`NodeError::Quarantined`].

use std::sync::LazyLock;
use std::time::Duration;

use super::acl::{Lua, lua};
use super::call::{Grant, Request};
use super::reentrant::{PRELUDE, REENTRANT_ACQUIRE_LUA};
use super::scripts::{ACQUIRE_ALL_LUA, FENCE_WRITE_BACK_LUA, with_ours};
use super::{Node, NodeError, NodeResult};

/// What a node with the guard on needs to know: where its record is and
/// the quarantine this client announces.
#[derive(Clone, Debug)]
pub(crate) struct Guard {
    /// `{prefix}restart-guard:node`.
    pub(crate) key: String,
    /// The quarantine in whole ms, as the scripts read it.
    pub(crate) quarantine_ms: String,
}

impl Guard {
    pub(crate) fn new(key: String, quarantine: Duration) -> Self {
        let millis = u64::try_from(quarantine.as_millis()).unwrap_or(u64::MAX);
        Guard {
            key,
            quarantine_ms: millis.to_string(),
        }
    }
}

/// Lua that reads the live `run_id` and the node's clock (ms) into
/// `run` and `at`, and the record into `rec` and `q` (the larger of
/// ARGV's and the record's quarantine). Expects `guard_key` and `guard_q`.
const READ: &str = r"
local run = string.match(redis.call('info', 'server'), 'run_id:(%x+)')
if not run then return redis.error_reply('ERR restart guard: no run_id in INFO server') end
local t = redis.call('time')
local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rec = redis.call('hmget', guard_key, 'run_id', 'since', 'q')
local kept = tonumber(rec[3]) or 0
local q = math.max(tonumber(guard_q) or 0, kept)
";

/// The guard every vote script starts with. It takes its own KEY and ARGV
/// off the end (the record's key, the announced quarantine in ms), so the
/// script's body sees its usual KEYS and ARGV; it leaves `guard_key` and
/// `guard_since` (the record's `since`, a string) for the body.
fn guard_lua() -> String {
    format!(
        r"
local guard_key = table.remove(KEYS)
local guard_q = table.remove(ARGV)
{READ}
local function refuse(left)
  return redis.error_reply('QUARANTINED ' .. string.format('%d', left) .. ' ms left: this ' ..
    'node restarted, lost its data or is new, and votes once every lock it may have ' ..
    'forgotten has expired')
end
if rec[1] ~= run or not tonumber(rec[2]) then
  redis.call('hset', guard_key, 'run_id', run, 'since', string.format('%d', at),
    'q', string.format('%d', q))
  return refuse(q)
end
if kept < q then redis.call('hset', guard_key, 'q', string.format('%d', q)) end
local guard_since = rec[2]
local since = tonumber(guard_since)
if since ~= 0 and since + q > at then return refuse(since + q - at) end
"
    )
}

/// [`ACQUIRE_ALL`](super::scripts::ACQUIRE_ALL) behind the guard (one key
/// or several). KEYS and ARGV as there, then the record's key and the
/// quarantine in ms.
pub(crate) static GUARDED_ACQUIRE_ALL: LazyLock<Lua> =
    LazyLock::new(|| lua(&format!("{}{ACQUIRE_ALL_LUA}", guard_lua())));

/// [`REENTRANT_ACQUIRE`](super::scripts::REENTRANT_ACQUIRE) behind the guard.
pub(crate) static GUARDED_REENTRANT_ACQUIRE: LazyLock<Lua> =
    LazyLock::new(|| lua(&format!("{}{PRELUDE}{REENTRANT_ACQUIRE_LUA}", guard_lua())));

/// [`FENCED_ACQUIRE`](super::scripts::FENCED_ACQUIRE) behind the guard.
/// A counter not known intact (not written back in this trust period,
/// and the node not trusted at once) comes back prefixed with `?`.
pub(crate) static GUARDED_FENCED_ACQUIRE: LazyLock<Lua> = LazyLock::new(|| {
    lua(&format!(
        r"{}
local n = #KEYS / 2
for i = 1, n do
  if redis.call('exists', KEYS[i]) == 1 then return false end
end
local counters = {{}}
for i = 1, n do
  local c = redis.call('get', KEYS[n + i])
  if c and not string.match(c, '^%d+$') then
    return redis.error_reply('fence counter ' .. KEYS[n + i] .. ' is not a number')
  end
  c = c or '0'
  if guard_since ~= '0' and redis.call('hget', guard_key, KEYS[n + i]) ~= guard_since then
    c = '?' .. c
  end
  counters[i] = c
end
for i = 1, n do
  redis.call('set', KEYS[i], ARGV[1], 'px', ARGV[2])
end
return counters
",
        guard_lua()
    ))
});

/// [`FENCE_WRITE_BACK`](super::scripts::FENCE_WRITE_BACK) that also marks
/// each counter as written in the node's current trust period. KEYS and
/// ARGV as there, then the record's key. No vote: no guard.
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

/// Reads the guard's state without writing. KEYS[1]: the record,
/// ARGV[1]: the quarantine in ms. Returns `{state, ms}`: `trusted` (0),
/// `quarantined` (ms left) or `untrusted` (no record for this process: the
/// next vote starts a quarantine of ms).
pub(crate) static TRUST_STATUS: LazyLock<Lua> = LazyLock::new(|| {
    lua(&format!(
        r"
local guard_key, guard_q = KEYS[1], ARGV[1]
{READ}
if rec[1] ~= run or not tonumber(rec[2]) then return {{'untrusted', q}} end
local since = tonumber(rec[2])
if since ~= 0 and since + q > at then return {{'quarantined', since + q - at}} end
return {{'trusted', 0}}
"
    ))
});

/// Marks the live process trusted at once (`since` 0), keeping the
/// larger quarantine. KEYS[1]: the record, ARGV[1]: the quarantine in ms.
pub(crate) static MARK_TRUSTED: LazyLock<Lua> = LazyLock::new(|| {
    lua(&format!(
        r"
local guard_key, guard_q = KEYS[1], ARGV[1]
{READ}
redis.call('hset', guard_key, 'run_id', run, 'since', '0', 'q', string.format('%d', q))
return 1
"
    ))
});

/// The guard's state on one node, from [`Node::trust_status`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trust {
    /// It votes.
    Trusted,
    /// It refuses to vote for this long.
    Quarantined(Duration),
    /// No record for its process: its next vote starts a quarantine.
    Untrusted(Duration),
}

/// `QUARANTINED <ms> ...` from a guarded script as a typed error; any
/// other error as it is.
pub(crate) fn quarantined(error: NodeError) -> NodeError {
    let NodeError::Failed(failure) = &error else {
        return error;
    };
    if failure.code() != Some("QUARANTINED") {
        return error;
    }
    let left = failure
        .message()
        .split_whitespace()
        .find_map(|word| word.parse::<u64>().ok());
    match left {
        Some(ms) => NodeError::Quarantined(Duration::from_millis(ms)),
        None => error,
    }
}

impl Node {
    /// The guard's state, read without writing.
    pub(crate) async fn trust_status(&self, guard: &Guard) -> NodeResult<Trust> {
        let keys = [guard.key.clone()];
        let request = Request::script(&TRUST_STATUS, &keys, &[&guard.quarantine_ms], Grant::NotNil);
        let (state, ms): (String, u64) = self.send_bounded(&request).await?;
        let ms = Duration::from_millis(ms);
        Ok(match state.as_str() {
            "trusted" => Trust::Trusted,
            "quarantined" => Trust::Quarantined(ms),
            _ => Trust::Untrusted(ms),
        })
    }

    /// Marks the node's live process trusted at once.
    pub(crate) async fn mark_trusted(&self, guard: &Guard) -> NodeResult<()> {
        let keys = [guard.key.clone()];
        let request = Request::script(&MARK_TRUSTED, &keys, &[&guard.quarantine_ms], Grant::NotNil);
        let _: i64 = self.send_bounded(&request).await?;
        Ok(())
    }
}
