//! [`Timeline`]: what happened to the nodes during a run (their states and
//! the faults injected), to draw beside a `History`'s holds with
//! [`write_svg`](crate::svg::write_svg).

use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use redquorum::testkit::{LocalCluster, NodeState};

/// Node states and fault marks over a run, on the monotonic clock the
/// holds are recorded on. Cheap to clone; clones share the record.
///
#[derive(Clone, Debug)]
pub struct Timeline {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
pub struct Inner {
    pub start: Instant,
    pub nodes: Vec<String>,
    /// Node state changes, in the order recorded; every node starts up.
    pub states: Vec<(Instant, usize, NodeState)>,
    pub marks: Vec<(Instant, String)>,
    /// The end of the run, once known.
    pub end: Option<Instant>,
}

impl Timeline {
    /// A timeline starting at `start` for nodes labelled `nodes`, all up.
    #[must_use]
    pub fn new<I>(start: Instant, nodes: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        let inner = Inner {
            start,
            nodes: nodes.into_iter().map(Into::into).collect(),
            states: Vec::new(),
            marks: Vec::new(),
            end: None,
        };
        Timeline {
            inner: Arc::new(Mutex::new(inner)),
        }
    }

    /// A timeline for `cluster`'s nodes, labelled with their index and
    /// address, all up at `start`.
    #[must_use]
    pub fn for_cluster(cluster: &LocalCluster, start: Instant) -> Self {
        let labels = (0..cluster.len()).map(|i| {
            let url = cluster.url(i);
            let addr = url.trim_start_matches("redis://").trim_end_matches('/');
            format!("node {i}  {addr}")
        });
        Timeline::new(start, labels)
    }

    /// Node `node` is in `state` from now on.
    pub fn node(&self, node: usize, state: NodeState) {
        self.node_at(node, Instant::now(), state);
    }

    /// Node `node` is in `state` from `at` on.
    pub fn node_at(&self, node: usize, at: Instant, state: NodeState) {
        self.lock().states.push((at, node, state));
    }

    /// Marks a fault (or any event) now, with a short label.
    pub fn mark(&self, label: impl Into<String>) {
        self.mark_at(Instant::now(), label);
    }

    /// Marks a fault (or any event) at `at`, with a short label.
    pub fn mark_at(&self, at: Instant, label: impl Into<String>) {
        self.lock().marks.push((at, label.into()));
    }

    /// The run ended now: the picture's time axis stops here.
    pub fn end(&self) {
        self.lock().end = Some(Instant::now());
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
