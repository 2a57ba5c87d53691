//! Compile-time promises: a `Redlock`, its guards and the futures of its
//! calls cross threads and tasks (a guard held across `.await` in a
//! multi-threaded runtime, a `lock()` in `tokio::spawn`). If one of them
//! stopped being `Send`, `Sync` or `'static` where promised, this file
//! would not compile.

use std::time::Duration;

use redquorum::{Config, Error, LockGuard, Redlock};

fn send_sync_static<T: Send + Sync + 'static>() {}

fn send<T: Send>(_: &T) {}

#[test]
fn the_lock_its_guard_config_and_error_are_send_sync_and_static() {
    send_sync_static::<Redlock>();
    send_sync_static::<LockGuard>();
    send_sync_static::<Config>();
    send_sync_static::<Error>();
}

#[test]
fn the_futures_of_lock_and_with_lock_are_send() {
    let redlock = Redlock::new(["redis://127.0.0.1:1/"]).unwrap();
    let ttl = Duration::from_secs(1);
    // Built, never polled: no runtime needed.
    send(&redlock.lock("r", ttl));
    send(&redlock.try_lock(&["a", "b"], ttl));
    send(&redlock.with_lock("r", ttl, async |guard: &LockGuard| guard.remaining()));
    send(&redlock.shutdown());
}

/// Never called: it only has to compile. `tokio::spawn` takes only
/// `Send + 'static` futures.
#[allow(dead_code)]
fn a_lock_held_across_awaits_can_be_spawned(redlock: Redlock) {
    drop(tokio::spawn(async move {
        let mut guard = redlock.lock("r", Duration::from_secs(5)).await?;
        tokio::task::yield_now().await;
        guard.extend(Duration::from_secs(5)).await?;
        guard.release().await
    }));
}
