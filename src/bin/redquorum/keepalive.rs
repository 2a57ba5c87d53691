//! Keeps a held lock alive while the command runs: extends it when a third
//! of the TTL is left, retries quickly on failure, and says when it is lost.

use std::time::Duration;

use redquorum::{Error, LockGuard};
use tokio::time::Instant;

/// Why the lock is gone.
#[derive(Debug)]
pub enum Lost {
    /// A quorum of nodes no longer holds our value (expired or taken).
    Refused,
    /// No extension reached a quorum before the validity ran out; the last error.
    Expired(Option<String>),
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::Refused => f.write_str("a quorum of nodes no longer holds it"),
            Lost::Expired(None) => f.write_str("its validity ran out before it could be extended"),
            Lost::Expired(Some(why)) => write!(
                f,
                "its validity ran out before it could be extended; last attempt: {why}"
            ),
        }
    }
}

/// Pause after a failed extension, as a share of the validity left.
fn retry_pause(remaining: Duration) -> Duration {
    (remaining / 8).clamp(Duration::from_millis(10), Duration::from_millis(250))
}

/// When the next extension is due: once a third of `ttl` is left.
fn due(valid_until: Instant, ttl: Duration) -> Instant {
    valid_until.checked_sub(ttl / 3).unwrap_or(valid_until)
}

/// Extends `guard` by `ttl` for as long as it can; returns only when the
/// lock is lost. Cancel it (drop the future) to stop; the guard is then
/// still held, and still valid until its deadline.
///
/// # Cancel safety
///
/// Cancel safe: an extension cancelled midway sets the same TTL, so the keys
/// never expire before the guard's deadline.
pub async fn keep_alive(guard: &mut LockGuard, ttl: Duration) -> Lost {
    let mut last_error = None;
    loop {
        if guard.is_expired() {
            return Lost::Expired(last_error);
        }
        let valid_until = guard.valid_until();
        let wake = if last_error.is_some() {
            Instant::now() + retry_pause(guard.remaining())
        } else {
            due(valid_until, ttl)
        };
        tokio::time::sleep_until(wake.min(valid_until)).await;
        if guard.is_expired() {
            return Lost::Expired(last_error);
        }
        match guard.extend(ttl).await {
            Ok(()) => last_error = None,
            // Either the deadline passed meanwhile, or a quorum refused.
            Err(Error::Expired) if Instant::now() >= valid_until => {
                return Lost::Expired(last_error);
            }
            Err(Error::Expired) => return Lost::Refused,
            Err(e) => last_error = Some(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extension_is_due_when_a_third_of_the_ttl_is_left() {
        let now = Instant::now();
        let until = now + Duration::from_secs(30);
        assert_eq!(
            due(until, Duration::from_secs(30)),
            now + Duration::from_secs(20)
        );
    }

    #[test]
    fn retries_come_quickly_but_not_in_a_tight_loop() {
        assert_eq!(retry_pause(Duration::ZERO), Duration::from_millis(10));
        assert_eq!(
            retry_pause(Duration::from_millis(800)),
            Duration::from_millis(100)
        );
        assert_eq!(
            retry_pause(Duration::from_secs(60)),
            Duration::from_millis(250)
        );
    }
}
