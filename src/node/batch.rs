//! Extensions of many locks on one node in one script call.
//!
//! Many held locks come due for extension together (their watchdogs wake
//! on a shared grid of instants, `watchdog::on_grid`).
//! Each extension round's call to a node joins the node's [`Queue`]; the
//! call that finds the queue empty lets its own task's other calls join
//! (one yield), then starts a task that first lets the runtime run the
//! other tasks' calls ready at that instant (one more yield), then takes
//! the queue and sends each group of calls that run the same script
//! as one `EVALSHA` of that script's batched twin, whose reply is one
//! result per lock, the reply the lock's own script would have given. A
//! call alone in its group is sent as it is.
//!
//! Nothing of a round changes: each call still waits for its node's call
//! of the lock's previous round before it joins the queue, counts against
//! its round's deadline while it waits there, and a call whose round gave
//! up before the queue was taken is not sent at all. What changes is the
//! node's work: one command, one script call and, with the restart guard,
//! one reading of the guard's record, for every lock of the batch.

use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use redis::{Arg, Cmd, FromRedisValue, Value};
use tokio::sync::oneshot;

use super::request::{Batchable, Grant, Request};
use super::restart_guard::announce;
use super::script::{Lua, lua};
use super::{Node, NodeError, NodeResult};
use crate::error::failure::{FailureKind, NodeFailure};

/// The most calls one batched `EVALSHA` carries.
const MOST: usize = 128;

/// Lua: the batch of the extend family, after `prelude` and a function
/// `other(key, v)` that gives the result for a lock whose key does not
/// hold our value (`v`, false when missing or not a string).
///
/// KEYS: one key per lock. ARGV[1]: the TTL in milliseconds, the same for
/// every lock of the batch; ARGV[1 + i]: lock i's value. Returns one
/// result per lock, in order: 1 when the key holds the lock's value
/// (marked or not) and now lives at least the TTL (never shortened, as
/// [`EXTEND`](super::scripts::EXTEND)), else what `other` says. The
/// values are read with one `MGET`; the TTL is raised with `PEXPIRE ..
/// GT` where the server has it (7.0 and later), else after a `PTTL`.
const BATCH_LUA: &str = r"
local unpack = table.unpack or unpack
local ttl = ARGV[1]
local gt = (redis.REDIS_VERSION_NUM or 0) >= 458752
local found = redis.call('mget', unpack(KEYS))
local results = {}
for i = 1, #KEYS do
  local v, mine = found[i], ARGV[i + 1]
  if v == mine or v == mine .. '+' then
    if gt then
      redis.call('pexpire', KEYS[i], ttl, 'gt')
    elseif redis.call('pttl', KEYS[i]) < tonumber(ttl) then
      redis.call('pexpire', KEYS[i], ttl)
    end
    results[i] = 1
  else
    results[i] = other(KEYS[i], v)
  end
end
return results
";

/// `other` for [`EXTEND`](super::scripts::EXTEND)'s batch: 0.
const NOT_OURS: &str = "local function other(key, v) return 0 end\n";

/// `other` for [`EXTEND_OR_MISSING`](super::scripts::EXTEND_OR_MISSING)'s
/// batch: -1 when the key is missing, 0 when it holds something else.
const MISSING_OR_NOT_OURS: &str = r"
local function other(key, v)
  if not v and redis.call('exists', key) == 0 then return -1 end
  return 0
end
";

fn batched(prelude: &str, other: &str) -> Lua {
    lua(&format!("{prelude}{other}{BATCH_LUA}"))
}

/// [`EXTEND`](super::scripts::EXTEND) for many locks.
pub(crate) static BATCHED_EXTEND: LazyLock<Lua> = LazyLock::new(|| batched("", NOT_OURS));

/// [`GUARDED_EXTEND`](super::restart_guard::GUARDED_EXTEND) for many
/// locks: the quarantine is announced once.
pub(crate) static GUARDED_BATCHED_EXTEND: LazyLock<Lua> =
    LazyLock::new(|| batched(&announce(), NOT_OURS));

/// [`EXTEND_OR_MISSING`](super::scripts::EXTEND_OR_MISSING) for many locks.
pub(crate) static BATCHED_EXTEND_OR_MISSING: LazyLock<Lua> =
    LazyLock::new(|| batched("", MISSING_OR_NOT_OURS));

/// [`GUARDED_EXTEND_OR_MISSING`](super::restart_guard::GUARDED_EXTEND_OR_MISSING)
/// for many locks.
pub(crate) static GUARDED_BATCHED_EXTEND_OR_MISSING: LazyLock<Lua> =
    LazyLock::new(|| batched(&announce(), MISSING_OR_NOT_OURS));

