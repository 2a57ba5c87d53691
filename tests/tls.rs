//! TLS against real redis-server processes started with `--tls-port` and
//! certificates made at test time: locking on five nodes, mutual TLS,
//! certificates carried by a `ConnectionInfo`, `#insecure`, and a client
//! trusting the wrong CA, which must be told so (not "timed out"), also
//! when the handshake takes longer than the node timeout.
//!
//! With both TLS features on (`cargo test --all-features`), redis uses
//! rustls.
#![cfg(all(
    feature = "testkit",
    any(feature = "tls-rustls", feature = "tls-native-tls")
))]

mod common;

use std::time::Duration;

use redquorum::redis::{self, TlsCertificates};
use redquorum::testkit::{LocalCluster, ProxyMode, TestCertificates};
use redquorum::{Config, Error, NodeProblem, Redlock};

fn tls_cluster(n: usize, client_auth: bool) -> LocalCluster {
    let builder = LocalCluster::builder().nodes(n);
    let builder = if client_auth {
        builder.tls_client_auth()
    } else {
        builder.tls()
    };
    match builder.start() {
        Ok(cluster) => cluster,
        Err(e) => panic!("cannot start TLS redis-server nodes: {e}"),
    }
}

/// The certificates a client of `cluster` needs (its CA, a client certificate).
fn certificates(cluster: &LocalCluster) -> TlsCertificates {
    match cluster.certificates() {
        Some(certs) => certs.tls_certificates(),
        None => panic!("not a TLS cluster"),
    }
}

/// A CA unrelated to any cluster's.
fn wrong_ca() -> TlsCertificates {
    match TestCertificates::generate() {
        Ok(certs) => TlsCertificates {
            client_tls: None,
            root_cert: Some(certs.ca_cert_pem().as_bytes().to_vec()),
        },
        Err(e) => panic!("certificates: {e}"),
    }
}

/// `check()`, which waits for every node's connection to open: the tests
/// lock only once the connections are up, on a loaded machine too.
async fn connected(redlock: &Redlock) {
    if let Err(e) = redlock.check().await {
        panic!("check over TLS: {e}");
    }
}

/// The tests' config for TLS nodes: a connect timeout that tolerates a
/// loaded machine (a TLS connection costs milliseconds of CPU in a debug
/// build, OpenSSL's more than rustls's, and the tests run in parallel).
fn tls_config() -> Config {
    common::fast_config().with_connect_timeout(Duration::from_secs(5))
}

fn tls_redlock(cluster: &LocalCluster, config: Config) -> Redlock {
    common::redlock(&cluster.urls(), config)
}

/// The problems `check()` found, as (is it `NodeProblem::Tls`, reason);
/// panics on any other kind than TLS or unreachable.
fn connection_problems(result: redquorum::Result<()>) -> Vec<(bool, String)> {
    match result {
        Err(Error::Misconfigured(problems)) => problems
            .into_iter()
            .map(|p| match p {
                NodeProblem::Tls { reason, .. } => (true, reason),
                NodeProblem::Unreachable { reason, .. } => (false, reason),
                other => panic!("expected TLS or unreachable nodes, got {other}"),
            })
            .collect(),
        other => panic!("expected Error::Misconfigured, got {other:?}"),
    }
}

/// The reasons of the problems `check()` found; panics unless every one
/// is a `NodeProblem::Tls`.
fn tls_reasons(result: redquorum::Result<()>) -> Vec<String> {
    connection_problems(result)
        .into_iter()
        .map(|(tls, reason)| {
            assert!(tls, "expected NodeProblem::Tls, got unreachable: {reason}");
            reason
        })
        .collect()
}

fn is_certificate_error(reason: &str) -> bool {
    reason.to_lowercase().contains("certificate")
}

