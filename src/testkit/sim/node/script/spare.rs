//! Lua states kept for the next node of this thread. A simulation batch
//! starts five nodes a schedule; making each its Lua state (the sandbox,
//! then every script loaded again) and collecting it afterwards was a
//! twentieth of the batch. A state carries nothing a script can see from
//! one node to the next: the sandbox's tables are read-only, `KEYS` and
//! `ARGV` are set for each script, the random generator is the node's,
//! and a script is found by `EVALSHA` only in the node's own cache.

use std::cell::RefCell;

use super::Engine;

/// How many states a thread keeps.
const KEPT: usize = 8;

thread_local! {
    static SPARE: RefCell<Vec<Engine>> = const { RefCell::new(Vec::new()) };
}

/// A state a node of this thread gave back, if any.
pub(super) fn take() -> Option<Engine> {
    SPARE.with_borrow_mut(Vec::pop)
}

/// Keeps `engine` for the next node (or drops it when enough are kept).
pub(super) fn keep(engine: Engine) {
    SPARE.with_borrow_mut(|spare| {
        if spare.len() < KEPT {
            spare.push(engine);
        }
    });
}