/// The batched twins of `EXTEND` and its guarded version.
pub(crate) static EXTEND_TWINS: (Batchable, Batchable) = (
    Batchable {
        script: &BATCHED_EXTEND,
        guarded: false,
    },
    Batchable {
        script: &GUARDED_BATCHED_EXTEND,
        guarded: true,
    },
);

/// The batched twins of `EXTEND_OR_MISSING` and its guarded version.
pub(crate) static EXTEND_OR_MISSING_TWINS: (Batchable, Batchable) = (
    Batchable {
        script: &BATCHED_EXTEND_OR_MISSING,
        guarded: false,
    },
    Batchable {
        script: &GUARDED_BATCHED_EXTEND_OR_MISSING,
        guarded: true,
    },
);

/// One call waiting in a node's queue.
struct Entry {
    request: Arc<Request>,
    twin: &'static Batchable,
    reply: oneshot::Sender<NodeResult<Value>>,
}

/// A node's calls waiting to be sent together.
#[derive(Default)]
pub(crate) struct Queue {
    waiting: Mutex<Vec<Entry>>,
}

impl Queue {
    /// Adds `entry`; true when the queue was empty (the caller starts the
    /// task that sends it).
    fn push(&self, entry: Entry) -> bool {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        waiting.push(entry);
        waiting.len() == 1
    }

