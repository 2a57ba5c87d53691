//! The metrics a run records (feature `metrics`), counted by name and
//! `outcome` label, for the check that every hold the workload ended is
//! recorded under the outcome its call returned, and every hold it found
//! lost is counted lost.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use metrics::{
    Counter, CounterFn, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};

/// Records per (metric name, `outcome`): counters by their increments,
/// histograms by their samples, of the metrics [`check`] reads (the
/// others get no-op handles: every node call records some, and counting
/// them would only cost the batch time). Installed for one run's thread.
#[derive(Clone, Default)]
pub(crate) struct Counts(Arc<Mutex<BTreeMap<(String, String), u64>>>);

impl Counts {
    /// How many records `name` has under `outcome`.
    pub(crate) fn get(&self, name: &str, outcome: &str) -> u64 {
        let counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        counts
            .get(&(name.to_owned(), outcome.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    fn add(&self, key: &(String, String), by: u64) {
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *counts.entry(key.clone()).or_default() += by;
    }

    fn handle(&self, key: &Key) -> Arc<Handle> {
        let outcome = key
            .labels()
            .find(|label| label.key() == "outcome")
            .map_or_else(String::new, |label| label.value().to_owned());
        Arc::new(Handle {
            counts: self.clone(),
            key: (key.name().to_owned(), outcome),
        })
    }
}

/// One metric's handle: adds to its (name, outcome) count.
struct Handle {
    counts: Counts,
    key: (String, String),
}

impl CounterFn for Handle {
    fn increment(&self, value: u64) {
        self.counts.add(&self.key, value);
    }

    fn absolute(&self, _value: u64) {}
}

impl HistogramFn for Handle {
    fn record(&self, _value: f64) {
        self.counts.add(&self.key, 1);
    }
}

impl Recorder for Counts {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        if !checked(key) {
            return Counter::noop();
        }
        Counter::from_arc(self.handle(key))
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        if !checked(key) {
            return Histogram::noop();
        }
        Histogram::from_arc(self.handle(key))
    }
}

/// Whether [`check`] reads the metric of `key`.
fn checked(key: &Key) -> bool {
    key.name() == crate::metrics::HOLD_DURATION || key.name() == crate::metrics::LOST
}

/// The holds the workload ended, by the outcome its call gave (`ended`),
/// each recorded at least that often under that outcome; and the holds it
/// found lost (`lost` in `ended`) counted at least that often in
/// `redquorum.lock.lost` (which also counts the losses of holds the
/// workload does not track).
pub(crate) fn check(counts: &Counts, ended: &BTreeMap<&'static str, u64>) -> Vec<String> {
    ended
        .iter()
        .filter_map(|(&outcome, &seen)| {
            let (name, label) = match outcome {
                "lost" => (crate::metrics::LOST, ""),
                outcome => (crate::metrics::HOLD_DURATION, outcome),
            };
            let recorded = counts.get(name, label);
            (recorded < seen).then(|| {
                format!(
                    "metrics: {seen} hold(s) ended {outcome:?} by the workload's calls or found \
                     so, {recorded} recorded under {name}{}",
                    if label.is_empty() {
                        ""
                    } else {
                        " with that outcome"
                    }
                )
            })
        })
        .collect()
}
