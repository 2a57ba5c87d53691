//! Ownership: only the holder's value releases or extends, a second release
//! or a late one never touches the next owner, extend never re-creates.
#![cfg(feature = "testkit")]

mod common;

use std::time::Duration;

use common::*;
use redquorum::Error;

#[tokio::test]
async fn a_foreign_value_cannot_release_or_extend_and_the_owner_keeps_the_lock() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), fast_config());
    let resource = unique("foreign");
    let mut owner = redlock
        .try_lock(&resource, Duration::from_secs(10))
        .await
        .unwrap();
    // Another client whose value differs: overwrite our value on the nodes
    // under a second guard's nose is not possible, so impersonate a
    // stranger: a lock on the same resource through another Redlock fails...
    let stranger = redlock.try_lock(&resource, Duration::from_secs(10)).await;
    assert!(
        matches!(stranger, Err(Error::NotAcquired(ref a)) if a.reason() == redquorum::Reason::Contended),
        "{stranger:?}"
    );
    // ...and a guard whose keys were taken over by someone else can neither
    // extend nor release them.
    for url in &urls {
        set(
            url,
            &key(&resource),
            "someone-else",
            Duration::from_secs(10),
        );
    }
    assert!(matches!(
        owner.extend(Duration::from_secs(10)).await,
        Err(Error::Expired)
    ));
    assert!(matches!(owner.release().await, Err(Error::Expired)));
    assert_eq!(holders(&urls, &key(&resource), "someone-else"), urls.len());
}

#[tokio::test]
async fn release_after_expiry_is_reported_and_spares_the_new_owner() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), fast_config());
    let resource = unique("expiry");
    let first = redlock
        .try_lock(&resource, Duration::from_millis(500))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(first.remaining().is_zero());
    let second = redlock
        .try_lock(&resource, Duration::from_secs(10))
        .await
        .expect("free after TTL");
    // A key of the first lock that landed late outlives its validity and
    // refuses the second there: the second holds a quorum, maybe not all.
    let held = holding(&urls, &key(&resource), second.value());
    assert!(held.len() >= 3, "{held:?}");
    let err = first
        .release()
        .await
        .expect_err("the first lock had expired");
    assert!(matches!(err, Error::Expired), "{err:?}");
    let after = holding(&urls, &key(&resource), second.value());
    assert!(
        held.iter().all(|i| after.contains(i)),
        "new owner's keys touched: held on {held:?}, then on {after:?}"
    );
    second.release().await.expect("new owner releases");
}

#[tokio::test]
async fn release_deletes_every_copy_and_the_next_owner_gets_the_lock_at_once() {
    // Releasing twice cannot be written: `release` consumes the guard (see
    // the compile_fail example on `LockGuard::release`).
    let nodes = nodes();
    let urls = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), fast_config().with_retries(0));
    let resource = unique("twice");
    let first = redlock
        .try_lock(&resource, Duration::from_secs(10))
        .await
        .unwrap();
    let value = first.value().to_owned();
    first.release().await.expect("first release");
    assert!(
        eventually(Duration::from_secs(5), || holders(
            &urls,
            &key(&resource),
            &value
        ) == 0)
        .await
    );
    let next = redlock
        .try_lock(&resource, Duration::from_secs(10))
        .await
        .expect("free after release");
    assert_ne!(next.value(), value, "a value was reused");
    assert!(settles_on(&urls, &key(&resource), next.value(), urls.len()).await);
    next.release().await.expect("next owner releases");
}

#[tokio::test]
async fn extend_after_expiry_fails_without_recreating_the_key() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), fast_config());
    let resource = unique("late-extend");
    let mut guard = redlock
        .try_lock(&resource, Duration::from_millis(500))
        .await
        .unwrap();
    assert!(settles_on(&urls, &key(&resource), guard.value(), urls.len()).await);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let err = guard
        .extend(Duration::from_secs(10))
        .await
        .expect_err("expired");
    assert!(matches!(err, Error::Expired), "{err:?}");
    assert_eq!(holders(&urls, &key(&resource), guard.value()), 0);
    for url in &urls {
        assert_eq!(get(url, &key(&resource)), None, "key re-created on {url}");
    }
}

