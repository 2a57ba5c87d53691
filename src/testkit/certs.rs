//! [`TestCertificates`]: a CA and the certificates it signs, made at test
//! time, for TLS nodes.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

use super::error::TestkitError;

/// A fresh certificate authority (with a random name) and, signed by it, a server certificate
/// for `127.0.0.1` and `localhost` and a client certificate, all PEM. Made
/// at test time (ECDSA P-256 keys); nothing is read from or written to the
/// system's trust store.
///
/// [`LocalClusterBuilder::tls`](super::LocalClusterBuilder::tls) makes one
/// per cluster and starts the nodes with its server certificate; clients
/// trust its CA ([`ca_cert_pem`](Self::ca_cert_pem)), and present its client
/// certificate where the nodes require one. A second `generate()` gives an
/// unrelated CA, to show that a client trusting the wrong CA is refused.
///
/// ```
/// use redquorum::testkit::TestCertificates;
///
/// let certs = TestCertificates::generate()?;
/// assert!(certs.ca_cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
/// let other = TestCertificates::generate()?;
/// assert_ne!(certs.ca_cert_pem(), other.ca_cert_pem());
/// # Ok::<(), redquorum::testkit::TestkitError>(())
/// ```
#[derive(Clone)]
pub struct TestCertificates {
    ca_cert: String,
    server_cert: String,
    server_key: String,
    client_cert: String,
    client_key: String,
}

impl std::fmt::Debug for TestCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCertificates").finish_non_exhaustive()
    }
}

/// The PEM files a TLS `redis-server` is started with.
#[derive(Clone, Debug)]
pub(crate) struct CertFiles {
    pub(crate) ca_cert: PathBuf,
    pub(crate) server_cert: PathBuf,
    pub(crate) server_key: PathBuf,
}

fn failed(what: &'static str) -> impl Fn(rcgen::Error) -> TestkitError {
    move |e| TestkitError::Certificates {
        what,
        reason: e.to_string(),
    }
}

fn named(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, "redquorum testkit");
    name.push(DnType::CommonName, common_name);
    name
}

/// A certificate for `names`, for `purpose`, signed by `ca`.
fn leaf(
    ca: &CertifiedIssuer<'_, KeyPair>,
    names: &[&str],
    common_name: &str,
    purpose: ExtendedKeyUsagePurpose,
    what: &'static str,
) -> Result<(String, String), TestkitError> {
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let mut params = CertificateParams::new(names).map_err(failed(what))?;
    params.distinguished_name = named(common_name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![purpose];
    let key = KeyPair::generate().map_err(failed(what))?;
    let cert = params.signed_by(&key, ca).map_err(failed(what))?;
    Ok((cert.pem(), key.serialize_pem()))
}

impl TestCertificates {
    /// Makes a new CA, a server certificate (subject alternative names
    /// `127.0.0.1` and `localhost`) and a client certificate.
    ///
    /// # Errors
    ///
    /// [`TestkitError::Certificates`] if key generation or signing fails.
    pub fn generate() -> Result<Self, TestkitError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed("CA"))?;
        // A name of its own: a client trusting another cluster's CA then
        // finds no issuer for this one's certificates, as in real life.
        let ca_name = format!("redquorum testkit CA {:016x}", rand::random::<u64>());
        params.distinguished_name = named(&ca_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().map_err(failed("CA key"))?;
        let ca = CertifiedIssuer::self_signed(params, key).map_err(failed("CA"))?;
        let (server_cert, server_key) = leaf(
            &ca,
            &["127.0.0.1", "localhost"],
            "redquorum testkit node",
            ExtendedKeyUsagePurpose::ServerAuth,
            "server certificate",
        )?;
        let (client_cert, client_key) = leaf(
            &ca,
            &[],
            "redquorum testkit client",
            ExtendedKeyUsagePurpose::ClientAuth,
            "client certificate",
        )?;
        Ok(TestCertificates {
            ca_cert: ca.pem(),
            server_cert,
            server_key,
            client_cert,
            client_key,
        })
    }

    /// The CA certificate (PEM): what clients trust.
    #[must_use]
    pub fn ca_cert_pem(&self) -> &str {
        &self.ca_cert
    }

    /// The client certificate (PEM), signed by the CA.
    #[must_use]
    pub fn client_cert_pem(&self) -> &str {
        &self.client_cert
    }

    /// The client certificate's private key (PKCS #8 PEM).
    #[must_use]
    pub fn client_key_pem(&self) -> &str {
        &self.client_key
    }

    /// What a client needs, as redis takes it: the CA as the only root,
    /// and the client certificate with its key (used only by nodes that
    /// ask for one). Give it to
    /// [`Config::with_tls_certificates`](crate::Config::with_tls_certificates).
    ///
    /// ```
    /// use redquorum::testkit::TestCertificates;
    ///
    /// let certs = TestCertificates::generate()?.tls_certificates();
    /// assert!(certs.root_cert.is_some() && certs.client_tls.is_some());
    /// # Ok::<(), redquorum::testkit::TestkitError>(())
    /// ```
    #[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
    #[cfg_attr(
        docsrs,
        doc(cfg(any(feature = "tls-rustls", feature = "tls-native-tls")))
    )]
    #[must_use]
    pub fn tls_certificates(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: Some(redis::ClientTlsConfig {
                client_cert: self.client_cert.clone().into_bytes(),
                client_key: self.client_key.clone().into_bytes(),
            }),
            root_cert: Some(self.ca_cert.clone().into_bytes()),
        }
    }

    /// Writes the CA, the server certificate and its key into `dir`.
    pub(crate) fn write_server_files(&self, dir: &Path) -> Result<CertFiles, TestkitError> {
        let files = CertFiles {
            ca_cert: dir.join("ca.crt"),
            server_cert: dir.join("server.crt"),
            server_key: dir.join("server.key"),
        };
        for (path, pem) in [
            (&files.ca_cert, &self.ca_cert),
            (&files.server_cert, &self.server_cert),
            (&files.server_key, &self.server_key),
        ] {
            std::fs::write(path, pem).map_err(|source| TestkitError::Io {
                context: format!("writing {}", path.display()),
                source,
            })?;
        }
        Ok(files)
    }
}

/// How a node listens for TLS: its port (stable across restarts), its
/// certificate files, and whether it requires client certificates.
#[derive(Clone, Debug)]
pub(crate) struct ServerTls {
    pub(crate) port: u16,
    pub(crate) files: CertFiles,
    pub(crate) auth_clients: bool,
}

impl ServerTls {
    /// The `redis-server` arguments for it.
    pub(crate) fn args(&self) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> =
            vec!["--tls-port".into(), self.port.to_string().into()];
        for (flag, path) in [
            ("--tls-cert-file", &self.files.server_cert),
            ("--tls-key-file", &self.files.server_key),
            ("--tls-ca-cert-file", &self.files.ca_cert),
        ] {
            args.push(flag.into());
            args.push(path.into());
        }
        args.push("--tls-auth-clients".into());
        args.push(if self.auth_clients { "yes" } else { "no" }.into());
        args
    }
}