#[tokio::test]
async fn locks_extends_and_releases_over_tls_on_five_nodes() {
    let cluster = tls_cluster(5, false);
    assert!(cluster.urls().iter().all(|u| u.starts_with("rediss://")));
    let redlock = tls_redlock(
        &cluster,
        tls_config().with_tls_certificates(certificates(&cluster)),
    );
    connected(&redlock).await;
    let resource = common::unique("tls");
    let key = common::key(&resource);
    let mut guard = match redlock.lock(&resource, Duration::from_secs(10)).await {
        Ok(guard) => guard,
        Err(e) => panic!("lock over TLS: {e}"),
    };
    // The assertions read the nodes over their plain ports.
    let direct = cluster.direct_urls();
    assert!(common::settles_on(&direct, &key, guard.value(), 5).await);
    if let Err(e) = guard.extend(Duration::from_secs(60)).await {
        panic!("extend over TLS: {e}");
    }
    // Granted at quorum; the slower nodes follow a moment later.
    let pttl = |url: &String| -> i64 {
        common::query(url, redis::cmd("PTTL").arg(&key)).unwrap_or_else(|e| panic!("PTTL: {e}"))
    };
    let extended = common::eventually(Duration::from_secs(5), || {
        direct.iter().all(|url| pttl(url) > 10_000)
    })
    .await;
    let pttls: Vec<i64> = direct.iter().map(pttl).collect();
    assert!(extended, "extended to 60 s, PTTLs {pttls:?} ms");
    if let Err(e) = guard.release().await {
        panic!("release over TLS: {e}");
    }
    assert!(
        common::eventually(Duration::from_secs(5), || common::holders_any(
            &direct, &key
        ) == 0)
        .await
    );
}

#[tokio::test]
async fn mutual_tls_works_with_the_client_certificate_and_refuses_without_it() {
    let cluster = tls_cluster(3, true);
    let with_cert = tls_redlock(
        &cluster,
        tls_config().with_tls_certificates(certificates(&cluster)),
    );
    connected(&with_cert).await;
    match with_cert
        .try_lock(&common::unique("mtls"), Duration::from_secs(5))
        .await
    {
        Ok(guard) => {
            if let Err(e) = guard.release().await {
                panic!("release with a client certificate: {e}");
            }
        }
        Err(e) => panic!("lock with a client certificate: {e}"),
    }
    let ca_only = TlsCertificates {
        client_tls: None,
        ..certificates(&cluster)
    };
    let without = tls_redlock(&cluster, tls_config().with_tls_certificates(ca_only));
    // rustls hears the server's alert (a TLS failure); OpenSSL's client may
    // only see the connection closed (an I/O failure). Never a timeout.
    let problems = connection_problems(without.check().await);
    assert_eq!(problems.len(), 3, "{problems:?}");
    println!("check without a client certificate: {:?}", problems[0]);
    for (_, reason) in &problems {
        assert!(!reason.contains("timed out"), "{reason}");
    }
    let result = without
        .try_lock(&common::unique("mtls"), Duration::from_secs(5))
        .await;
    assert!(matches!(result, Err(Error::NotAcquired(_))), "{result:?}");
}

#[tokio::test]
async fn a_wrong_ca_is_reported_as_a_certificate_error() {
    let cluster = tls_cluster(5, false);
    let redlock = tls_redlock(&cluster, tls_config().with_tls_certificates(wrong_ca()));
    let reasons = tls_reasons(redlock.check().await);
    assert_eq!(reasons.len(), 5, "{reasons:?}");
    for reason in &reasons {
        assert!(is_certificate_error(reason), "{reason}");
    }
    println!("check: {}", reasons[0]);
    let err = match redlock
        .try_lock(&common::unique("wrong-ca"), Duration::from_secs(5))
        .await
    {
        Err(e @ Error::NotAcquired(_)) => e.to_string(),
        other => panic!("expected NotAcquired, got {other:?}"),
    };
    println!("try_lock: {err}");
    assert!(is_certificate_error(&err), "{err}");
    assert!(!err.contains("timed out"), "{err}");
}

#[tokio::test]
async fn a_wrong_ca_is_a_certificate_error_also_when_the_handshake_outlasts_the_node_timeout() {
    let cluster = tls_cluster(5, false);
    // Distant nodes: every chunk takes 75 ms each way, so the server's
    // certificate arrives some 150 ms after the client's hello, later than
    // the default node timeout (100 ms).
    for i in 0..cluster.len() {
        cluster.set_proxy(i, ProxyMode::Delay(Duration::from_millis(75)));
    }
    let config = Config::default()
        .with_connect_timeout(Duration::from_secs(5))
        .with_tls_certificates(wrong_ca());
    let redlock = tls_redlock(&cluster, config);
    let reasons = tls_reasons(redlock.check().await);
    println!("check: {}", reasons[0]);
    assert_eq!(reasons.len(), 5, "{reasons:?}");
    for reason in &reasons {
        assert!(is_certificate_error(reason), "{reason}");
    }
}

