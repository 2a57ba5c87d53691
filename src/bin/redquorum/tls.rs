//! `--tls-ca`, `--tls-cert` and `--tls-key`: the certificates of
//! `rediss://` nodes, read from PEM files into the config.

use redquorum::Config;

use crate::args::Cli;
use crate::{EX_CONFIG, Exit};

/// `config` with the certificates the command line names, if any. A file
/// that cannot be read is an `EX_CONFIG` exit naming it; a certificate
/// that does not parse is reported when the nodes are set up
/// (`Redlock::with_config`).
#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
pub fn certificates(cli: &Cli, config: Config) -> Result<Config, Exit> {
    use redquorum::redis::{ClientTlsConfig, TlsCertificates};

    if cli.tls_ca.is_none() && cli.tls_cert.is_none() {
        return Ok(config);
    }
    let root_cert = cli
        .tls_ca
        .as_deref()
        .map(|p| read(p, "CA certificate"))
        .transpose()?;
    let client_tls = match (&cli.tls_cert, &cli.tls_key) {
        (Some(cert), Some(key)) => {
            let client_key = read(key, "client key")?;
            warn_if_readable_by_all(key);
            Some(ClientTlsConfig {
                client_cert: read(cert, "client certificate")?,
                client_key,
            })
        }
        // clap requires both or neither.
        _ => None,
    };
    Ok(config.with_tls_certificates(TlsCertificates {
        client_tls,
        root_cert,
    }))
}

/// Without a TLS feature: certificates on the command line are an
/// `EX_CONFIG` exit saying how to get a build that takes them.
#[cfg(not(any(feature = "tls-rustls", feature = "tls-native-tls")))]
pub fn certificates(cli: &Cli, config: Config) -> Result<Config, Exit> {
    if cli.tls_ca.is_none() && cli.tls_cert.is_none() && cli.tls_key.is_none() {
        return Ok(config);
    }
    Err(Exit::error(
        EX_CONFIG,
        "--tls-ca, --tls-cert and --tls-key need a redquorum built with TLS: \
         cargo install redquorum --features cli,tls-rustls (or cli,tls-native-tls)"
            .to_owned(),
    ))
}

/// The bytes of the PEM file at `path`, or an exit naming it as `what`.
#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
fn read(path: &std::path::Path, what: &str) -> Result<Vec<u8>, Exit> {
    std::fs::read(path).map_err(|e| {
        Exit::error(
            EX_CONFIG,
            format!("cannot read the {what} {}: {e}", path.display()),
        )
    })
}

/// Warns on stderr when every user may read the private key at `path`.
#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
fn warn_if_readable_by_all(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;

    let readable_by_others = std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o004 != 0)
        .unwrap_or(false);
    if readable_by_others {
        eprintln!(
            "redquorum: warning: every user can read the client key {}: chmod o-r it",
            path.display()
        );
    }
}
