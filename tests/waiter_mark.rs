#![cfg(feature = "testkit")]
//! The waiter's mark (`+` appended to the holder's value, so that its
//! release announces itself) is put only on values that are ours by
//! construction: other software's values under the same prefix, whatever
//! their first character, are never changed, and their holders can still
//! release and extend them.

mod common;

use std::time::Duration;

use common::{get, key, query, set, unique};
use redquorum::{Error, LockOptions};

/// Compare-and-pexpire, then compare-and-delete, as another lock client
/// would release its own value: 1 and 1 when the value is still its own.
fn foreign_holder_extends_and_releases(url: &str, key: &str, value: &str) -> (i64, i64) {
    let extend = redis::cmd("EVAL")
        .arg(
            "if redis.call('get', KEYS[1]) == ARGV[1] then \
             return redis.call('pexpire', KEYS[1], 10000) end return 0",
        )
        .arg(1)
        .arg(key)
        .arg(value)
        .clone();
    let release = redis::cmd("EVAL")
        .arg(
            "if redis.call('get', KEYS[1]) == ARGV[1] then \
             return redis.call('del', KEYS[1]) end return 0",
        )
        .arg(1)
        .arg(key)
        .arg(value)
        .clone();
    let extended: i64 = query(url, &extend).unwrap_or_else(|e| panic!("{e}"));
    let released: i64 = query(url, &release).unwrap_or_else(|e| panic!("{e}"));
    (extended, released)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_never_marks_another_softwares_value_whatever_its_first_letter() {
    let nodes = common::nodes();
    let urls = nodes.urls();
    let redlock = common::redlock(&urls, common::fast_config());
    common::warm_up(&redlock).await;
    let wait = LockOptions::new().wait(redquorum::Wait::For(Duration::from_millis(300)));
    let hex39 = "0123456789abcdef0123456789abcdef0123456";
    let foreign = [
        // An uppercase UUID, a base64 token, uppercase hex.
        "F47AC10B-58CC-4372-A567-0E02B2C3D479".to_owned(),
        "Bm9uLXJlZHF1b3J1bSB0b2tlbg==".to_owned(),
        "DEADBEEFDEADBEEFDEADBEEFDEADBEEFDEADBEEF".to_owned(),
        // Our length and first letter, but not our grammar.
        format!("A{hex39}-tail"),
        format!("C{}", &hex39[..38]),
        format!("E{}", hex39.to_ascii_uppercase()),
    ];
    for value in &foreign {
        let resource = unique("foreign");
        let key = key(&resource);
        for url in &urls {
            set(url, &key, value, Duration::from_secs(10));
        }
        match redlock
            .lock_with(&resource, Duration::from_secs(5), &wait)
            .await
        {
            Err(Error::NotAcquired(why)) => {
                assert!(why.reason() == redquorum::Reason::Contended, "{why}")
            }
            other => panic!("the foreign holder has it, yet: {other:?}"),
        }
        redlock.shutdown().await;
        for url in &urls {
            assert_eq!(
                get(url, &key).as_deref(),
                Some(value.as_str()),
                "{value}: changed on {url}"
            );
            assert_eq!(
                foreign_holder_extends_and_releases(url, &key, value),
                (1, 1),
                "{value}: its holder cannot extend and release it on {url}"
            );
        }
    }
}

/// Our own values, with a holder label or without, are still marked, and
/// the marked lock still extends and releases (announcing itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_still_marks_our_own_values_labelled_or_not() {
    let nodes = common::nodes();
    let urls = nodes.urls();
    for label in [None, Some("web-3:4242 nightly.export")] {
        let mut config = common::fast_config();
        if let Some(label) = label {
            config = config.with_holder_label(label);
        }
        let redlock = common::redlock(&urls, config);
        common::warm_up(&redlock).await;
        let resource = unique("ours");
        let mut held = redlock
            .try_lock(&resource, Duration::from_secs(10))
            .await
            .expect("lock");
        let wait = LockOptions::new().wait(redquorum::Wait::For(Duration::from_millis(300)));
        assert!(
            redlock
                .lock_with(&resource, Duration::from_secs(5), &wait)
                .await
                .is_err()
        );
        redlock.shutdown().await;
        let marked = format!("{}+", held.value());
        for url in &urls {
            assert_eq!(
                get(url, &key(&resource)).as_deref(),
                Some(marked.as_str()),
                "{label:?}: not marked on {url}"
            );
        }
        held.extend(Duration::from_secs(10))
            .await
            .expect("a marked lock extends");
        held.release().await.expect("a marked lock releases");
    }
}