#[tokio::test]
async fn a_tls_connection_slower_to_open_than_the_node_timeout_still_opens() {
    let cluster = tls_cluster(5, false);
    for i in 0..cluster.len() {
        cluster.set_proxy(i, ProxyMode::Delay(Duration::from_millis(150)));
    }
    let config = tls_config()
        .with_node_timeout(Duration::from_millis(450))
        .with_retries(20)
        .with_retry_delay(Duration::from_millis(200))
        .with_tls_certificates(certificates(&cluster));
    let redlock = tls_redlock(&cluster, config);
    if let Err(e) = redlock.check().await {
        panic!("check of distant TLS nodes: {e}");
    }
    let resource = common::unique("far");
    match redlock.lock(&resource, Duration::from_secs(10)).await {
        Ok(guard) => drop(guard),
        Err(e) => panic!("lock on distant TLS nodes: {e}"),
    }
    redlock.shutdown().await;
}

#[tokio::test]
async fn nodes_given_as_connection_info_keep_their_own_certificates() {
    let cluster = tls_cluster(3, true);
    let infos: Vec<redis::ConnectionInfo> = cluster
        .urls()
        .iter()
        .map(
            |url| match redis::Client::build_with_tls(url.as_str(), certificates(&cluster)) {
                Ok(client) => client.get_connection_info().clone(),
                Err(e) => panic!("build_with_tls: {e}"),
            },
        )
        .collect();
    // The config's (wrong) CA does not replace the nodes' own.
    let config = tls_config().with_tls_certificates(wrong_ca());
    let redlock = match Redlock::with_config(infos, config) {
        Ok(redlock) => redlock,
        Err(e) => panic!("redlock: {e}"),
    };
    connected(&redlock).await;
    match redlock
        .try_lock(&common::unique("info"), Duration::from_secs(5))
        .await
    {
        Ok(guard) => {
            if let Err(e) = guard.release().await {
                panic!("release: {e}");
            }
        }
        Err(e) => panic!("lock with per-node certificates: {e}"),
    }
}

#[test]
fn unparsable_certificates_are_a_config_error_at_construction() {
    let certificates = TlsCertificates {
        client_tls: None,
        root_cert: Some(
            b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n".to_vec(),
        ),
    };
    let config = Config::default().with_tls_certificates(certificates);
    match Redlock::with_config(["rediss://127.0.0.1:6380/"], config) {
        Err(Error::Config(why)) => {
            println!("{why}");
            assert!(why.starts_with("node 0 (127.0.0.1:6380)"), "{why}");
        }
        other => panic!("expected Error::Config, got {other:?}"),
    }
}

/// `#insecure` skips certificate checks where the build allows it
/// (native-tls, or rustls with `tls-rustls-insecure`), and is refused at
/// construction, naming the feature, where it does not.
#[tokio::test]
async fn insecure_urls_skip_the_certificate_check_or_name_the_feature() {
    let cluster = tls_cluster(3, false);
    let urls: Vec<String> = cluster
        .urls()
        .iter()
        .map(|u| format!("{u}#insecure"))
        .collect();
    let built = Redlock::with_config(urls.iter().map(String::as_str), tls_config());
    if cfg!(all(
        feature = "tls-rustls",
        not(feature = "tls-rustls-insecure")
    )) {
        match built {
            Err(Error::Config(why)) => assert!(why.contains("`tls-rustls-insecure`"), "{why}"),
            other => panic!("expected Error::Config, got {other:?}"),
        }
        return;
    }
    let redlock = built.unwrap_or_else(|e| panic!("redlock: {e}"));
    connected(&redlock).await;
    match redlock
        .try_lock(&common::unique("insecure"), Duration::from_secs(5))
        .await
    {
        Ok(guard) => {
            if let Err(e) = guard.release().await {
                panic!("release: {e}");
            }
        }
        Err(e) => panic!("lock with #insecure and no CA: {e}"),
    }
}