#[tokio::test]
async fn extend_of_a_key_gone_from_a_quorum_fails_and_does_not_recreate_it() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), fast_config());
    let resource = unique("gone");
    let mut guard = redlock
        .try_lock(&resource, Duration::from_secs(10))
        .await
        .unwrap();
    // Wait for the slower nodes' SETs to land, then simulate a forward
    // clock jump on three nodes: the key expires there early.
    assert!(settles_on(&urls, &key(&resource), guard.value(), urls.len()).await);
    for url in &urls[..3] {
        query::<()>(url, redis::cmd("DEL").arg(key(&resource))).unwrap();
    }
    let err = guard
        .extend(Duration::from_secs(10))
        .await
        .expect_err("gone from a quorum");
    assert!(matches!(err, Error::Expired), "{err:?}");
    assert!(
        guard.remaining().is_zero(),
        "guard still claims validity after a failed extend"
    );
    for url in &urls[..3] {
        assert_eq!(get(url, &key(&resource)), None, "key re-created on {url}");
    }
}

#[tokio::test]
async fn extend_moves_the_deadline_and_the_ttl_on_every_node() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), fast_config());
    let resource = unique("extend");
    let mut guard = redlock
        .try_lock(&resource, Duration::from_secs(2))
        .await
        .unwrap();
    assert!(settles_on(&urls, &key(&resource), guard.value(), urls.len()).await);
    let before = guard.valid_until();
    guard.extend(Duration::from_secs(60)).await.expect("extend");
    assert!(guard.valid_until() > before + Duration::from_secs(30));
    // Extend returns at quorum; the other nodes follow a moment later.
    for url in &urls {
        let pttl = || query::<i64>(url, redis::cmd("PTTL").arg(key(&resource))).unwrap();
        let extended = eventually(Duration::from_secs(5), || pttl() > 30_000).await;
        assert!(extended, "PTTL {} on {url}", pttl());
    }
    guard.release().await.expect("release");
}

/// An extension never shortens a node's TTL: to a shorter TTL it lowers
/// the guard's deadline and leaves each node the longer one. So an older,
/// shorter extension that reaches a node after a newer, longer one (calls
/// on several connections may overtake each other) cannot cut the time a
/// quorum counted. Plain and reentrant locks alike.
#[tokio::test]
async fn an_extension_to_a_shorter_ttl_lowers_the_deadline_and_shortens_no_node() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    let redlock = redlock(&nodes.urls(), fast_config());
    let plain = unique("shorter");
    let reentrant = unique("shorter-reentrant");
    let options = redquorum::LockOptions::new().owner("worker-1");
    let mut guards = vec![
        redlock
            .try_lock(&plain, Duration::from_secs(60))
            .await
            .unwrap(),
        redlock
            .lock_with(&reentrant, Duration::from_secs(60), &options)
            .await
            .unwrap(),
    ];
    for (guard, resource) in guards.iter_mut().zip([&plain, &reentrant]) {
        let key = key(resource);
        let pttl = |url: &String| query::<i64>(url, redis::cmd("PTTL").arg(&key)).unwrap();
        assert!(
            eventually(Duration::from_secs(5), || urls
                .iter()
                .all(|u| pttl(u) > 50_000))
            .await
        );
        guard.extend(Duration::from_secs(2)).await.expect("extend");
        assert!(guard.remaining() <= Duration::from_secs(2));
        // Every node answered by now or soon: none holds less than before.
        tokio::time::sleep(Duration::from_millis(200)).await;
        for url in &urls {
            assert!(
                pttl(url) > 50_000,
                "{resource}: PTTL {} on {url}",
                pttl(url)
            );
        }
    }
    for guard in guards {
        guard.release().await.expect("release");
    }
}
