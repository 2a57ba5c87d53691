//! TLS of one node: what this build can do with a `rediss://` node, the
//! certificates from the config, and rustls's crypto provider.

use redis::{Client, ConnectionAddr, ConnectionInfo, RedisError};

use crate::config::Connect;
use crate::error::{Error, Result};

/// Whether this build speaks TLS to nodes.
const TLS_BUILT: bool = cfg!(any(feature = "tls-rustls", feature = "tls-native-tls"));

/// What to do about a `rediss://` node in a build without TLS.
const ENABLE_TLS: &str = "rediss:// (TLS) nodes need redquorum built with a TLS feature: \
     enable `tls-rustls` (pure Rust) or `tls-native-tls` (the platform's TLS library), e.g. \
     `redquorum = { version = \"0.1\", features = [\"tls-rustls\"] }` in Cargo.toml";

/// The error for a node address redis refused to parse.
pub(crate) fn unusable_url(index: usize, e: &RedisError) -> Error {
    Error::Config(unusable_url_message(index, &e.to_string(), TLS_BUILT))
}

/// The message of [`unusable_url`]: in a build without TLS, a refusal
/// that is about TLS says which feature to enable.
fn unusable_url_message(index: usize, reason: &str, tls_built: bool) -> String {
    if !tls_built && reason.contains("TLS") {
        format!("node {index}: not a usable Redis URL: {reason}; {ENABLE_TLS}")
    } else {
        format!("node {index}: not a usable Redis URL: {reason}")
    }
}

/// The client for one parsed node address: refuses what this build cannot
/// connect to, and gives a `rediss://` node without certificates of its
/// own those of the config.
pub(crate) fn client(
    index: usize,
    info: ConnectionInfo,
    name: &str,
    connect: &Connect,
) -> Result<Client> {
    let refuse = |what: &str| Err(Error::Config(format!("node {index} ({name}): {what}")));
    match info.addr() {
        ConnectionAddr::TcpTls { .. } if !TLS_BUILT => return refuse(ENABLE_TLS),
        ConnectionAddr::Unix(_) if !info.addr().is_supported() => {
            return refuse("unix sockets are not supported on this platform");
        }
        ConnectionAddr::TcpTls { insecure: true, .. }
            if cfg!(all(
                feature = "tls-rustls",
                not(feature = "tls-rustls-insecure")
            )) =>
        {
            return refuse(
                "`#insecure` (no certificate check) needs the feature `tls-rustls-insecure` \
                 with rustls; better, trust the node's CA with Config::with_tls_certificates",
            );
        }
        ConnectionAddr::TcpTls { .. } => ensure_crypto_provider(),
        _ => {}
    }
    #[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
    let opened = match (info.addr(), connect.certificates()) {
        (
            ConnectionAddr::TcpTls {
                tls_params: None, ..
            },
            Some(certificates),
        ) => Client::build_with_tls(info, certificates.clone()),
        _ => Client::open(info),
    };
    #[cfg(not(any(feature = "tls-rustls", feature = "tls-native-tls")))]
    let opened = {
        let _no_certificates_without_tls = connect;
        Client::open(info)
    };
    opened.map_err(|e| Error::Config(format!("node {index} ({name}): {e}")))
}

/// Makes sure rustls has a process-wide crypto provider before the first
/// TLS connection: redis builds its rustls configs from the process
/// default, and rustls panics when it has none and cannot pick one from
/// its features (none, or both of `ring` and `aws-lc-rs`, compiled in).
/// A provider the process installed first is kept; otherwise ring's is
/// installed. `install_default` is atomic: of two racing installs one
/// wins and the other is refused, and either way a provider is in place.
fn ensure_crypto_provider() {
    #[cfg(feature = "tls-rustls")]
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _already_installed = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tls_refusal_without_tls_names_the_features_to_enable() {
        // The message redis gives for rediss:// when built without TLS.
        let reason = "can't connect with TLS, the feature is not enabled";
        let message = unusable_url_message(0, reason, false);
        assert!(message.starts_with("node 0: not a usable Redis URL: can't connect with TLS"));
        assert!(message.contains("`tls-rustls`"), "{message}");
        assert!(message.contains("`tls-native-tls`"), "{message}");
        let built = unusable_url_message(0, reason, true);
        assert!(!built.contains("tls-rustls"), "{built}");
        let other = unusable_url_message(3, "Invalid database number", false);
        assert!(!other.contains("tls-rustls"), "{other}");
    }

    /// Runs in builds without TLS (a plain `cargo test`).
    #[cfg(not(any(feature = "tls-rustls", feature = "tls-native-tls")))]
    #[test]
    fn a_rediss_node_in_a_build_without_tls_names_the_features() {
        let node = crate::node::Node::new(
            1,
            "rediss://127.0.0.1:6380/",
            std::time::Duration::from_millis(5),
            &Connect::default(),
        );
        let message = node.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("node 1"), "{message}");
        assert!(message.contains("`tls-rustls`"), "{message}");
        assert!(message.contains("`tls-native-tls`"), "{message}");
    }
}
