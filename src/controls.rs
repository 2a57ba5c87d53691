//! Negative controls (feature `sim`): defects put back on purpose, on the
//! current thread only, so that the simulator's checkers can be shown to
//! see them. Never on outside the simulator.

use std::cell::Cell;

use crate::testkit::sim::Control;

thread_local! {
    static ON: Cell<Option<Control>> = const { Cell::new(None) };
}

/// Turns `control` on for this thread until the returned value is dropped.
pub(crate) fn install(control: Control) -> Installed {
    ON.with(|on| on.set(Some(control)));
    Installed(())
}

/// Turns the control of [`install`] off when dropped.
pub(crate) struct Installed(());

impl Drop for Installed {
    fn drop(&mut self) {
        ON.with(|on| on.set(None));
    }
}

/// Whether `control` is on for this thread.
pub(crate) fn on(control: Control) -> bool {
    ON.with(|on| on.get() == Some(control))
}
