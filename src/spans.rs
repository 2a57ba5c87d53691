//! The spans and per-node events the lock emits, with OpenTelemetry's field
//! names where one exists (`db.system.name`, `db.operation.name`,
//! `server.address`, `server.port`, `error.type`) and `redquorum.*` for the
//! rest. One span per operation at INFO (an acquisition attempt, an
//! extension round, a release, the start-up checks), one event per node
//! answer at DEBUG inside it. Nothing here ever records a lock value or a
//! credential: nodes are named by their address, resources by their name.

use std::time::Duration;

use tracing::Span;
use tracing::field::Empty;

/// `db.system.name` of every span and node event.
pub(crate) const DB_SYSTEM: &str = "redis";

/// Splits a node's address (`host:port`, or a socket path, with `/db`
/// when the database is not 0) into `server.address` and `server.port`.
pub(crate) fn host_port(name: &str) -> (&str, Option<u16>) {
    let server = match name.rsplit_once('/') {
        Some((server, db)) if !server.is_empty() && db.parse::<u32>().is_ok() => server,
        _ => name,
    };
    match server.rsplit_once(':') {
        Some((host, port)) => match port.parse() {
            Ok(port) => (host.trim_matches(['[', ']']), Some(port)),
            Err(_) => (server, None),
        },
        None => (server, None),
    }
}

/// The span of one acquisition attempt (`attempt` counts from 1).
pub(crate) fn acquire(resource: &str, attempt: u32, quorum: usize) -> Span {
    tracing::info_span!(
        "redquorum.acquire",
        "db.system.name" = DB_SYSTEM,
        "db.operation.name" = "acquire",
        "redquorum.resource" = resource,
        "redquorum.attempt" = attempt,
        "redquorum.quorum" = quorum,
        "redquorum.granted" = Empty,
        "redquorum.refused" = Empty,
        "redquorum.outcome" = Empty,
        "error.type" = Empty,
        "redquorum.elapsed_ms" = Empty,
    )
}

/// The span of one extension round.
pub(crate) fn extend(resource: &str, quorum: usize) -> Span {
    tracing::info_span!(
        "redquorum.extend",
        "db.system.name" = DB_SYSTEM,
        "db.operation.name" = "extend",
        "redquorum.resource" = resource,
        "redquorum.quorum" = quorum,
        "redquorum.granted" = Empty,
        "redquorum.refused" = Empty,
        "redquorum.outcome" = Empty,
        "error.type" = Empty,
        "redquorum.elapsed_ms" = Empty,
    )
}

/// The span of the release of a held lock (`dropped`: by a guard's `Drop`).
pub(crate) fn release(resource: &str, quorum: usize, dropped: bool) -> Span {
    tracing::info_span!(
        "redquorum.release",
        "db.system.name" = DB_SYSTEM,
        "db.operation.name" = "release",
        "redquorum.resource" = resource,
        "redquorum.quorum" = quorum,
        "redquorum.dropped" = dropped,
        "redquorum.granted" = Empty,
        "redquorum.refused" = Empty,
        "redquorum.outcome" = Empty,
        "error.type" = Empty,
        "redquorum.elapsed_ms" = Empty,
    )
}

/// The span of a failed attempt's clean-up, which runs in the background
/// after the attempt answered: a root span at DEBUG that follows from the
/// attempt's (a child would keep the attempt's span open until it ends).
pub(crate) fn cleanup(resource: &str, quorum: usize) -> Span {
    let span = tracing::debug_span!(
        parent: None,
        "redquorum.cleanup",
        "db.system.name" = DB_SYSTEM,
        "db.operation.name" = "release",
        "redquorum.resource" = resource,
        "redquorum.quorum" = quorum,
    );
    span.follows_from(Span::current());
    span
}

/// The span of one run of the start-up checks on `nodes` nodes.
pub(crate) fn check(nodes: usize) -> Span {
    tracing::info_span!(
        "redquorum.check",
        "db.system.name" = DB_SYSTEM,
        "db.operation.name" = "check",
        "redquorum.nodes" = nodes,
        "redquorum.problems" = Empty,
        "redquorum.outcome" = Empty,
        "error.type" = Empty,
        "redquorum.elapsed_ms" = Empty,
    )
}

