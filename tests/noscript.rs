//! Scripts survive `SCRIPT FLUSH` and node restarts (NOSCRIPT is handled).
#![cfg(feature = "testkit")]

mod common;

use std::time::Duration;

use common::*;

#[tokio::test]
async fn release_and_extend_work_after_script_flush_on_every_node() {
    let nodes = nodes();
    let urls = nodes.direct_urls();
    // Reloading a script costs two more round trips; give every node time
    // for them even on a loaded machine, so that all of them take part.
    let redlock = redlock(
        &nodes.urls(),
        fast_config().with_node_timeout(Duration::from_secs(5)),
    );
    let resource = unique("flushed");
    // Load the scripts once.
    let mut guard = redlock
        .try_lock(&resource, Duration::from_secs(10))
        .await
        .unwrap();
    guard.extend(Duration::from_secs(10)).await.unwrap();
    // The lock lands on every node (late ones too) before the flush.
    let value = guard.value().to_owned();
    let everywhere = || holders(&urls, &key(&resource), &value);
    assert!(eventually(Duration::from_secs(5), || everywhere() == urls.len()).await);
    for url in &urls {
        query::<()>(url, &redis::cmd("SCRIPT").arg("FLUSH").to_owned()).unwrap();
    }
    guard
        .extend(Duration::from_secs(20))
        .await
        .expect("extend after SCRIPT FLUSH");
    // Extend returns at quorum; the last nodes reload the script and follow.
    for url in &urls {
        let pttl = || query::<i64>(url, redis::cmd("PTTL").arg(key(&resource))).unwrap();
        let applied = eventually(Duration::from_secs(10), || pttl() > 10_000).await;
        assert!(applied, "extend did not apply on {url}: PTTL {}", pttl());
    }
    for url in &urls {
        query::<()>(url, &redis::cmd("SCRIPT").arg("FLUSH").to_owned()).unwrap();
    }
    guard.release().await.expect("release after SCRIPT FLUSH");
    assert!(eventually(Duration::from_secs(10), || everywhere() == 0).await);
}

#[tokio::test]
async fn scripts_work_again_on_a_restarted_node() {
    let cluster = cluster(5);
    let urls = cluster.direct_urls();
    let redlock = redlock(&cluster.urls(), fast_config());
    let guard = redlock
        .try_lock("before", Duration::from_secs(10))
        .await
        .unwrap();
    guard.release().await.unwrap();
    for i in 0..5 {
        cluster.restart(i).unwrap();
    }
    // The first call on each node may fail on the dead connection; retries
    // reconnect.
    let mut guard = redlock
        .lock("after", Duration::from_secs(10))
        .await
        .expect("lock after restarts");
    guard
        .extend(Duration::from_secs(10))
        .await
        .expect("extend after restarts");
    let value = guard.value().to_owned();
    guard.release().await.expect("release after restarts");
    assert!(
        eventually(Duration::from_secs(5), || holders(
            &urls,
            &key("after"),
            &value
        ) == 0)
        .await
    );
}

#[tokio::test]
async fn a_release_still_deletes_on_a_node_that_forgot_its_scripts_and_answers_after_every_call_gave_up()
 {
    let cluster = cluster(5);
    let urls = cluster.direct_urls();
    let redlock = redlock(
        &cluster.urls(),
        fast_config().with_node_timeout(Duration::from_millis(200)),
    );
    let resource = unique("forgot-and-hung");
    let mut guard = redlock
        .try_lock(&resource, Duration::from_secs(30))
        .await
        .unwrap();
    let value = guard.value().to_owned();
    assert!(settles_on(&urls, &key(&resource), &value, urls.len()).await);
    // Node 0 forgets its scripts (as after a restart that kept its keys),
    // then answers nothing until every call below has given up on it.
    query::<()>(&urls[0], &redis::cmd("SCRIPT").arg("FLUSH").to_owned()).unwrap();
    cluster.pause(0).unwrap();
    guard
        .extend(Duration::from_secs(30))
        .await
        .expect("extend on 4 of 5 nodes");
    // The extend's call to node 0 times out.
    tokio::time::sleep(Duration::from_millis(400)).await;
    guard.release().await.expect("release on 4 of 5 nodes");
    // The background clean-up is over: nothing is sent to node 0 again.
    redlock.shutdown().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.resume(0).unwrap();
    // Node 0 now runs what it was sent, in order: it must delete the key.
    let gone = eventually(Duration::from_secs(5), || {
        get(&urls[0], &key(&resource)).is_none()
    })
    .await;
    assert!(
        gone,
        "node 0 still holds the released lock: {:?}",
        get(&urls[0], &key(&resource))
    );
}
