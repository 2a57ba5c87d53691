//! The labels of the metrics (feature `metrics`).

use super::Config;

impl Config {
    /// Sets whether the lock metrics (see [`metrics`](crate::metrics)) carry
    /// a `redquorum.resource` label with the resource name. Off by default:
    /// every resource name is a series of its own in the metrics backend, so
    /// turn it on only when the names come from a small, fixed set. Node
    /// metrics are labelled by node address either way.
    ///
    /// ```
    /// let config = redquorum::Config::default().with_metrics_resource_label(true);
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_metrics_resource_label(mut self, on: bool) -> Self {
        self.metrics_resource_label = on;
        self
    }

    /// Whether the lock metrics carry the resource name.
    pub(crate) fn metrics_resource_label(&self) -> bool {
        self.metrics_resource_label
    }
}
