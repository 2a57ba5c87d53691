//! The metrics as a Prometheus server scrapes them: with the exporter's
//! recommended naming (`with_recommended_naming(true)`) and
//! `redquorum::metrics::describe()`, names carry their unit and counters
//! end in `_total`; every node has a reachability gauge.
#![cfg(all(feature = "testkit", feature = "metrics"))]

mod common;

use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

const TTL: Duration = Duration::from_secs(10);

/// The line of `redquorum_node_up` for the node at `url`, if rendered.
fn up_line(text: &str, url: &str) -> Option<String> {
    let port = common::port_of(url);
    let series =
        format!("redquorum_node_up{{server_address=\"127.0.0.1\",server_port=\"{port}\"}}");
    text.lines()
        .find(|l| l.starts_with(&series))
        .map(str::to_owned)
}

/// Renders until `done` holds for the text, for at most two seconds (a
/// late answer is recorded when it arrives).
async fn render_until(handle: &PrometheusHandle, done: impl Fn(&str) -> bool) -> String {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        let text = handle.render();
        if done(&text) || tokio::time::Instant::now() >= give_up {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn names_carry_units_and_total_and_each_node_has_a_reachability_gauge() {
    let recorder = PrometheusBuilder::new()
        .with_recommended_naming(true)
        .build_recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    redquorum::metrics::describe();

    let cluster = common::cluster(3);
    let redlock = common::redlock(&cluster.urls(), common::fast_config());
    let mut guard = redlock
        .lock(&common::unique("prometheus"), TTL)
        .await
        .expect("lock");
    guard.extend(TTL).await.expect("extend");
    // Both calls return at a quorum: the third node's answers may still be
    // on their way (its first connection, on a loaded machine).
    let urls = cluster.urls();
    let text = render_until(&handle, |t| {
        urls.iter()
            .all(|u| up_line(t, u).is_some_and(|l| l.ends_with(" 1")))
    })
    .await;
    for name in [
        "redquorum_lock_acquire_duration_seconds_count",
        "redquorum_lock_wait_duration_seconds_count",
        "redquorum_lock_extensions_total{",
        "redquorum_node_votes_total{",
        "redquorum_node_call_duration_seconds_count",
        "# TYPE redquorum_node_up gauge",
    ] {
        assert!(text.contains(name), "no {name} in:\n{text}");
    }
    for url in &urls {
        assert_eq!(
            up_line(&text, url).as_deref().map(|l| l.ends_with(" 1")),
            Some(true),
            "{url}:\n{text}"
        );
    }

    // A node that stopped answering reads 0, the others still 1.
    cluster.kill(2).expect("kill node 2");
    let r = guard.release().await;
    eprintln!("RELEASE {r:?}");
    let dead = cluster.url(2);
    let text = render_until(&handle, |t| {
        up_line(t, &dead).is_some_and(|l| l.ends_with(" 0"))
    })
    .await;
    assert_eq!(
        up_line(&text, &dead).as_deref().map(|l| l.ends_with(" 0")),
        Some(true),
        "{text}"
    );
    for i in 0..2 {
        let line = up_line(&text, &cluster.url(i)).unwrap_or_default();
        assert!(line.ends_with(" 1"), "{line}");
    }
    redlock.shutdown().await;
}
