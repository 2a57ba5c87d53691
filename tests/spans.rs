//! Spans and events: one span per operation with OpenTelemetry-style
//! fields, one event per node answer, WARN only for at-risk and lost
//! locks, and never a lock value or a password anywhere in the output.
#![cfg(feature = "testkit")]

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use common::*;
use redquorum::Redlock;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

const PASSWORD: &str = "pw-5f1e2d";

/// One closed span or one event, with every field as text.
#[derive(Clone, Debug)]
struct Captured {
    span: bool,
    name: String,
    level: Level,
    /// The innermost span an event happened in.
    parent: Option<String>,
    fields: BTreeMap<String, String>,
}

impl Captured {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// A layer that keeps every span (when it closes) and every event.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Captured>>>);

impl Capture {
    fn all(&self) -> Vec<Captured> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn spans(&self, name: &str) -> Vec<Captured> {
        self.all()
            .into_iter()
            .filter(|c| c.span && c.name == name)
            .collect()
    }

    /// Everything captured, as one text, to search for secrets.
    fn text(&self) -> String {
        let mut text = String::new();
        for c in self.all() {
            let _ = writeln!(text, "{} {:?} {:?}", c.name, c.parent, c.fields);
        }
        text
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<BTreeMap<String, String>>()
        {
            values.record(&mut Fields(fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let captured = Captured {
            span: false,
            name: fields.get("message").cloned().unwrap_or_default(),
            level: *event.metadata().level(),
            parent: ctx.event_span(event).map(|s| s.name().to_owned()),
            fields,
        };
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(captured);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let fields = span
            .extensions()
            .get::<BTreeMap<String, String>>()
            .cloned()
            .unwrap_or_default();
        let captured = Captured {
            span: true,
            name: span.name().to_owned(),
            level: *span.metadata().level(),
            parent: span.parent().map(|p| p.name().to_owned()),
            fields,
        };
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(captured);
    }
}

/// Five local nodes that require a password, and a lock over them.
fn password_cluster() -> (redquorum::testkit::LocalCluster, Redlock, Vec<u16>) {
    let cluster = cluster(5);
    let mut ports = Vec::new();
    for i in 0..5 {
        let mut conn = cluster
            .connection(i)
            .unwrap_or_else(|e| panic!("node {i}: {e}"));
        let set: redis::RedisResult<()> = redis::cmd("CONFIG")
            .arg("SET")
            .arg("requirepass")
            .arg(PASSWORD)
            .query(&mut conn);
        set.unwrap_or_else(|e| panic!("requirepass on node {i}: {e}"));
        let url = cluster.direct_url(i);
        let port = url
            .trim_end_matches('/')
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok());
        ports.push(port.unwrap_or_else(|| panic!("no port in {url}")));
    }
    let urls: Vec<String> = ports
        .iter()
        .map(|port| format!("redis://:{PASSWORD}@127.0.0.1:{port}/"))
        .collect();
    let config = fast_config()
        .with_retries(0)
        .with_node_timeout(Duration::from_millis(300));
    (cluster, redlock(&urls, config), ports)
}

#[tokio::test]
async fn operations_have_spans_with_otel_fields_and_no_lock_value_or_password() {
    let capture = Capture::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let (cluster, redlock, ports) = password_cluster();
    let resource = unique("spans");
    let mut values = Vec::new();

    let mut guard = redlock
        .try_lock(&resource, Duration::from_secs(10))
        .await
        .unwrap();
    values.push(guard.value().to_owned());
    guard.extend(Duration::from_secs(10)).await.unwrap();
    // A contender finds it held.
    let refused = redlock.try_lock(&resource, Duration::from_secs(10)).await;
    assert!(refused.is_err(), "{refused:?}");
    guard.release().await.unwrap();
    // A dropped guard is released in the background.
    let dropped = redlock
        .try_lock(&resource, Duration::from_secs(10))
        .await
        .unwrap();
    values.push(dropped.value().to_owned());
    drop(dropped);
    redlock.shutdown().await;
    redlock.check().await.unwrap();
    // Three of five nodes down: unavailable.
    for i in 0..3 {
        cluster.kill(i).unwrap();
    }
    let down = redlock
        .try_lock(&unique("spans-down"), Duration::from_secs(10))
        .await;
    assert!(down.is_err(), "{down:?}");
    redlock.shutdown().await;

    let acquires = capture.spans("redquorum.acquire");
    assert_eq!(acquires.len(), 4, "{acquires:#?}");
    for span in &acquires {
        assert_eq!(span.level, Level::INFO);
        assert_eq!(span.field("db.system.name"), Some("redis"), "{span:?}");
        assert_eq!(span.field("db.operation.name"), Some("acquire"), "{span:?}");
        assert_eq!(span.field("redquorum.attempt"), Some("1"), "{span:?}");
        assert_eq!(span.field("redquorum.quorum"), Some("3"), "{span:?}");
        for field in [
            "redquorum.resource",
            "redquorum.granted",
            "redquorum.refused",
        ] {
            assert!(span.field(field).is_some(), "{field} missing: {span:?}");
        }
        let ms: f64 = span.field("redquorum.elapsed_ms").unwrap().parse().unwrap();
        assert!(ms >= 0.0, "{span:?}");
    }
    let outcomes: Vec<_> = acquires
        .iter()
        .map(|s| s.field("redquorum.outcome"))
        .collect();
    let expected = ["acquired", "contended", "acquired", "unavailable"].map(Some);
    assert_eq!(outcomes, expected);
    assert_eq!(
        acquires[0].field("redquorum.resource"),
        Some(resource.as_str())
    );
    assert_eq!(acquires[0].field("error.type"), None);
    assert_eq!(acquires[1].field("error.type"), Some("contended"));
    assert!(
        acquires[1]
            .field("redquorum.refused")
            .unwrap()
            .parse::<usize>()
            .unwrap()
            >= 3
    );
    assert_eq!(acquires[3].field("error.type"), Some("unavailable"));

    let extends = capture.spans("redquorum.extend");
    assert_eq!(extends.len(), 1, "{extends:#?}");
    assert_eq!(extends[0].field("redquorum.outcome"), Some("extended"));
    assert_eq!(extends[0].field("db.operation.name"), Some("extend"));
    let releases = capture.spans("redquorum.release");
    let dropped: Vec<_> = releases
        .iter()
        .map(|s| s.field("redquorum.dropped"))
        .collect();
    assert_eq!(dropped, [Some("false"), Some("true")], "{releases:#?}");
    for span in &releases {
        assert_eq!(
            span.field("redquorum.outcome"),
            Some("released"),
            "{span:?}"
        );
        assert_eq!(span.field("redquorum.resource"), Some(resource.as_str()));
    }
    let checks = capture.spans("redquorum.check");
    assert!(!checks.is_empty());
    assert!(
        checks
            .iter()
            .any(|c| c.field("redquorum.outcome") == Some("ok"))
    );

    // Per-node events at DEBUG, inside their operation's span, naming the
    // node by address and port.
    let answers: Vec<_> = capture
        .all()
        .into_iter()
        .filter(|c| !c.span && c.name == "node answered")
        .collect();
    assert!(answers.len() >= 5 * 4, "{}", answers.len());
    for answer in &answers {
        assert_eq!(answer.level, Level::DEBUG);
        assert_eq!(
            answer.field("server.address"),
            Some("127.0.0.1"),
            "{answer:?}"
        );
        let port: u16 = answer.field("server.port").unwrap().parse().unwrap();
        assert!(ports.contains(&port), "{answer:?}");
        assert!(answer.field("db.operation.name").is_some(), "{answer:?}");
        assert!(answer.field("redquorum.elapsed_ms").is_some(), "{answer:?}");
    }
    assert!(answers.iter().all(|a| {
        a.parent
            .as_deref()
            .is_some_and(|p| p.starts_with("redquorum."))
    }));
    // The killed nodes' answers carry an error.type.
    let killed: Vec<u16> = ports[..3].to_vec();
    assert!(answers.iter().any(|a| {
        a.field("error.type").is_some()
            && killed.contains(&a.field("server.port").unwrap().parse().unwrap())
    }));

    let text = capture.text();
    for value in &values {
        assert!(
            !text.contains(value.as_str()),
            "lock value {value} in the output"
        );
    }
    assert!(!text.contains(PASSWORD), "password in the output");
    let warnings: Vec<_> = capture
        .all()
        .into_iter()
        .filter(|c| !c.span && c.level == Level::WARN && c.name != "redquorum start-up check")
        .collect();
    assert!(warnings.is_empty(), "{warnings:#?}");
}

#[tokio::test]
async fn only_an_at_risk_and_a_lost_lock_warn() {
    let capture = Capture::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let (cluster, redlock, _) = password_cluster();
    let mut guard = redlock
        .try_lock(&unique("spans-lost"), Duration::from_millis(600))
        .await
        .unwrap();
    let value = guard.value().to_owned();
    guard.auto_extend();
    for i in 0..3 {
        cluster.kill(i).unwrap();
    }
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .unwrap();
    // The watchdog says so once its last retry finds no validity left.
    let said = async {
        while !capture.all().iter().any(|c| c.name == "lock lost") {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), said)
        .await
        .unwrap();
    drop(guard);
    redlock.shutdown().await;

    let warnings: Vec<String> = capture
        .all()
        .into_iter()
        .filter(|c| !c.span && c.level == Level::WARN && c.name != "redquorum start-up check")
        .map(|c| c.name)
        .collect();
    assert!(
        warnings.iter().any(|w| w.starts_with("lock at risk")),
        "{warnings:?}"
    );
    assert!(warnings.iter().any(|w| w == "lock lost"), "{warnings:?}");
    assert!(
        warnings
            .iter()
            .all(|w| w.starts_with("lock at risk") || w == "lock lost"),
        "{warnings:?}"
    );
    let extends = capture.spans("redquorum.extend");
    assert!(
        extends.iter().any(|s| s.field("error.type").is_some()),
        "{extends:#?}"
    );
    let text = capture.text();
    assert!(!text.contains(value.as_str()), "lock value in the output");
    assert!(!text.contains(PASSWORD), "password in the output");
}

#[tokio::test]
async fn a_quarantined_node_answer_has_error_type_quarantined_and_the_attempt_unavailable() {
    let capture = Capture::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let cluster = cluster(3);
    // Nodes never marked trusted: each starts its quarantine at first contact.
    let config = fast_config()
        .with_retries(0)
        .with_restart_guard(Duration::from_secs(600));
    let redlock = redlock(&cluster.urls(), config);
    let refused = redlock
        .try_lock(&unique("spans-guard"), Duration::from_secs(1))
        .await;
    assert!(refused.is_err());
    // The attempt answered at its decision; its span closes once its calls
    // still in flight and its clean-up are over.
    redlock.shutdown().await;
    let acquires = capture.spans("redquorum.acquire");
    assert_eq!(acquires.len(), 1);
    assert_eq!(acquires[0].field("error.type"), Some("unavailable"));
    let answers: Vec<_> = capture
        .all()
        .into_iter()
        .filter(|c| !c.span && c.name == "node answered")
        .collect();
    assert!(
        answers
            .iter()
            .any(|a| a.field("error.type") == Some("quarantined")),
        "{answers:?}"
    );
}

/// The persistence warnings one `Redlock` logs at its first lock on nodes
/// with Redis's default persistence (`appendonly no`), waiting until its
/// background start-up check has logged what it found.
async fn persistence_warnings(restart_guard: bool) -> Vec<Captured> {
    let capture = Capture::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let cluster = cluster(5);
    let config = fast_config().with_retries(0);
    let redlock = if restart_guard {
        guarded(&cluster, config.with_restart_guard(Duration::from_secs(5))).await
    } else {
        redlock(&cluster.urls(), config)
    };
    let resource = unique("spans-persistence");
    for _ in 0..3 {
        let guard = redlock.try_lock(&resource, Duration::from_secs(5)).await;
        guard.unwrap().release().await.unwrap();
    }
    // The check runs once, in the background; its report is on its way
    // once every node answered: wait until a check reported, or 3 s.
    let reported = || {
        capture
            .all()
            .iter()
            .any(|c| !c.span && c.name.starts_with("redquorum start-up check"))
    };
    let _ = eventually(Duration::from_secs(3), reported).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    redlock.shutdown().await;
    capture
        .all()
        .into_iter()
        .filter(|c| !c.span && c.level == Level::WARN)
        .filter(|c| format!("{:?}", c.fields).contains("appendonly"))
        .collect()
}

#[tokio::test]
async fn default_persistence_is_one_warning_per_redlock_naming_every_node() {
    let warnings = persistence_warnings(false).await;
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    let text = format!("{:?}", warnings[0].fields);
    for index in 0..5 {
        assert!(text.contains(&format!("node {index}")), "{text}");
    }
    assert!(text.contains("restart guard"), "{text}");
}

#[tokio::test]
async fn default_persistence_gives_no_warning_with_the_restart_guard_on() {
    let warnings = persistence_warnings(true).await;
    assert!(warnings.is_empty(), "{warnings:#?}");
}
