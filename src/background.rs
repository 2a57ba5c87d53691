//! [`Background`]: the tasks a [`Redlock`](crate::Redlock) leaves running
//! (releases spawned from `Drop`, calls still in flight after a round was
//! decided), counted so that [`Redlock::shutdown`](crate::Redlock::shutdown)
//! can wait for them.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::runtime::Id;
use tokio::sync::Notify;

#[derive(Debug, Default)]
struct Inner {
    /// Per runtime, how many tasks run on it.
    active: Mutex<Vec<(Id, usize)>>,
    idle: Notify,
}

impl Inner {
    fn counts(&self) -> std::sync::MutexGuard<'_, Vec<(Id, usize)>> {
        self.active.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Counts running background tasks, per runtime. Cheap to clone; clones
/// share the count.
#[derive(Clone, Debug, Default)]
pub(crate) struct Background {
    inner: Arc<Inner>,
}

/// Held by one running task; dropping it (the task ended, or was dropped
/// with its runtime) counts the task out.
struct Token(Arc<Inner>, Id);

impl Drop for Token {
    fn drop(&mut self) {
        let mut counts = self.0.counts();
        if let Some(at) = counts.iter().position(|(id, _)| *id == self.1) {
            counts[at].1 -= 1;
            if counts[at].1 == 0 {
                counts.swap_remove(at);
            }
        }
        drop(counts);
        self.0.idle.notify_waiters();
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
        let id = runtime.id();
        {
            let mut counts = self.inner.counts();
            match counts.iter_mut().find(|(on, _)| *on == id) {
                Some((_, count)) => *count += 1,
                None => counts.push((id, 1)),
            }
        }
        let token = Token(Arc::clone(&self.inner), id);
        runtime.spawn(async move {
            let _token = token;
            task.await;
        });
        true
    }

    /// How many tasks are running, on every runtime.
    #[cfg(test)]
    fn active(&self) -> usize {
        self.inner.counts().iter().map(|(_, count)| count).sum()
    }

    /// How many tasks are running on the runtime `id`.
    fn active_on(&self, id: Id) -> usize {
        let counts = self.inner.counts();
        counts
            .iter()
            .find(|(on, _)| *on == id)
            .map_or(0, |(_, count)| *count)
    }

    /// Resolves once no task is running on the current runtime (at once
    /// if none is). Tasks spawned while waiting are waited for too. Tasks
    /// on another runtime are not: only that runtime can run them (an
    /// idle one never would), and they end with it.
    pub(crate) async fn idle(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let id = runtime.id();
        loop {
            let notified = self.inner.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.active_on(id) == 0 {
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
    fn idle_waits_only_for_the_tasks_of_its_own_runtime() {
        let background = Background::default();
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap()
        };
        let (idle_one, other) = (runtime(), runtime());
        idle_one.block_on(async {
            background.spawn(std::future::pending());
        });
        other.block_on(async {
            let waited = tokio::time::timeout(Duration::from_secs(10), background.idle()).await;
            assert!(waited.is_ok(), "waited for a task of an idle runtime");
        });
        assert_eq!(background.active(), 1);
        drop(idle_one);
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
