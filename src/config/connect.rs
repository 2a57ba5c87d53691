//! How nodes are connected: the certificates for `rediss://` nodes.

#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
use super::Config;

/// The connection part of a [`Config`](super::Config).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Connect {
    #[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
    certificates: Option<Certificates>,
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
    /// The certificates for `rediss://` nodes that bring none of their own.
    #[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
    pub(crate) fn certificates(&self) -> Option<&redis::TlsCertificates> {
        self.certificates.as_ref().map(|c| &c.0)
    }
}

impl super::Config {
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
    ///
    /// ```
    /// assert!(redquorum::Config::default().tls_certificates().is_none());
    /// ```
    pub fn tls_certificates(&self) -> Option<&redis::TlsCertificates> {
        self.connect.certificates()
    }
}
