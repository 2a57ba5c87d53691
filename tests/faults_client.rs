#![cfg(feature = "testkit")]
//! A client paused (GC, swap, SIGSTOP) past its validity.

mod common;

use std::time::Duration;

use redquorum::Error;
use redquorum::testkit::History;
use tokio::time::Instant;

#[tokio::test]
async fn a_client_paused_past_its_validity_cannot_extend_nor_delete_the_new_owners_key() {
    let nodes = common::cluster(5);
    let urls = nodes.urls();
    let (a, b) = (
        common::redlock(&urls, common::fast_config()),
        common::redlock(&urls, common::fast_config()),
    );
    let resource = common::unique("paused-client");
    let ttl = Duration::from_millis(300);
    let history = History::default();

    let mut first = a
        .lock(&resource, ttl)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let first_at = Instant::now();
    let first_until = first.valid_until();
    tokio::time::sleep(ttl + ttl / 2).await; // the "pause"

    let second = b
        .lock(&resource, ttl * 10)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let second_at = Instant::now();
    let key = common::key(&resource);
    let direct = nodes.direct_urls();
    let held = common::holding(&direct, &key, second.value());
    assert!(held.len() >= 3, "{held:?}");
    let extended = first.extend(ttl).await;
    assert!(matches!(extended, Err(Error::Expired)), "{extended:?}");
    let released = first.release().await;
    assert!(matches!(released, Err(Error::Expired)), "{released:?}");
    history.record(0, first_at, first_until, Instant::now());

    // Neither the late extend nor the late release touched a key of the
    // second owner.
    let after = common::holding(&direct, &key, second.value());
    assert!(
        held.iter().all(|i| after.contains(i)),
        "held on {held:?}, then on {after:?}"
    );
    history.record(1, second_at, second.valid_until(), Instant::now());
    second.release().await.unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "[client pause] acquisitions=2 overlaps={}",
        history.overlaps().len()
    );
    assert!(history.overlaps().is_empty());
}
