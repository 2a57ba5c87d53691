//! How nodes are connected: the connect timeout, and the certificates for
//! `rediss://` nodes.

use std::time::Duration;

use super::{Config, MAX_WAIT};
use crate::error::{Error, Result};

/// Default bound on opening one connection to one node (TCP, TLS
/// handshake, `HELLO`/`AUTH`).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// The connection part of a [`Config`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Connect {
    timeout: Duration,
    #[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
    certificates: Option<Certificates>,
}

impl Default for Connect {
    fn default() -> Self {
        Connect {
            timeout: DEFAULT_CONNECT_TIMEOUT,
            #[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
            certificates: None,
        }
    }
}

/// [`redis::TlsCertificates`], compared by content (redis does not).
#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
#[derive(Clone, Debug)]
struct Certificates(redis::TlsCertificates);

#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
impl PartialEq for Certificates {
    fn eq(&self, other: &Self) -> bool {
        let client = |c: &redis::TlsCertificates| {
            c.client_tls
                .as_ref()
                .map(|t| (t.client_cert.clone(), t.client_key.clone()))
        };
        self.0.root_cert == other.0.root_cert && client(&self.0) == client(&other.0)
    }
}

impl Connect {
    /// The bound on opening one connection.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The certificates for `rediss://` nodes that bring none of their own.
    #[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
    pub(crate) fn certificates(&self) -> Option<&redis::TlsCertificates> {
        self.certificates.as_ref().map(|c| &c.0)
    }

    /// Checks the connect timeout's range.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.timeout.is_zero() {
            return Err(Error::Config(
                "connect timeout is zero: no connection could open; use e.g. 1s".to_owned(),
            ));
        }
        if self.timeout > MAX_WAIT {
            return Err(Error::Config(format!(
                "connect timeout {:?} is longer than MAX_WAIT ({MAX_WAIT:?}); use a shorter one",
                self.timeout
            )));
        }
        Ok(())
    }
}

impl Config {
    /// Sets the bound on opening one connection to a node: TCP connect, TLS
    /// handshake and `HELLO`/`AUTH`. Each lock call is still bounded by the
    /// [node timeout](Self::with_node_timeout); a call that gives up while
    /// the connection is being opened leaves it opening in the background,
    /// up to this bound, so that a set-up slower than the node timeout (a
    /// TLS handshake to a distant node) still completes for the next call,
    /// or fails with its real reason (a certificate error, say) instead of
    /// "timed out". [`Redlock::check`](crate::Redlock::check) waits this
    /// long for each node's first answer. Not zero, at most [`MAX_WAIT`].
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redquorum::Config::default().with_connect_timeout(Duration::from_secs(3));
    /// ```
    #[must_use = "a setter returns the changed config"]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect.timeout = timeout;
        self
    }

    /// The bound on opening one connection to a node.
    pub(crate) fn connect_timeout(&self) -> Duration {
        self.connect.timeout
    }

    /// The connection settings, for the nodes.
    pub(crate) fn connect(&self) -> &Connect {
        &self.connect
    }
}

#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "tls-rustls", feature = "tls-native-tls")))
)]
impl Config {
    /// Sets the certificates for every `rediss://` node: `root_cert`, the
    /// CA certificate(s) to trust instead of the system's (PEM), and
    /// `client_tls`, a client certificate and key (PEM) for nodes that
    /// require one (`tls-auth-clients yes`). A node given as a
    /// [`redis::ConnectionInfo`] that already carries certificates (built
    /// with [`redis::Client::build_with_tls`]) keeps its own; plain
    /// `redis://` nodes ignore them.
    ///
    /// ```no_run
    /// use redquorum::redis::{ClientTlsConfig, TlsCertificates};
    /// use redquorum::{Config, Redlock};
    ///
    /// # fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let certificates = TlsCertificates {
    ///     root_cert: Some(std::fs::read("/etc/redis/tls/ca.crt")?),
    ///     client_tls: Some(ClientTlsConfig {
    ///         client_cert: std::fs::read("/etc/redis/tls/client.crt")?,
    ///         client_key: std::fs::read("/etc/redis/tls/client.key")?,
    ///     }),
    /// };
    /// let redlock = Redlock::with_config(
    ///     ["rediss://10.0.0.1:6380/", "rediss://10.0.0.2:6380/", "rediss://10.0.0.3:6380/"],
    ///     Config::default().with_tls_certificates(certificates),
    /// )?;
    /// # let _ = redlock; Ok(()) }
    /// ```
    ///
    /// A PEM that does not parse is reported by
    /// [`Redlock::with_config`](crate::Redlock::with_config) as
    /// [`Error::Config`](crate::Error::Config).
    #[must_use = "a setter returns the changed config"]
    pub fn with_tls_certificates(mut self, certificates: redis::TlsCertificates) -> Self {
        self.connect.certificates = Some(Certificates(certificates));
        self
    }

    /// The certificates set with
    /// [`with_tls_certificates`](Self::with_tls_certificates), if any.
    #[cfg(test)]
    pub(crate) fn tls_certificates(&self) -> Option<&redis::TlsCertificates> {
        self.connect.certificates()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connect_timeout_of_zero_or_beyond_max_wait_is_refused() {
        let zero = Config::default().with_connect_timeout(Duration::ZERO);
        let err = zero
            .validate(3)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("connect timeout is zero"), "{err}");
        let long = Config::default().with_connect_timeout(MAX_WAIT + Duration::from_secs(1));
        let err = long
            .validate(3)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("connect timeout") && err.contains("MAX_WAIT"),
            "{err}"
        );
        assert!(
            Config::default()
                .with_connect_timeout(MAX_WAIT)
                .validate(3)
                .is_ok()
        );
    }
}
