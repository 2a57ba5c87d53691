//! What the library writes to `tracing` during a schedule, read as its
//! docs say: an operation's span ends with one of its documented outcomes
//! and names its failure (`error.type`) exactly when the outcome is one; a
//! success (or a grant too late: validity exhausted) counts a quorum of
//! votes; and no warning says a clean-up was left to the TTL for want of a
//! runtime (a schedule always runs in one) or a node's fence counter was
//! unusable. Installed per run on the run's thread; only the lock's spans
//! and warnings reach it.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_core::span::Current;

/// The outcomes of the operations that succeeded.
const SUCCESS: [&str; 4] = ["acquired", "extended", "released", "ok"];

/// The outcomes of the operations that failed, as the spans document them
/// (an attempt's `Reason`, an extension's and a release's ends, the
/// start-up checks').
const FAILURE: [&str; 9] = [
    "misconfigured",
    "unavailable",
    "validity_exhausted",
    "contended",
    "gone",
    "expired",
    "not_confirmed",
    "unconfirmed",
    "problems",
];

/// Warnings no run may log, by a part of their text, and why.
const NEVER: [(&str, &str); 2] = [
    ("no tokio runtime", "inside the runtime"),
    (
        "unusable fence counter",
        "though the simulated nodes keep their counters as integers",
    ),
];

/// The fields of one span that the checks read.
#[derive(Debug, Default)]
struct Fields {
    meta: Option<&'static Metadata<'static>>,
    name: &'static str,
    quorum: Option<u64>,
    granted: Option<u64>,
    outcome: Option<String>,
    error_type: Option<String>,
    message: Option<String>,
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "redquorum.quorum" => self.quorum = Some(value),
            "redquorum.granted" => self.granted = Some(value),
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(value) = u64::try_from(value) {
            self.record_u64(field, value);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "redquorum.outcome" => self.outcome = Some(value.to_owned()),
            "error.type" => self.error_type = Some(value.to_owned()),
            "message" => self.message = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.message = Some(format!("{value:?}"));
        }
    }
}

impl Fields {
    /// What is wrong with this ended span, if anything.
    fn wrong(&self) -> Option<String> {
        let outcome = self.outcome.as_deref()?;
        let success = SUCCESS.contains(&outcome);
        if !success && !FAILURE.contains(&outcome) {
            return Some(format!(
                "span {} ended {outcome:?}, not a documented outcome",
                self.name
            ));
        }
        if success == self.error_type.is_some() {
            return Some(format!(
                "span {} ended {outcome:?} with error.type {:?}",
                self.name, self.error_type
            ));
        }
        // An extension granted by a quorum too late is validity_exhausted,
        // never not_confirmed.
        if let (Some(granted), Some(quorum)) = (self.granted, self.quorum)
            && self.name == "redquorum.extend"
            && outcome == "not_confirmed"
            && granted >= quorum
        {
            return Some(format!(
                "span {} ended {outcome:?} with {granted} vote(s) granted, a quorum of {quorum}",
                self.name
            ));
        }
        // A success, or a grant that came too late, took a quorum's votes.
        let granted = success || outcome == "validity_exhausted";
        match (granted, self.granted, self.quorum) {
            (true, Some(granted), Some(quorum)) if granted < quorum => Some(format!(
                "span {} ended {outcome:?} with {granted} vote(s) granted, below its quorum of \
                 {quorum}",
                self.name
            )),
            _ => None,
        }
    }
}

/// The subscriber: the lock's spans while open, and what the checks found.
#[derive(Debug, Default)]
pub(crate) struct Traced {
    next: AtomicU64,
    /// Open spans by id: references and fields.
    spans: Mutex<HashMap<u64, (usize, Fields)>>,
    /// The spans entered, innermost last (a run has one thread).
    entered: Mutex<Vec<u64>>,
    /// Set once the run's workload is over: spans closed from then on
    /// (tasks dropped with the runtime) may lack an outcome.
    over: std::sync::atomic::AtomicBool,
    /// How many extension spans have recorded their outcome, and the
    /// last one's.
    extended: Mutex<(u64, Option<String>)>,
    found: Mutex<Found>,
}

/// What the run's spans and warnings showed.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// Spans that contradict themselves, and warnings no run may show.
    pub(crate) violations: Vec<String>,
    /// Every warning's message.
    pub(crate) warnings: Vec<String>,
}

impl Traced {
    fn wants(meta: &Metadata<'_>) -> bool {
        if meta.is_span() {
            meta.name().starts_with("redquorum.")
        } else {
            *meta.level() <= Level::WARN
        }
    }

    /// The run is over: spans that close from now on may lack an outcome.
    pub(crate) fn over(&self) {
        self.over.store(true, Ordering::Relaxed);
    }

