//! A hold is over once its guard is released or dropped: its status,
//! which every watcher of the lock reads (`lost()`, the watchdog, the
//! oracle), says `ended` as the call returns (a release) or at once (a
//! drop), whatever the nodes answered. A hold that still reads as live
//! after its end would keep its watchers waiting for a deadline that no
//! longer means anything.

use tokio::sync::watch;

use super::checks::record;
use super::workload::Client;
use crate::lock::held::Status;

/// How a hold was ended by the workload.
#[derive(Clone, Copy, Debug)]
pub(crate) enum End {
    /// `release()` returned (any result).
    Released,
    /// The guard was dropped.
    Dropped,
}

/// Checks that the hold of `resource` watched by `status` reads as
/// ended, right after `client` ended it as `how`.
pub(crate) fn check(client: &Client, status: &watch::Receiver<Status>, resource: &str, how: End) {
    if status.borrow().ended {
        return;
    }
    let after = match how {
        End::Released => "its release() returned",
        End::Dropped => "its guard was dropped",
    };
    record(&client.record).violation(format!(
        "ended: client {}'s hold of {resource} does not read as ended after {after}: \
         whoever watches it (lost(), the watchdog) is never told it is over",
        client.index
    ));
}