/// The span of one node's release-notification feed (a long-lived task of
/// its own, parented to no operation), at DEBUG.
pub(crate) fn feed(server: &str) -> Span {
    let (address, port) = host_port(server);
    tracing::debug_span!(
        parent: None,
        "redquorum.notifications",
        "db.system.name" = DB_SYSTEM,
        "server.address" = address,
        "server.port" = port,
    )
}

/// How an operation ended, recorded on its span.
#[derive(Clone, Copy, Debug)]
pub(crate) struct End<'a> {
    /// What happened (`acquired`, `contended`, `released`, ...).
    pub(crate) outcome: &'a str,
    /// True when the outcome is a failure: then it is `error.type` too.
    pub(crate) failed: bool,
    /// Nodes that granted and refused, when counted.
    pub(crate) votes: Option<(usize, usize)>,
    pub(crate) elapsed: Duration,
}

/// Records `end` on `span`.
pub(crate) fn finish(span: &Span, end: End<'_>) {
    if span.is_disabled() {
        return;
    }
    span.record("redquorum.outcome", end.outcome);
    if end.failed {
        span.record("error.type", end.outcome);
    }
    if let Some((granted, refused)) = end.votes {
        span.record("redquorum.granted", granted);
        span.record("redquorum.refused", refused);
    }
    span.record("redquorum.elapsed_ms", millis(end.elapsed));
}

/// Records the votes of an operation's deciding round on the current span.
pub(crate) fn votes(granted: usize, refused: usize) {
    let span = Span::current();
    span.record("redquorum.granted", granted);
    span.record("redquorum.refused", refused);
}

/// Records the end of the start-up checks on `span`, and one DEBUG event
/// per node: reachable or not, latency, number of problems.
pub(crate) fn finish_check(
    span: &Span,
    checks: &[crate::error::node_check::NodeCheck],
    elapsed: Duration,
) {
    // Warnings (replicas, persistence) leave the check passed.
    let problems: usize = checks
        .iter()
        .map(|c| c.problems().iter().filter(|p| !p.is_warning()).count())
        .sum();
    let failed = problems > 0;
    let outcome = if failed { "problems" } else { "ok" };
    span.record("redquorum.problems", problems);
    finish(
        span,
        End {
            outcome,
            failed,
            votes: None,
            elapsed,
        },
    );
    let _inside = span.enter();
    for check in checks {
        let (address, port) = host_port(check.node());
        tracing::debug!(
            "db.system.name" = DB_SYSTEM,
            "db.operation.name" = "check",
            "server.address" = address,
            "server.port" = port,
            "redquorum.reachable" = check.reachable(),
            "redquorum.latency_ms" = check.latency().map(millis),
            "redquorum.problems" = check.problems().len(),
            "node checked"
        );
    }
}

/// A duration in milliseconds, for `redquorum.elapsed_ms`.
pub(crate) fn millis(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1e3
}

/// One node's answer to `op`, at DEBUG, inside the operation's span.
/// `error` is the `error.type` of a failed call; `late`: it came after
/// the round was decided.
pub(crate) fn node_answer(
    op: &str,
    server: &str,
    outcome: &dyn std::fmt::Display,
    error: Option<&str>,
    (elapsed, late): (Duration, bool),
) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let (address, port) = host_port(server);
    tracing::debug!(
        "db.system.name" = DB_SYSTEM,
        "db.operation.name" = op,
        "server.address" = address,
        "server.port" = port,
        "redquorum.outcome" = %outcome,
        "error.type" = error,
        "redquorum.elapsed_ms" = millis(elapsed),
        "redquorum.late" = late,
        "node answered"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_splits_tcp_addresses_and_keeps_socket_paths_whole() {
        assert_eq!(host_port("127.0.0.1:7001"), ("127.0.0.1", Some(7001)));
        assert_eq!(host_port("[::1]:6379"), ("::1", Some(6379)));
        assert_eq!(
            host_port("redis.internal:6380"),
            ("redis.internal", Some(6380))
        );
        assert_eq!(host_port("127.0.0.1:7001/3"), ("127.0.0.1", Some(7001)));
        assert_eq!(host_port("/run/redis.sock"), ("/run/redis.sock", None));
        assert_eq!(host_port("/run/redis.sock/2"), ("/run/redis.sock", None));
        assert_eq!(host_port("odd:name"), ("odd:name", None));
    }
}
