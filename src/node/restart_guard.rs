//! The restart guard on one node: the check that every vote script runs
//! first, its record, and the scripts that read it (for the start-up
//! checks and inspection), mark the node trusted at once, or spread a
//! longer quarantine.
//!
//! The record is a hash without TTL, `{prefix}restart-guard:node`, in the
//! same database as the locks:
//!
//! | field | value |
//! |---|---|
//! | `run_id` | the `run_id` (`INFO server`) of the process that began the trust period |
//! | `replid` | its `master_replid` (`INFO replication`) then: a failover and failback change it, not the `run_id` |
//! | `since` | when it began, node `TIME` in ms; `0`: trusted at once (`init_nodes`) |
//! | `q` | the quarantine, in ms, the node keeps: that of the client that began the trust period |
//! | `{prefix}fence:{resource}` | `since` of the trust period in which that counter was last written back (or vouched for) |
//! | `counters` | `since` of the trust period in which every counter was vouched for |
//!
//! The quarantine is a deployment constant: every client of the nodes must
//! announce the same one. A vote script passes the guard only when the
//! live `run_id` and `master_replid` are the record's, the announced
//! quarantine is the one the record keeps, and `since + q` has passed (or
//! `since` is 0). A missing record (or one without a readable `since`),
//! another `run_id` (a restart under any persistence mode, a failover to
//! another process, `FLUSHALL`, a lost record) or another `master_replid`
//! (the process was a replica meanwhile: a failover and failback) starts a
//! new trust period with the announced quarantine and
//! refuses (`QUARANTINED <ms left> ...`, [`NodeError::Quarantined`]). A
//! record that keeps another quarantine refuses every vote and extension
//! of this client (`QUARANTINE_MISMATCH <kept> <ours> ...`,
//! [`NodeError::QuarantineMismatch`]), and the client spreads the longer
//! of the two to every node still in quarantine ([`spread`]): a restarted
//! node whose first voter announced a shorter quarantine than the others
//! keep gets the longer one as soon as any client meets both.

mod lua;
mod spread;

use std::sync::Arc;
use std::time::Duration;

pub(crate) use self::lua::*;
pub(crate) use self::spread::Peers;

use super::request::{Grant, Request};
use super::script::Lua;
use super::{Node, NodeError, NodeResult};

/// What a node with the guard on needs to know: where its record is, the
/// quarantine this client announces, and its peers (to spread a longer
/// quarantine to).
#[derive(Clone, Debug)]
pub(crate) struct RestartGuard {
    /// `{prefix}restart-guard:node`.
    pub(crate) key: String,
    /// The quarantine in whole ms, as the scripts read it.
    pub(crate) quarantine_ms: String,
    /// The quarantine.
    ours: Duration,
    /// Every node of the lock, shared by their guards.
    pub(crate) peers: Arc<Peers>,
}

impl RestartGuard {
    pub(crate) fn new(key: String, quarantine: Duration) -> Self {
        let millis = u64::try_from(quarantine.as_millis()).unwrap_or(u64::MAX);
        RestartGuard {
            key,
            quarantine_ms: millis.to_string(),
            ours: Duration::from_millis(millis),
            peers: Arc::default(),
        }
    }

    /// The quarantine this client announces.
    pub(crate) fn quarantine(&self) -> Duration {
        self.ours
    }
}

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

/// [`Trust`] and the quarantine the node keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TrustStatus {
    /// Whether it votes.
    pub(crate) trust: Trust,
    /// The quarantine its record keeps; `None` without a record for its
    /// process, or a record that keeps none yet.
    pub(crate) kept: Option<Duration>,
}

/// `QUARANTINED <ms> ...` or `QUARANTINE_MISMATCH <kept> <ours> ...` from
/// a guarded script as a typed error; any other error as it is.
pub(crate) fn refusal(error: NodeError) -> NodeError {
    let NodeError::Failed(failure) = &error else {
        return error;
    };
    let mut numbers = failure
        .message()
        .split_whitespace()
        .filter_map(|word| word.parse::<u64>().ok())
        .map(Duration::from_millis);
    match failure.code() {
        Some("QUARANTINED") => match numbers.next() {
            Some(left) => NodeError::Quarantined(left),
            None => error,
        },
        Some("QUARANTINE_MISMATCH") => match (numbers.next(), numbers.next()) {
            (Some(kept), Some(ours)) => NodeError::QuarantineMismatch { kept, ours },
            _ => error,
        },
        _ => error,
    }
}

