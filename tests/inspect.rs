#![cfg(feature = "testkit")]
//! `Redlock::inspect`: who holds a lock on each node, with the holder
//! label stored with it, never the lock value.

mod common;

use std::time::Duration;

use redquorum::{Config, Error, LockOptions, NodeHold, Redlock};

const TTL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn inspect_shows_the_label_ttl_and_counter_of_the_holder_but_never_its_value() {
    let cluster = common::cluster(3);
    let config = common::fast_config().with_holder_label("web-3:4242 nightly");
    let redlock = common::redlock(&cluster.urls(), config);
    let resource = common::unique("inspect");
    let guard = redlock
        .lock_with(&resource, TTL, &LockOptions::new().fencing(true))
        .await
        .expect("lock");
    let seen = redlock.inspect(&resource).await.expect("inspect");
    assert_eq!(seen.nodes().len(), 3);
    match seen.holder() {
        Some(NodeHold::Held { label, ttl, .. }) => {
            assert_eq!(label.as_deref(), Some("web-3:4242 nightly"));
            assert!(
                ttl.is_some_and(|t| t <= TTL && t > Duration::ZERO),
                "{ttl:?}"
            );
        }
        other => panic!("no holder on a quorum: {other:?}"),
    }
    assert_eq!(seen.counter(), guard.fencing_token());
    let shown = format!("{seen:?}");
    assert!(
        !shown.contains(guard.value()),
        "the lock value leaked: {shown}"
    );
    guard.release().await.expect("release");

    // The release returns once a quorum deleted the key: the last delete
    // may still be on its way (under load, seen as one node still held).
    let give_up = tokio::time::Instant::now() + Duration::from_secs(2);
    let seen = loop {
        let seen = redlock.inspect(&resource).await.expect("inspect");
        let free = seen.nodes().iter().all(|v| *v.hold() == NodeHold::Free);
        if free || tokio::time::Instant::now() >= give_up {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(seen.holder(), None);
    assert!(
        seen.nodes().iter().all(|v| *v.hold() == NodeHold::Free),
        "{seen:?}"
    );
}

#[tokio::test]
async fn inspect_shows_reentrant_owners_and_nodes_it_cannot_read() {
    let cluster = common::cluster(3);
    let redlock = common::redlock(&cluster.urls(), common::fast_config());
    let resource = common::unique("inspect-reentrant");
    let outer = redlock
        .lock_with(
            &resource,
            TTL,
            &redquorum::LockOptions::new().owner("job-17"),
        )
        .await
        .expect("outer");
    let inner = redlock
        .lock_with(
            &resource,
            TTL,
            &redquorum::LockOptions::new().owner("job-17"),
        )
        .await
        .expect("inner");
    cluster.kill(2).expect("kill");
    let seen = redlock.inspect(&resource).await.expect("inspect");
    assert!(
        matches!(seen.holder(), Some(NodeHold::Reentrant { owner, holds: 2, .. }) if owner == "job-17"),
        "{seen:?}"
    );
    assert!(matches!(seen.nodes()[2].hold(), NodeHold::Unknown(o) if o.is_unavailable()));
    inner.release().await.expect("inner release");
    outer.release().await.expect("outer release");
}

#[test]
fn an_unusable_label_or_resource_is_a_typed_error() {
    let err = Redlock::with_config(
        ["redis://127.0.0.1:1/"],
        Config::default().with_holder_label("two\nlines"),
    );
    assert!(matches!(err, Err(Error::Config(m)) if m.contains("holder label")));
}

#[tokio::test]
async fn inspecting_an_empty_resource_is_an_argument_error() {
    let redlock = common::redlock(&["redis://127.0.0.1:1/".to_owned()], Config::default());
    assert!(matches!(
        redlock.inspect("").await,
        Err(Error::InvalidArgument(_))
    ));
}