    /// What the checks found; emptied.
    pub(crate) fn take(&self) -> Found {
        std::mem::take(&mut *self.found.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// How many warnings so far contain `text`.
    pub(crate) fn warnings(&self, text: &str) -> usize {
        let found = self.found.lock().unwrap_or_else(PoisonError::into_inner);
        found.warnings.iter().filter(|w| w.contains(text)).count()
    }
}

/// How many extension spans have recorded their outcome on this thread's
/// run, and the last one's: read before and right after an explicit
/// extension, whether it ran a round and how that round ended.
pub(crate) fn last_extension() -> (u64, Option<String>) {
    tracing::dispatcher::get_default(|d| {
        let Some(traced) = d.downcast_ref::<Traced>() else {
            return (0, None);
        };
        let last = traced
            .extended
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        last.clone()
    })
}

/// How many warnings of the run on this thread so far contain `text`
/// (0 when no [`Traced`] is installed).
pub(crate) fn warnings(text: &str) -> usize {
    tracing::dispatcher::get_default(|d| d.downcast_ref::<Traced>().map_or(0, |t| t.warnings(text)))
}

impl Subscriber for Traced {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if Self::wants(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        Self::wants(meta)
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fields = Fields {
            meta: Some(attrs.metadata()),
            name: attrs.metadata().name(),
            ..Fields::default()
        };
        attrs.record(&mut fields);
        let mut spans = self.spans.lock().unwrap_or_else(PoisonError::into_inner);
        spans.insert(id, (1, fields));
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.spans.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((_, fields)) = spans.get_mut(&span.into_u64()) else {
            return;
        };
        values.record(fields);
        // An extension's outcome, as it is recorded: its span may close
        // later (its calls left in flight keep it open).
        let outcome = (fields.meta)
            .and_then(|meta| meta.fields().field("redquorum.outcome"))
            .filter(|field| fields.name == "redquorum.extend" && values.contains(field));
        if outcome.is_some() {
            let mut last = self.extended.lock().unwrap_or_else(PoisonError::into_inner);
            last.0 += 1;
            last.1.clone_from(&fields.outcome);
        }
    }

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let message = fields.message.unwrap_or_default();
        let mut found = self.found.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(why) = NEVER.iter().find(|(text, _)| message.contains(text)) {
            found
                .violations
                .push(format!("tracing: warned {message:?}, {}", why.1));
        }
        found.warnings.push(message);
    }

    fn enter(&self, span: &Id) {
        let mut entered = self.entered.lock().unwrap_or_else(PoisonError::into_inner);
        entered.push(span.into_u64());
    }

    fn exit(&self, span: &Id) {
        let mut entered = self.entered.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = entered.iter().rposition(|id| *id == span.into_u64()) {
            entered.remove(at);
        }
    }

    /// The innermost span entered: `Span::current()` (the library records
    /// a round's votes on it).
    fn current_span(&self) -> Current {
        let entered = self.entered.lock().unwrap_or_else(PoisonError::into_inner);
        let spans = self.spans.lock().unwrap_or_else(PoisonError::into_inner);
        let top = entered
            .last()
            .and_then(|id| Some((*id, spans.get(id)?.1.meta?)));
        match top {
            Some((id, meta)) => Current::new(Id::from_u64(id), meta),
            None => Current::none(),
        }
    }

    fn clone_span(&self, id: &Id) -> Id {
        let mut spans = self.spans.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((refs, _)) = spans.get_mut(&id.into_u64()) {
            *refs += 1;
        }
        id.clone()
    }

    fn try_close(&self, id: Id) -> bool {
        let ended = {
            let mut spans = self.spans.lock().unwrap_or_else(PoisonError::into_inner);
            let Some((refs, _)) = spans.get_mut(&id.into_u64()) else {
                return false;
            };
            *refs -= 1;
            if *refs > 0 {
                return false;
            }
            spans.remove(&id.into_u64())
        };
        // A release is never cancelled by the workload: its span ends
        // with an outcome (one spawned from Drop may be cut off only by
        // the run's end).
        let unfinished = ended.as_ref().is_some_and(|(_, fields)| {
            fields.name == "redquorum.release" && fields.outcome.is_none()
        });
        if unfinished && !self.over.load(Ordering::Relaxed) {
            let mut found = self.found.lock().unwrap_or_else(PoisonError::into_inner);
            found
                .violations
                .push("tracing: span redquorum.release closed without an outcome".to_owned());
        }
        if let Some(wrong) = ended.and_then(|(_, fields)| fields.wrong()) {
            let mut found = self.found.lock().unwrap_or_else(PoisonError::into_inner);
            found.violations.push(format!("tracing: {wrong}"));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(outcome: &str, error_type: Option<&str>, granted: u64) -> Fields {
        Fields {
            meta: None,
            name: "redquorum.release",
            quorum: Some(3),
            granted: Some(granted),
            outcome: Some(outcome.to_owned()),
            error_type: error_type.map(str::to_owned),
            message: None,
        }
    }

    #[test]
    fn the_library_s_own_spans_pass() {
        assert_eq!(ended("released", None, 3).wrong(), None);
        assert_eq!(ended("expired", Some("expired"), 0).wrong(), None);
        assert_eq!(Fields::default().wrong(), None);
    }

    #[test]
    fn a_span_that_contradicts_itself_is_seen() {
        assert!(ended("released", Some("released"), 3).wrong().is_some());
        assert!(ended("expired", None, 0).wrong().is_some());
        assert!(ended("released", None, 0).wrong().is_some());
        assert!(ended("", Some(""), 3).wrong().is_some());
        let late = Some("validity_exhausted");
        assert_eq!(ended("validity_exhausted", late, 3).wrong(), None);
        assert!(ended("validity_exhausted", late, 2).wrong().is_some());
    }
}
