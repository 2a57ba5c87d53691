//! [`Background`]: the tasks a [`Redlock`](crate::Redlock) leaves running
//! (releases spawned from `Drop`, calls still in flight after a round was
//! decided), counted so that [`Redlock::shutdown`](crate::Redlock::shutdown)
//! can wait for them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

#[derive(Debug, Default)]
struct Inner {
    active: AtomicUsize,
    idle: Notify,
}

/// Counts running background tasks. Cheap to clone; clones share the count.
#[derive(Clone, Debug, Default)]
pub(crate) struct Background {
    inner: Arc<Inner>,
}

/// Held by one running task; dropping it (the task ended, or was dropped
/// with its runtime) counts the task out.
struct Token(Arc<Inner>);

impl Drop for Token {
    fn drop(&mut self) {
        if self.0.active.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Background {
    /// Spawns `task` on the current tokio runtime and counts it until it
    /// ends. `false` (and nothing spawned) outside a runtime.
    pub(crate) fn spawn<F>(&self, task: F) -> bool
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        self.inner.active.fetch_add(1, Ordering::AcqRel);
        let token = Token(Arc::clone(&self.inner));
        runtime.spawn(async move {
            let _token = token;
            task.await;
        });
        true
    }

    /// How many tasks are running.
    pub(crate) fn active(&self) -> usize {
        self.inner.active.load(Ordering::Acquire)
    }

    /// Resolves once no task is running (at once if none is). Tasks spawned
    /// while waiting are waited for too.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.inner.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.active() == 0 {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn idle_waits_for_every_task_including_those_they_spawn() {
        let background = Background::default();
        background.idle().await;
        let inner = background.clone();
        assert!(background.spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            inner.spawn(async {
                tokio::time::sleep(Duration::from_millis(10)).await;
            });
        }));
        assert_eq!(background.active(), 1);
        let start = tokio::time::Instant::now();
        background.idle().await;
        assert_eq!(background.active(), 0);
        assert!(start.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn outside_a_runtime_nothing_is_spawned_or_counted() {
        let background = Background::default();
        assert!(!background.spawn(async {}));
        assert_eq!(background.active(), 0);
    }

    #[test]
    fn a_task_dropped_with_its_runtime_is_counted_out() {
        let background = Background::default();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime.block_on(async {
            background.spawn(std::future::pending());
        });
        assert_eq!(background.active(), 1);
        drop(runtime);
        assert_eq!(background.active(), 0);
    }
}
