//! Every typed lock command on one node: plain, multi-resource, fenced
//! and reentrant acquisition, release, extension and re-seeding. Each
//! runs one command or script (see [`scripts`](super::scripts)) bounded by
//! the node timeout, and reads its answer into a type.

use super::guard::{
    GUARDED_ACQUIRE_ALL, GUARDED_FENCE_WRITE_BACK, GUARDED_FENCED_ACQUIRE,
    GUARDED_REENTRANT_ACQUIRE,
};
use super::scripts::{
    ACQUIRE_ALL, EXTEND_OR_MISSING, FENCE_WRITE_BACK, FENCED_ACQUIRE, REENTRANT_ACQUIRE, RELEASE,
    RESEED, extend_script, release_script,
};
use super::{Node, NodeError, NodeResult};
use crate::failure::{FailureKind, NodeFailure};
use crate::value::is_hold_id;

/// What the compare-and-pexpire found on one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// Every key held our value and got the new TTL.
    Extended,
    /// Some key holds another owner's value.
    Foreign,
    /// No key is foreign, but some are missing (a restarted node).
    Missing,
}

impl Node {
    /// `SET key value NX PX ttl` on one key, or the all-or-nothing script on
    /// several; with the restart guard on, always the guarded script. True
    /// when the lock is now ours on this node.
    pub(crate) async fn acquire(
        &self,
        keys: &[String],
        value: &str,
        ttl_ms: &str,
    ) -> NodeResult<bool> {
        if let Some(guard) = &self.guard {
            let args = [value, ttl_ms];
            let set: i64 = self
                .guarded(guard, &GUARDED_ACQUIRE_ALL, keys, &args)
                .await?;
            Ok(set == 1)
        } else if let [key] = keys {
            let mut cmd = redis::cmd("SET");
            cmd.arg(key).arg(value).arg("NX").arg("PX").arg(ttl_ms);
            let reply: Option<String> = self.command(&cmd).await?;
            Ok(reply.is_some())
        } else {
            let set: i64 = self.script(&ACQUIRE_ALL, keys, &[value, ttl_ms]).await?;
            Ok(set == 1)
        }
    }

    /// Compare-and-delete, publishing `value` on `channels[i]` (when given)
    /// once `keys[i]` is deleted. True when every key held our value and is
    /// gone (for a reentrant hold id: held the hold, which is gone; holds
    /// publish nothing).
    pub(crate) async fn release(
        &self,
        keys: &[String],
        value: &str,
        channels: &[String],
    ) -> NodeResult<bool> {
        if is_hold_id(value) {
            let script = release_script(value);
            let deleted: usize = self.script(script, keys, &[value]).await?;
            return Ok(deleted == keys.len());
        }
        let mut args = Vec::with_capacity(1 + channels.len());
        args.push(value);
        args.extend(channels.iter().map(String::as_str));
        let deleted: usize = self.script(&RELEASE, keys, &args).await?;
        Ok(deleted == keys.len())
    }

    /// Compare-and-pexpire. True when every key held our value and got the
    /// new TTL (for a reentrant hold id: at least the new TTL).
    pub(crate) async fn extend(
        &self,
        keys: &[String],
        value: &str,
        ttl_ms: &str,
    ) -> NodeResult<bool> {
        let script = extend_script(value);
        let extended: i64 = self.script(script, keys, &[value, ttl_ms]).await?;
        Ok(extended == 1)
    }

    /// Compare-and-pexpire that tells a missing key from a foreign one.
    pub(crate) async fn extend_or_missing(
        &self,
        keys: &[String],
        value: &str,
        ttl_ms: &str,
    ) -> NodeResult<Found> {
        let found: i64 = self
            .script(&EXTEND_OR_MISSING, keys, &[value, ttl_ms])
            .await?;
        Ok(match found {
            1 => Found::Extended,
            -1 => Found::Missing,
            _ => Found::Foreign,
        })
    }

    /// Sets the missing keys to our value (`SET NX PX`). True when done;
    /// false when another owner holds one of them (nothing written then).
    pub(crate) async fn reseed(
        &self,
        keys: &[String],
        value: &str,
        ttl_ms: &str,
    ) -> NodeResult<bool> {
        let done: i64 = self.script(&RESEED, keys, &[value, ttl_ms]).await?;
        Ok(done == 1)
    }

    /// True when `owner` now has the hold `hold_id` on the key.
    pub(crate) async fn acquire_reentrant(
        &self,
        keys: &[String],
        owner: &str,
        hold_id: &str,
        ttl_ms: &str,
    ) -> NodeResult<bool> {
        let args = [owner, hold_id, ttl_ms];
        let taken: i64 = match &self.guard {
            Some(guard) => {
                self.guarded(guard, &GUARDED_REENTRANT_ACQUIRE, keys, &args)
                    .await?
            }
            None => self.script(&REENTRANT_ACQUIRE, keys, &args).await?,
        };
        Ok(taken == 1)
    }

    /// Fencing phase 1: `Some(counters)` when the keys are now ours.
    ///
    /// With the restart guard on, a node whose counters are not known
    /// intact (it has restarted or lost data since they were last written
    /// back) is no vote in the fenced read: its answer is an error (its
    /// lock keys are set all the same, and get the write-back).
    pub(crate) async fn fenced_acquire(
        &self,
        keys: &[String],
        value: &str,
        ttl_ms: &str,
    ) -> NodeResult<Option<Vec<String>>> {
        let Some(guard) = &self.guard else {
            return self.script(&FENCED_ACQUIRE, keys, &[value, ttl_ms]).await;
        };
        let counters: Option<Vec<String>> = self
            .guarded(guard, &GUARDED_FENCED_ACQUIRE, keys, &[value, ttl_ms])
            .await?;
        if counters.iter().flatten().any(|c| c.starts_with('?')) {
            return Err(NodeError::Failed(NodeFailure::new(
                FailureKind::Other,
                "fence counters not known intact: this node restarted or lost data since they \
                 were last written back, so it is no vote in the fenced read (the write-back \
                 of this or a later token makes them count again)"
                    .to_owned(),
            )));
        }
        Ok(counters)
    }

    /// Fencing phase 2: true when the counters were raised under our lock.
    pub(crate) async fn fence_write_back(
        &self,
        keys: &[String],
        value: &str,
        tokens: &[String],
    ) -> NodeResult<bool> {
        let mut args: Vec<&str> = Vec::with_capacity(tokens.len() + 1);
        args.push(value);
        args.extend(tokens.iter().map(String::as_str));
        let written: i64 = match &self.guard {
            Some(guard) => {
                let mut keys = keys.to_vec();
                keys.push(guard.key.clone());
                self.script(&GUARDED_FENCE_WRITE_BACK, &keys, &args).await?
            }
            None => self.script(&FENCE_WRITE_BACK, keys, &args).await?,
        };
        Ok(written == 1)
    }
}