    fn take(&self) -> Vec<Entry> {
        std::mem::take(&mut *self.waiting.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The parts of one lock's call in a batch: its key, its value and TTL
/// and, for a guarded script, the record's key and the quarantine. `None`
/// for a call not of that shape (a lock of several keys is extended on
/// its own).
#[derive(PartialEq, Eq)]
struct Parts<'a> {
    key: &'a [u8],
    value: &'a [u8],
    ttl: &'a [u8],
    tail: Option<(&'a [u8], &'a [u8])>,
}

fn parts(cmd: &Cmd, guarded: bool) -> Option<Parts<'_>> {
    let mut args = cmd.args_iter().skip(2).map(|arg| match arg {
        Arg::Simple(bytes) => Some(bytes),
        _ => None,
    });
    let mut next = || args.next().flatten();
    let count = next()?;
    let key = next()?;
    let record = if guarded { Some(next()?) } else { None };
    let (value, ttl) = (next()?, next()?);
    let tail = match record {
        Some(record) => Some((record, next()?)),
        None => None,
    };
    let expected: &[u8] = if guarded { b"2" } else { b"1" };
    (count == expected && next().is_none()).then_some(Parts {
        key,
        value,
        ttl,
        tail,
    })
}

/// Whether two calls may share a batch: the same TTL and, when guarded,
/// the same record and quarantine (always true of one client's calls to
/// one node; checked, not assumed).
fn shareable(a: &Parts<'_>, b: &Parts<'_>) -> bool {
    a.ttl == b.ttl && a.tail == b.tail
}

/// One `EVALSHA` of `twin` carrying `calls` (all [`shareable`]).
fn combined(twin: &Batchable, calls: &[&Parts<'_>]) -> Cmd {
    let first = calls.first();
    let tail = first.and_then(|c| c.tail);
    let mut cmd = Cmd::new();
    cmd.arg("EVALSHA")
        .arg(twin.script.get_hash())
        .arg(calls.len() + usize::from(tail.is_some()));
    for call in calls {
        cmd.arg(call.key);
    }
    if let Some((record, _)) = tail {
        cmd.arg(record);
    }
    cmd.arg(first.map_or(&b"0"[..], |c| c.ttl));
    for call in calls {
        cmd.arg(call.value);
    }
    if let Some((_, quarantine)) = tail {
        cmd.arg(quarantine);
    }
    cmd
}

impl Request {
    /// This request, sent in a batch with other locks' calls of the same
    /// script on each node when they are due together (`twins`: the
    /// batched script and its guarded version; which one follows from
    /// whether the request is guarded).
    pub(crate) fn batchable(self, twins: &'static (Batchable, Batchable), guarded: bool) -> Self {
        Request {
            batch: Some(if guarded { &twins.1 } else { &twins.0 }),
            ..self
        }
    }
}

impl Node {
    /// [`send`](Node::send) `request`, in a batch with other calls to this
    /// node if it is [`batchable`](Request::batchable).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a call dropped before its batch is sent is not sent.
    pub(crate) async fn send_batched<T: FromRedisValue>(
        self: &Arc<Self>,
        request: &Arc<Request>,
    ) -> NodeResult<T> {
        let Some(twin) = request.batch else {
            return self.send(request).await;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return self.send(request).await;
        };
        let (reply, answer) = oneshot::channel();
        let entry = Entry {
            request: Arc::clone(request),
            twin,
            reply,
        };
        if self.batch.push(entry) {
            // The calls this task makes at the same instant (extensions
            // joined together) join the queue before its sender starts;
            // the sender starts however this wait ends, dropped included.
            let starter = Starter {
                node: Arc::clone(self),
                runtime,
            };
            tokio::task::yield_now().await;
            drop(starter);
        }
        let value = answer.await.map_err(|_| lost())??;
        T::from_redis_value(value).map_err(|e| NodeError::redis(&e.into()))
    }
}

/// Starts the task that sends a node's queue when dropped.
struct Starter {
    node: Arc<Node>,
    runtime: tokio::runtime::Handle,
}

impl Drop for Starter {
    fn drop(&mut self) {
        self.runtime.spawn(flush(Arc::clone(&self.node)));
    }
}

/// Why a call has no answer when its batch's task ended without one (its
/// runtime shut down).
fn lost() -> NodeError {
    NodeError::Failed(NodeFailure::new(
        FailureKind::Io,
        "the batch carrying this call ended without an answer",
    ))
}

/// Sends what `node`'s queue holds once the calls ready now have joined.
async fn flush(node: Arc<Node>) {
    tokio::task::yield_now().await;
    let mut entries = node.batch.take();
    // Calls whose round gave up are not sent.
    entries.retain(|entry| !entry.reply.is_closed());
    let sends = grouped(entries)
        .into_iter()
        .map(|(group, batch)| send_group(&node, group, batch));
    futures_util::future::join_all(sends).await;
}

/// The entries in groups that may share a call: the same twin and
/// [`shareable`], at most [`MOST`]; an entry of another shape alone.
/// Each group of several comes with the one request that carries it.
fn grouped(entries: Vec<Entry>) -> Vec<(Vec<Entry>, Option<Request>)> {
    // Each group as the indices of its entries, the first one's parts
    // being what the others match.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let batches: Vec<Option<Request>> = {
        let parsed: Vec<Option<Parts<'_>>> = (entries.iter())
            .map(|entry| parts(&entry.request.cmd, entry.twin.guarded))
            .collect();
        let same = |i: usize| parsed.get(i).and_then(Option::as_ref);
        for (index, entry) in entries.iter().enumerate() {
            let fits = |members: &&mut Vec<usize>| {
                let first = members.first().copied().unwrap_or(index);
                (entries.get(first)).is_some_and(|f| std::ptr::eq(f.twin, entry.twin))
                    && members.len() < MOST
                    && (same(first).zip(same(index))).is_some_and(|(a, b)| shareable(a, b))
            };
            match groups.iter_mut().find(fits) {
                Some(members) => members.push(index),
                None => groups.push(vec![index]),
            }
        }
        (groups.iter())
            .map(|members| {
                let calls: Vec<&Parts<'_>> = members.iter().filter_map(|&i| same(i)).collect();
                let first = members.first().and_then(|&i| entries.get(i))?;
                (calls.len() > 1).then(|| Request {
                    cmd: combined(first.twin, &calls),
                    script: Some(&**first.twin.script),
                    grant: Grant::NotNil,
                    resend_by: (members.iter())
                        .filter_map(|&i| entries.get(i)?.request.resend_by)
                        .min(),
                    batch: None,
                })
            })
            .collect()
    };
    let mut entries: Vec<Option<Entry>> = entries.into_iter().map(Some).collect();
    (groups.into_iter().zip(batches))
        .map(|(members, batch)| {
            let group = (members.into_iter())
                .filter_map(|i| entries.get_mut(i).and_then(Option::take))
                .collect();
            (group, batch)
        })
        .collect()
}

/// Sends one group and hands each call its answer: several in one call of
/// their twin (`batch`), a call alone as it is.
async fn send_group(node: &Node, group: Vec<Entry>, batch: Option<Request>) {
    let Some(request) = batch else {
        return each_alone(node, group).await;
    };
    let answer = bounded(node, &request).await;
    let count = group.len();
    match answer {
        Ok(Value::Array(results)) if results.len() == count => {
            #[cfg(feature = "sim")]
            let results = crossed(results);
            for (entry, result) in group.into_iter().zip(results) {
                let _ = entry.reply.send(Ok(result));
            }
        }
        Ok(other) => {
            let failure = NodeFailure::new(
                FailureKind::Other,
                format!("a batch of {count} extensions was answered {other:?}"),
            );
            for entry in group {
                let _ = entry.reply.send(Err(NodeError::Failed(failure.clone())));
            }
        }
        // A node whose ACL predates batches (no MGET): each on its own,
        // with the script it is allowed.
        Err(NodeError::Failed(failure))
            if matches!(failure.kind(), FailureKind::NoPermission { .. }) =>
        {
            tracing::debug!(node = node.name(), %failure, "batch refused; extensions sent one by one");
            each_alone(node, group).await;
        }
        Err(error) => {
            for entry in group {
                let _ = entry.reply.send(Err(error.clone()));
            }
        }
    }
}

/// Sends each entry's own request at once and hands it the answer.
async fn each_alone(node: &Node, group: Vec<Entry>) {
    let each = group.into_iter().map(|entry| async move {
        let answer = bounded(node, &entry.request).await;
        let _ = entry.reply.send(answer);
    });
    futures_util::future::join_all(each).await;
}

/// [`Node::send`] of `request`, given up after one node timeout: no call
/// it carries waits longer (each is dropped at its round's deadline, at
/// most a node timeout after it joined the queue), and a node that never
/// answers must not keep the sender alive.
async fn bounded(node: &Node, request: &Request) -> NodeResult<Value> {
    match tokio::time::timeout(node.timeout(), node.send::<Value>(request)).await {
        Ok(answer) => answer,
        Err(_) => Err(NodeError::TimedOut),
    }
}

/// Under the simulation's `CrossedBatch` control (a negative control),
/// the results in reverse order.
#[cfg(feature = "sim")]
fn crossed(mut results: Vec<Value>) -> Vec<Value> {
    if crate::controls::on(crate::testkit::sim::Control::CrossedBatch) {
        results.reverse();
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::scripts::EXTEND;

    fn request(keys: &[&str], ttl: &str, guarded: bool) -> Request {
        let mut keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        let mut args = vec!["value", ttl];
        if guarded {
            keys.push("{g}".to_owned());
            args.push("9000");
        }
        Request::script(&EXTEND, &keys, &args, Grant::Int(1))
    }

    /// Extensions of `k1` and `k2` to 3 s.
    fn two(guarded: bool) -> [Request; 2] {
        ["k1", "k2"].map(|key| request(&[key], "3000", guarded))
    }

    fn strings(cmd: &Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|arg| match arg {
                Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => String::new(),
            })
            .collect()
    }

    #[test]
    fn a_batch_lists_every_locks_key_then_the_ttl_then_every_value() {
        let [a, b] = two(false);
        let calls = [parts(&a.cmd, false).unwrap(), parts(&b.cmd, false).unwrap()];
        assert!(shareable(&calls[0], &calls[1]));
        let cmd = combined(&EXTEND_TWINS.0, &[&calls[0], &calls[1]]);
        let hash = BATCHED_EXTEND.get_hash();
        let want = ["EVALSHA", hash, "2", "k1", "k2", "3000", "value", "value"];
        assert_eq!(strings(&cmd), want);
    }

    #[test]
    fn a_guarded_batch_names_the_record_and_the_quarantine_once_at_the_end() {
        let [a, b] = two(true);
        let calls = [parts(&a.cmd, true).unwrap(), parts(&b.cmd, true).unwrap()];
        let cmd = combined(&EXTEND_TWINS.1, &[&calls[0], &calls[1]]);
        let args = strings(&cmd);
        assert_eq!(
            &args[2..],
            ["3", "k1", "k2", "{g}", "3000", "value", "value", "9000"]
        );
    }

    fn entry(request: Request, twin: &'static Batchable) -> Entry {
        let (reply, _) = oneshot::channel();
        Entry {
            request: Arc::new(request),
            twin,
            reply,
        }
    }

    #[test]
    fn a_queue_groups_calls_by_script_and_ttl_and_caps_each_group() {
        let mut entries: Vec<Entry> = (0..MOST + 1)
            .map(|i| entry(request(&[&format!("k{i}")], "3000", false), &EXTEND_TWINS.0))
            .collect();
        entries.push(entry(request(&["t"], "4000", false), &EXTEND_TWINS.0));
        entries.push(entry(
            request(&["m"], "3000", false),
            &EXTEND_OR_MISSING_TWINS.0,
        ));
        entries.push(entry(request(&["a", "b"], "3000", false), &EXTEND_TWINS.0));
        let sizes: Vec<usize> = grouped(entries).iter().map(|(g, _)| g.len()).collect();
        assert_eq!(sizes, [MOST, 1, 1, 1, 1]);
    }

    #[test]
    fn only_calls_of_one_key_and_the_same_ttl_share_a_batch() {
        let several = request(&["k1", "k2"], "3000", false);
        assert!(parts(&several.cmd, false).is_none());
        assert!(parts(&request(&["k"], "3000", false).cmd, true).is_none());
        let odd = Request::script(&EXTEND, &["k".to_owned()], &["v"], Grant::Int(1));
        assert!(parts(&odd.cmd, false).is_none());
        let (a, b) = (
            request(&["k1"], "3000", false),
            request(&["k2"], "4000", false),
        );
        let (a, b) = (parts(&a.cmd, false).unwrap(), parts(&b.cmd, false).unwrap());
        assert!(!shareable(&a, &b));
    }
}
