//! Release notifications: a waiting `lock()` wakes up when the lock is
//! released instead of sleeping out its retry delay, falls back to the delay
//! when notifications are off or refused, and leaves no subscription behind.
#![cfg(feature = "testkit")]

mod common;

use std::time::Duration;

use common::*;
use redquorum::{Config, Error, LockGuard, Redlock};
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(10);

/// Long, exact retry delays: a waiter that slept a whole one is obvious.
fn slow_retries(delay: Duration) -> Config {
    fast_config()
        .with_retries(20)
        .with_retry_delay(delay)
        .with_retry_jitter(Duration::ZERO)
}

async fn hold(redlock: &Redlock, resource: &str) -> LockGuard {
    match redlock.try_lock(resource, TTL).await {
        Ok(guard) => guard,
        Err(e) => panic!("holder: {e}"),
    }
}

/// Subscribers of `channel` on the node at `url`.
fn subscribers(url: &str, channel: &str) -> i64 {
    let cmd = redis::cmd("PUBSUB").arg("NUMSUB").arg(channel).clone();
    match query::<(String, i64)>(url, &cmd) {
        Ok((_, count)) => count,
        Err(e) => panic!("PUBSUB NUMSUB on {url}: {e}"),
    }
}

/// Waits until a waiter of `resource` has subscribed on every node.
async fn assert_subscribed(urls: &[String], resource: &str) {
    let subscribed = eventually(Duration::from_secs(5), || {
        urls.iter().all(|u| subscribers(u, &channel(resource)) == 1)
    })
    .await;
    assert!(subscribed, "the waiter never subscribed on every node");
}

/// The node at `url` (direct) refuses every channel to the default user:
/// `SUBSCRIBE` and `PUBLISH` fail there.
fn refuse_pub_sub(url: &str) {
    let acl = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg("resetchannels")
        .clone();
    query::<()>(url, &acl).expect("ACL SETUSER");
}

fn channel(resource: &str) -> String {
    format!("redquorum:released:{resource}")
}

/// A `Redlock` standing for another process: its releases reach the
/// waiters of the `Redlock` under test only through the nodes' messages.
async fn other_process(urls: &[String]) -> Redlock {
    let holder = redlock(urls, fast_config());
    warm_up(&holder).await;
    holder
}

