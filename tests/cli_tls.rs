//! The `redquorum` binary against TLS nodes that require a client
//! certificate: `--tls-ca`, `--tls-cert` and `--tls-key` (or their
//! variables) name the PEM files.
#![cfg(all(
    feature = "testkit",
    feature = "cli",
    any(feature = "tls-rustls", feature = "tls-native-tls")
))]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::output;

use redquorum::testkit::LocalCluster;

/// Exit code when the nodes are misconfigured (EX_CONFIG).
const EX_CONFIG: i32 = 78;
/// Exit code when too few nodes answer (EX_UNAVAILABLE).
const EX_UNAVAILABLE: i32 = 69;
const EX_USAGE: i32 = 64;

/// Three TLS nodes that refuse clients without a certificate.
fn mutual_tls_cluster() -> LocalCluster {
    match LocalCluster::builder().nodes(3).tls_client_auth().start() {
        Ok(cluster) => cluster,
        Err(e) => panic!("cannot start TLS redis-server nodes: {e}"),
    }
}

/// A fresh directory holding the cluster's CA (`ca.pem`) and a client
/// certificate and key (`client.pem`, `client.key`); removed on drop.
struct PemFiles(PathBuf);

impl PemFiles {
    fn write(cluster: &LocalCluster) -> PemFiles {
        let Some(certs) = cluster.certificates() else {
            panic!("not a TLS cluster");
        };
        let dir = std::env::temp_dir().join(common::unique("redquorum-cli-tls"));
        let files = PemFiles(dir);
        let written = std::fs::create_dir_all(&files.0)
            .and_then(|()| std::fs::write(files.path("ca.pem"), certs.ca_cert_pem()))
            .and_then(|()| std::fs::write(files.path("client.pem"), certs.client_cert_pem()))
            .and_then(|()| std::fs::write(files.path("client.key"), certs.client_key_pem()));
        if let Err(e) = written {
            panic!("cannot write the PEM files: {e}");
        }
        files.private_key(true);
        files
    }

    /// Makes the client key readable by its owner only, or by everyone.
    fn private_key(&self, private: bool) {
        use std::os::unix::fs::PermissionsExt;
        let mode = if private { 0o600 } else { 0o644 };
        let key = self.path("client.key");
        if let Err(e) = std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)) {
            panic!("cannot chmod {}: {e}", shown(&key));
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for PemFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The binary on `cluster`'s nodes, with none of the variables it reads
/// set and a node timeout that tolerates a loaded machine.
fn redquorum(cluster: &LocalCluster) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_redquorum"));
    for var in [
        "REDQUORUM_NODES",
        "REDQUORUM_NODES_FILE",
        "REDLOCK_NODES",
        "REDLOCK_NODES_FILE",
        "REDQUORUM_PASSWORD",
        "REDQUORUM_TLS_CA",
        "REDQUORUM_TLS_CERT",
        "REDQUORUM_TLS_KEY",
    ] {
        command.env_remove(var);
    }
    command
        .arg("--nodes")
        .arg(cluster.urls().join(","))
        .arg("--node-timeout")
        .arg("2s");
    command
}

fn tls_flags<'a>(command: &'a mut Command, files: &PemFiles, names: &[&str]) -> &'a mut Command {
    for name in names {
        let (flag, file) = match *name {
            "ca" => ("--tls-ca", "ca.pem"),
            "cert" => ("--tls-cert", "client.pem"),
            _ => ("--tls-key", "client.key"),
        };
        command.arg(flag).arg(files.path(file));
    }
    command
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// `check` trusting the CA file at `ca`: (exit code, stderr).
fn check_with_ca(cluster: &LocalCluster, ca: &Path) -> (Option<i32>, String) {
    let (code, _, err) = output(redquorum(cluster).arg("--tls-ca").arg(ca).arg("check"));
    (code, err)
}

#[test]
fn check_and_run_work_over_mutual_tls_with_the_certificate_files() {
    let cluster = mutual_tls_cluster();
    let files = PemFiles::write(&cluster);

    let (code, out, err) = output(tls_flags(
        redquorum(&cluster).arg("check"),
        &files,
        &["ca", "cert", "key"],
    ));
    assert_eq!(code, Some(0), "check over mutual TLS: {out}{err}");
    assert!(!err.contains("warning"), "{err}");

    let resource = common::unique("cli-tls");
    let (code, out, err) = output(
        tls_flags(&mut redquorum(&cluster), &files, &["ca", "cert", "key"])
            .args(["run", "--resource", &resource, "--no-wait", "--"])
            .args(["sh", "-c", "echo held $REDQUORUM_RESOURCE"]),
    );
    assert_eq!(code, Some(0), "run over mutual TLS: {out}{err}");
    assert_eq!(out.trim(), format!("held {resource}"));
}

#[test]
fn the_certificate_files_also_come_from_the_environment() {
    let cluster = mutual_tls_cluster();
    let files = PemFiles::write(&cluster);
    let (code, out, err) = output(
        redquorum(&cluster)
            .env("REDQUORUM_TLS_CA", files.path("ca.pem"))
            .env("REDQUORUM_TLS_CERT", files.path("client.pem"))
            .env("REDQUORUM_TLS_KEY", files.path("client.key"))
            .arg("check"),
    );
    assert_eq!(code, Some(0), "check with the variables: {out}{err}");
}

#[test]
fn without_the_client_certificate_the_nodes_refuse_and_check_says_so() {
    let cluster = mutual_tls_cluster();
    let files = PemFiles::write(&cluster);
    let (code, out, err) = output(tls_flags(redquorum(&cluster).arg("check"), &files, &["ca"]));
    // rustls hears the server's alert (misconfigured TLS, 78); OpenSSL's
    // client may see only the connection closed (unreachable, 69).
    assert!(
        code == Some(EX_CONFIG) || code == Some(EX_UNAVAILABLE),
        "check without a client certificate: {code:?} {out}{err}"
    );
}

#[test]
fn a_missing_file_or_a_half_given_certificate_is_an_error_that_names_it() {
    let cluster = mutual_tls_cluster();
    let files = PemFiles::write(&cluster);
    let missing = files.path("nowhere.pem");
    let (code, err) = check_with_ca(&cluster, &missing);
    assert_eq!(code, Some(EX_CONFIG), "{err}");
    assert!(
        err.contains("CA certificate") && err.contains(&shown(&missing)),
        "{err}"
    );

    let (code, _, err) = output(tls_flags(
        redquorum(&cluster).arg("check"),
        &files,
        &["ca", "cert"],
    ));
    assert_eq!(code, Some(EX_USAGE), "{err}");
    assert!(err.contains("--tls-key"), "{err}");

    let garbage = files.path("garbage.pem");
    if let Err(e) = std::fs::write(&garbage, "not a certificate") {
        panic!("cannot write {}: {e}", shown(&garbage));
    }
    let (code, err) = check_with_ca(&cluster, &garbage);
    assert_eq!(code, Some(EX_CONFIG), "an unparsable CA: {err}");
}

#[test]
fn a_client_key_every_user_can_read_is_used_with_a_warning() {
    let cluster = mutual_tls_cluster();
    let files = PemFiles::write(&cluster);
    files.private_key(false);
    let (code, out, err) = output(tls_flags(
        redquorum(&cluster).arg("check"),
        &files,
        &["ca", "cert", "key"],
    ));
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        err.contains("warning") && err.contains("chmod o-r") && err.contains("client.key"),
        "{err}"
    );
}
