//! The node whose script is running on this thread. `redis.call` and the
//! sandbox's other functions reach the node's state through here, so a
//! Lua state is bound to no node and can serve the next one
//! ([`spare`](super::spare)).

use std::cell::RefCell;

use super::super::core::Shared;

thread_local! {
    static RUNNING: RefCell<Option<Shared>> = const { RefCell::new(None) };
}

/// Runs `f` with `core` as the running script's node.
pub(super) fn running<R>(core: &Shared, f: impl FnOnce() -> R) -> R {
    let before = RUNNING.replace(Some(core.clone()));
    let out = f();
    RUNNING.set(before);
    out
}

/// Calls `f` with the running script's node (`None` outside a script).
pub(super) fn with<R>(f: impl FnOnce(Option<&Shared>) -> R) -> R {
    RUNNING.with_borrow(|core| f(core.as_ref()))
}