/// Spawns `lock()` on `resource`; the task returns the result and when it
/// came back.
fn wait_for(
    redlock: &Redlock,
    resource: &str,
) -> tokio::task::JoinHandle<(redquorum::Result<LockGuard>, Instant)> {
    let (redlock, resource) = (redlock.clone(), resource.to_owned());
    tokio::spawn(async move {
        let result = redlock.lock(&resource, TTL).await;
        (result, Instant::now())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_acquires_right_after_the_release_not_after_its_retry_delay() {
    let nodes = nodes();
    let urls = nodes.urls();
    let redlock = redlock(&urls, slow_retries(Duration::from_secs(2)));
    let holder = other_process(&urls).await;
    warm_up(&redlock).await;
    let resource = unique("handoff");
    let guard = hold(&holder, &resource).await;
    let waiter = wait_for(&redlock, &resource);
    // The waiter has failed once and subscribed on every node.
    assert_subscribed(&urls, &resource).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released_at = Instant::now();
    guard.release().await.expect("release");
    let (result, acquired_at) = waiter.await.expect("waiter task");
    let waited = acquired_at - released_at;
    assert!(result.is_ok(), "waiter: {:?}", result.err());
    assert!(
        waited < Duration::from_secs(1),
        "the waiter took {waited:?} after the release: it slept its 2 s retry delay"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_guard_and_a_multi_resource_release_wake_waiters_too() {
    let nodes = nodes();
    let redlock = redlock(&nodes.urls(), slow_retries(Duration::from_secs(2)));
    warm_up(&redlock).await;
    let (a, b) = (unique("handoff-a"), unique("handoff-b"));

    let guard = hold(&redlock, &a).await;
    let waiter = wait_for(&redlock, &a);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_at = Instant::now();
    drop(guard);
    let (result, acquired_at) = waiter.await.expect("waiter task");
    assert!(
        result.is_ok(),
        "waiter on a dropped guard: {:?}",
        result.err()
    );
    assert!(acquired_at - released_at < Duration::from_secs(1));
    drop(result);

    let both = match redlock.lock(&[&a, &b], TTL).await {
        Ok(guard) => guard,
        Err(e) => panic!("lock_many: {e}"),
    };
    let waiter = wait_for(&redlock, &b);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_at = Instant::now();
    both.release().await.expect("release both");
    let (result, acquired_at) = waiter.await.expect("waiter task");
    assert!(result.is_ok(), "waiter on b: {:?}", result.err());
    assert!(acquired_at - released_at < Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_notifications_off_a_waiter_still_acquires_after_its_retry_delay() {
    let nodes = nodes();
    let urls = nodes.urls();
    let delay = Duration::from_millis(800);
    let redlock = redlock(&urls, slow_retries(delay).with_release_notifications(false));
    warm_up(&redlock).await;
    let resource = unique("handoff-off");
    let guard = hold(&redlock, &resource).await;
    let waiter = wait_for(&redlock, &resource);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        urls.iter()
            .all(|u| subscribers(u, &channel(&resource)) == 0),
        "a waiter subscribed although notifications are off"
    );
    let released_at = Instant::now();
    guard.release().await.expect("release");
    let (result, acquired_at) = waiter.await.expect("waiter task");
    assert!(result.is_ok(), "waiter: {:?}", result.err());
    // Not woken: the next attempt came with the retry delay (~600 ms left).
    assert!(acquired_at - released_at >= Duration::from_millis(300));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_nodes_refuse_pub_sub_locks_and_releases_still_work_through_the_retry_delay() {
    // Needs local nodes: it changes their ACL.
    let cluster = cluster(5);
    let urls = cluster.urls();
    for url in cluster.direct_urls() {
        refuse_pub_sub(&url);
    }
    let delay = Duration::from_millis(800);
    let redlock = redlock(&urls, slow_retries(delay));
    let holder = other_process(&urls).await;
    warm_up(&redlock).await;
    let resource = unique("handoff-acl");
    let guard = hold(&holder, &resource).await;
    let waiter = wait_for(&redlock, &resource);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        urls.iter()
            .all(|u| subscribers(u, &channel(&resource)) == 0),
        "SUBSCRIBE should have been refused by the ACL"
    );
    let released_at = Instant::now();
    // PUBLISH is refused inside the script: the release must not notice.
    guard.release().await.expect("release with PUBLISH refused");
    let (result, acquired_at) = waiter.await.expect("waiter task");
    let guard = result.expect("waiter acquires through the retry delay");
    assert!(acquired_at - released_at >= Duration::from_millis(300));
    guard.release().await.expect("second release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_heard_from_fewer_than_a_quorum_of_nodes_still_wakes_the_waiter() {
    // Needs local nodes: it changes their ACL. Three of five nodes refuse
    // pub/sub, so only two can announce the release: the waiter is woken
    // by the first, and sends its SET to the silent nodes half a node
    // timeout later, not a retry delay later.
    let cluster = cluster(5);
    let urls = cluster.urls();
    for url in &cluster.direct_urls()[..3] {
        refuse_pub_sub(url);
    }
    let delay = Duration::from_secs(5);
    let redlock = redlock(&urls, slow_retries(delay));
    let holder = other_process(&urls).await;
    warm_up(&redlock).await;
    let resource = unique("handoff-minority");
    let guard = hold(&holder, &resource).await;
    let waiter = wait_for(&redlock, &resource);
    let subscribed = eventually(Duration::from_secs(5), || {
        urls[3..]
            .iter()
            .all(|u| subscribers(u, &channel(&resource)) == 1)
    })
    .await;
    assert!(
        subscribed,
        "the waiter never subscribed on the two open nodes"
    );
    let released_at = Instant::now();
    guard.release().await.expect("release");
    let (result, acquired_at) = waiter.await.expect("waiter task");
    let guard = result.expect("the waiter acquires");
    let waited = acquired_at - released_at;
    assert!(waited < delay / 2, "slept its retry delay: {waited:?}");
    guard.release().await.expect("second release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_that_give_up_or_are_cancelled_leave_no_subscription_behind() {
    let nodes = nodes();
    let urls = nodes.urls();
    let config = fast_config()
        .with_retries(3)
        .with_retry_delay(Duration::from_millis(150))
        .with_retry_jitter(Duration::ZERO);
    let redlock = redlock(&urls, config);
    warm_up(&redlock).await;
    let resource = unique("handoff-gone");
    let guard = hold(&redlock, &resource).await;
    let mut giving_up = Vec::new();
    for _ in 0..3 {
        giving_up.push(wait_for(&redlock, &resource));
    }
    let cancelled = {
        let (redlock, resource) = (redlock.clone(), resource.clone());
        tokio::spawn(async move {
            tokio::time::timeout(Duration::from_millis(250), redlock.lock(&resource, TTL)).await
        })
    };
    let subscribed = eventually(Duration::from_secs(5), || {
        urls.iter()
            .all(|u| subscribers(u, &channel(&resource)) == 1)
    })
    .await;
    assert!(subscribed, "waiters share one subscription per node");
    assert!(cancelled.await.expect("cancelled task").is_err());
    for waiter in giving_up {
        let (result, _) = waiter.await.expect("waiter task");
        assert!(matches!(result, Err(Error::NotAcquired(_))), "{result:?}");
    }
    let gone = eventually(Duration::from_secs(5), || {
        urls.iter()
            .all(|u| subscribers(u, &channel(&resource)) == 0)
    })
    .await;
    assert!(gone, "a subscription outlived its waiters");
    guard.release().await.expect("release");
}

/// `CLIENT KILL TYPE pubsub` on the node at `url`: how many were killed.
fn kill_pub_sub_clients(url: &str) -> i64 {
    let cmd = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .clone();
    match query::<i64>(url, &cmd) {
        Ok(killed) => killed,
        Err(e) => panic!("CLIENT KILL TYPE pubsub on {url}: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_still_wakes_a_waiter_after_the_pub_sub_connections_are_killed() {
    let cluster = cluster(3);
    let (urls, direct) = (cluster.urls(), cluster.direct_urls());
    let delay = Duration::from_secs(30);
    let redlock = redlock(&urls, slow_retries(delay));
    let holder = other_process(&urls).await;
    warm_up(&redlock).await;
    let resource = unique("handoff-killed");
    let guard = hold(&holder, &resource).await;
    let waiter = wait_for(&redlock, &resource);
    let subscribed = eventually(Duration::from_secs(5), || {
        direct
            .iter()
            .all(|u| subscribers(u, &channel(&resource)) == 1)
    })
    .await;
    assert!(subscribed, "the waiter never subscribed on every node");

    for url in &direct {
        assert!(kill_pub_sub_clients(url) >= 1, "no pub/sub client on {url}");
    }
    // The resource keeps its waiter: no new subscription is asked for.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let released_at = Instant::now();
    guard.release().await.expect("release");
    let Ok(joined) = tokio::time::timeout(Duration::from_secs(10), waiter).await else {
        panic!("no wake-up within 10 s of the release: the waiter sleeps its {delay:?} retry delay")
    };
    let (result, acquired_at) = joined.expect("waiter task");
    assert!(result.is_ok(), "waiter: {:?}", result.err());
    assert!(acquired_at - released_at < Duration::from_secs(10));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Takes `resource`, trying a few times: the node connections of a runtime
/// that has shut down may fail their first call.
async fn hold_retrying(redlock: &Redlock, resource: &str) -> LockGuard {
    let mut last = None;
    for _ in 0..5 {
        match redlock.try_lock(resource, TTL).await {
            Ok(guard) => return guard,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("holder: {last:?}")
}

/// Holds `resource` from another `Redlock`, lets a waiter of `redlock`
/// wait with `delay` retries, releases and returns how long after the
/// release the waiter got the lock (None: not within 10 s).
async fn hand_off(redlock: &Redlock, urls: &[String], resource: &str) -> Option<Duration> {
    let holder = other_process(urls).await;
    let guard = hold_retrying(&holder, resource).await;
    let waiter = wait_for(redlock, resource);
    // Give the waiter time to fail once and subscribe (if it can).
    eventually(Duration::from_secs(5), || {
        urls.iter().all(|u| subscribers(u, &channel(resource)) == 1)
    })
    .await;
    let released_at = Instant::now();
    guard.release().await.expect("release");
    let joined = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .ok()?;
    let (result, acquired_at) = joined.expect("waiter task");
    match result {
        Ok(guard) => guard.release().await.expect("waiter's release"),
        Err(e) => panic!("waiter: {e}"),
    }
    Some(acquired_at - released_at)
}

#[test]
fn a_redlock_outliving_its_first_runtime_still_hears_releases_on_the_next_one() {
    let cluster = cluster(3);
    let urls = cluster.urls();
    let delay = Duration::from_secs(30);
    let redlock = redlock(&urls, slow_retries(delay));
    let resource = unique("handoff-runtimes");

    // The release-notification feeds start on the first runtime.
    let first = runtime().block_on(hand_off(&redlock, &urls, &resource));
    assert!(first.is_some(), "no wake-up on the first runtime");
    // That runtime is gone now, and its tasks with it.
    let second = runtime().block_on(hand_off(&redlock, &urls, &resource));
    assert!(
        second.is_some(),
        "no wake-up within 10 s of the release on the second runtime: \
         the waiter sleeps its {delay:?} retry delay"
    );
}

/// `PUBLISH` calls the node at `url` has run, its scripts' included.
fn publishes(url: &str) -> u64 {
    let cmd = redis::cmd("INFO").arg("commandstats").clone();
    let info: String = match query(url, &cmd) {
        Ok(info) => info,
        Err(e) => panic!("INFO commandstats on {url}: {e}"),
    };
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_publish:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_publishes_only_when_someone_waits() {
    let nodes = nodes();
    let urls = nodes.urls();
    let redlock = redlock(&urls, slow_retries(Duration::from_secs(2)));
    warm_up(&redlock).await;
    let before: Vec<u64> = urls.iter().map(|u| publishes(u)).collect();
    for _ in 0..20 {
        let guard = hold(&redlock, &unique("quiet")).await;
        guard.release().await.expect("release");
    }
    let quiet: Vec<u64> = urls.iter().map(|u| publishes(u)).collect();
    assert_eq!(quiet, before, "releases with nobody waiting published");
    // The control: with a waiter, the release is announced on the nodes.
    let resource = unique("awaited");
    let guard = hold(&redlock, &resource).await;
    let waiter = wait_for(&redlock, &resource);
    assert_subscribed(&urls, &resource).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    guard.release().await.expect("release");
    let (result, _) = waiter.await.expect("waiter task");
    assert!(result.is_ok(), "waiter: {:?}", result.err());
    let announced = urls
        .iter()
        .zip(&quiet)
        .filter(|(u, q)| publishes(u) > **q)
        .count();
    assert!(
        announced >= 3,
        "only {announced} nodes announced the release"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_marks_the_held_lock_which_still_extends_and_releases() {
    let nodes = nodes();
    let urls = nodes.urls();
    let redlock = redlock(&urls, slow_retries(Duration::from_secs(2)));
    warm_up(&redlock).await;
    let resource = unique("marked");
    let mut guard = hold(&redlock, &resource).await;
    let waiter = wait_for(&redlock, &resource);
    let marked = |urls: &[String]| {
        urls.iter()
            .filter(|u| get(u, &key(&resource)).is_some_and(|v| v.ends_with('+')))
            .count()
    };
    assert!(
        eventually(Duration::from_secs(5), || marked(&urls) == urls.len()).await,
        "the waiter's failed attempt did not mark the lock on every node"
    );
    guard
        .extend(TTL)
        .await
        .expect("a marked lock still extends");
    assert_eq!(marked(&urls), urls.len(), "extending dropped the mark");
    guard.release().await.expect("a marked lock still releases");
    let (result, _) = waiter.await.expect("waiter task");
    let mine = result.expect("the waiter gets the lock");
    // The new holder's value is its own, unmarked until someone waits.
    assert!(marked(&urls) < 3, "the new holder's lock is marked");
    mine.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_leaves_a_lock_value_of_an_earlier_version_as_it_is() {
    let nodes = nodes();
    let urls = nodes.urls();
    let redlock = redlock(&urls, slow_retries(Duration::from_millis(200)));
    warm_up(&redlock).await;
    let resource = unique("older");
    // A holder of an earlier version: lowercase hex, no mark to expect.
    let older = "3fa2c1d0e9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4";
    for url in &urls {
        set(url, &key(&resource), older, Duration::from_secs(10));
    }
    let waiter = wait_for(&redlock, &resource);
    assert_subscribed(&urls, &resource).await;
    // Several failed attempts later, the value is still the holder's own.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for url in &urls {
        assert_eq!(get(url, &key(&resource)).as_deref(), Some(older), "{url}");
    }
    for url in &urls {
        query::<()>(url, redis::cmd("DEL").arg(key(&resource))).unwrap_or_else(|e| panic!("{e}"));
    }
    let (result, _) = waiter.await.expect("waiter task");
    result
        .expect("the waiter gets the freed lock")
        .release()
        .await
        .expect("release");
}

/// The lock value of `resource` on the node at `url` (direct).
fn stored(url: &str, resource: &str) -> Option<String> {
    let cmd = redis::cmd("GET")
        .arg(format!("redquorum:lock:{resource}"))
        .clone();
    match query::<Option<String>>(url, &cmd) {
        Ok(value) => value,
        Err(e) => panic!("GET on {url}: {e}"),
    }
}

/// Five local nodes that refuse pub/sub (none can announce a release),
/// their direct URLs, and a `Redlock` over them with exact `delay`
/// retries.
async fn deaf_nodes(delay: Duration) -> (redquorum::testkit::LocalCluster, Vec<String>, Redlock) {
    let cluster = cluster(5);
    let direct = cluster.direct_urls();
    for url in &direct {
        refuse_pub_sub(url);
    }
    let redlock = redlock(&cluster.urls(), slow_retries(delay));
    warm_up(&redlock).await;
    (cluster, direct, redlock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_hands_the_lock_to_a_waiter_of_the_same_redlock_even_where_no_node_delivers_messages()
 {
    // Needs local nodes: it changes their ACL. No node can announce the
    // release, so only the releasing `Redlock` itself can wake its waiter,
    // whose SETs then follow the deletes on the same connections.
    let delay = Duration::from_secs(30);
    let (_cluster, direct, redlock) = deaf_nodes(delay).await;
    let resource = unique("handoff-here");
    let guard = hold(&redlock, &resource).await;
    let waiter = wait_for(&redlock, &resource);
    // The waiter's failed attempt marks the held lock (`+`) as it cleans up.
    let marked = eventually(Duration::from_secs(5), || {
        direct
            .iter()
            .all(|u| stored(u, &resource).is_some_and(|v| v.ends_with('+')))
    })
    .await;
    assert!(
        marked,
        "the waiter never failed an attempt on the held lock"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released_at = Instant::now();
    guard.release().await.expect("release");
    let Ok(joined) = tokio::time::timeout(Duration::from_secs(10), waiter).await else {
        panic!(
            "no hand-off within 10 s of the release: the waiter sleeps its {delay:?} retry delay"
        )
    };
    let (result, acquired_at) = joined.expect("waiter task");
    let guard = result.expect("the waiter acquires");
    assert!(acquired_at - released_at < Duration::from_secs(10));
    guard.release().await.expect("second release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_hands_a_lock_to_its_own_waiters_at_most_four_times_in_a_row() {
    // Needs local nodes: it changes their ACL. No node announces releases,
    // so every wake-up within 2 s is a hand-off within the Redlock; the
    // fifth waiter is left to the nodes, and sleeps its retry delay.
    let delay = Duration::from_secs(5);
    let (_cluster, _, redlock) = deaf_nodes(delay).await;
    let resource = unique("handoff-streak");
    let guard = hold(&redlock, &resource).await;
    let waiters: Vec<_> = (0..5)
        .map(|_| {
            let (redlock, resource) = (redlock.clone(), resource.clone());
            tokio::spawn(async move {
                let guard = match redlock.lock(&resource, TTL).await {
                    Ok(guard) => guard,
                    Err(e) => panic!("waiter: {e}"),
                };
                let acquired_at = Instant::now();
                guard.release().await.expect("waiter's release");
                acquired_at
            })
        })
        .collect();
    // Each waiter's first attempt fails within milliseconds.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let released_at = Instant::now();
    guard.release().await.expect("release");
    let mut waited = Vec::new();
    for waiter in waiters {
        waited.push(waiter.await.expect("waiter task") - released_at);
    }
    waited.sort();
    let soon = Duration::from_secs(2);
    assert!(
        waited[..4].iter().all(|w| *w < soon),
        "four hand-offs in a row within the Redlock: {waited:?}"
    );
    assert!(waited[4] >= soon, "a fifth hand-off in a row: {waited:?}");
}