impl Node {
    /// The guard's state, read without writing.
    pub(crate) async fn trust_status(&self, guard: &RestartGuard) -> NodeResult<TrustStatus> {
        let keys = [guard.key.clone()];
        let request = Request::script(&TRUST_STATUS, &keys, &[&guard.quarantine_ms], Grant::NotNil);
        let (state, ms, kept): (String, u64, i64) = self.send_bounded(&request).await?;
        let ms = Duration::from_millis(ms);
        let trust = match state.as_str() {
            "trusted" => Trust::Trusted,
            "quarantined" => Trust::Quarantined(ms),
            _ => Trust::Untrusted(ms),
        };
        let kept = u64::try_from(kept).ok().map(Duration::from_millis);
        Ok(TrustStatus { trust, kept })
    }

    /// Marks the node's live process trusted at once, with the quarantine
    /// `guard` announces (none: leave the record's).
    pub(crate) async fn mark_trusted(
        &self,
        guard: Option<&RestartGuard>,
        key: &str,
    ) -> NodeResult<()> {
        let keys = [key.to_owned()];
        let q = guard.map_or("", |g| g.quarantine_ms.as_str());
        let request = Request::script(&MARK_TRUSTED, &keys, &[q], Grant::NotNil);
        let _: i64 = self.send_bounded(&request).await?;
        Ok(())
    }

    /// Makes the node keep the quarantine `guard` announces.
    pub(crate) async fn set_quarantine(&self, guard: &RestartGuard) -> NodeResult<()> {
        let keys = [guard.key.clone()];
        let request = Request::script(
            &SET_QUARANTINE,
            &keys,
            &[&guard.quarantine_ms],
            Grant::NotNil,
        );
        let _: i64 = self.send_bounded(&request).await?;
        Ok(())
    }

    /// Vouches for the fence counters at `counters` (their keys; none:
    /// every counter) on this node, in its current trust period.
    pub(crate) async fn vouch_counters(
        &self,
        guard: &RestartGuard,
        counters: &[String],
    ) -> NodeResult<()> {
        let keys = std::iter::once(&guard.key).chain(counters);
        let args = [guard.quarantine_ms.as_str()];
        let request = Request::script_parts(&VOUCH_COUNTERS, keys, &args, Grant::NotNil);
        let _: i64 = self.send_bounded(&request).await?;
        Ok(())
    }

    /// [`refusal`], and a mismatch met spreads the longer quarantine.
    pub(crate) fn guard_refusal(&self, error: NodeError) -> NodeError {
        let error = refusal(error);
        if let (NodeError::QuarantineMismatch { kept, ours }, Some(guard)) =
            (&error, &self.restart_guard)
        {
            spread::spread(guard, self.name(), (*kept).max(*ours));
        }
        error
    }
}

impl Request {
    /// `script` behind the restart `guard`: `keys` then the guard's record,
    /// `args` then the quarantine this client announces.
    fn guarded(
        script: &'static Lua,
        guard: &RestartGuard,
        keys: &[String],
        args: &[&str],
        grant: Grant,
    ) -> Self {
        let keys = keys.iter().chain(std::iter::once(&guard.key));
        let mut all = Vec::with_capacity(args.len() + 1);
        all.extend_from_slice(args);
        all.push(guard.quarantine_ms.as_str());
        Request::script_parts(script, keys, &all, grant)
    }

    /// A vote script: `plain`, or with the restart `guard` on its guarded
    /// version `guarded` ([`guarded`](Self::guarded)).
    pub(crate) fn vote_script(
        (plain, guarded): (&'static Lua, &'static Lua),
        guard: Option<&RestartGuard>,
        keys: &[String],
        args: &[&str],
        grant: Grant,
    ) -> Self {
        match guard {
            Some(guard) => Request::guarded(guarded, guard, keys, args, grant),
            None => Request::script(plain, keys, args, grant),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::failure::{FailureKind, NodeFailure};

    fn server_error(text: &str) -> NodeError {
        let reply = format!("-{text}\r\n");
        match redis::parse_redis_value(reply.as_bytes()) {
            Ok(redis::Value::ServerError(e)) => NodeError::redis(&redis::RedisError::from(e)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn quarantine_refusals_are_typed_with_their_numbers() {
        let left = refusal(server_error(
            "QUARANTINED 1500 ms left: this node restarted",
        ));
        assert!(matches!(left, NodeError::Quarantined(d) if d == Duration::from_millis(1500)));
        let mismatch = refusal(server_error(
            "QUARANTINE_MISMATCH 20202 303 ms: this node keeps a restart-guard quarantine",
        ));
        assert!(
            matches!(mismatch, NodeError::QuarantineMismatch { kept, ours }
                if kept == Duration::from_millis(20_202) && ours == Duration::from_millis(303)),
            "{mismatch:?}"
        );
        let other = refusal(NodeError::Failed(NodeFailure::new(FailureKind::Other, "x")));
        assert!(matches!(other, NodeError::Failed(_)));
    }
}
