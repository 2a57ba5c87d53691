//! [`NodeFailure`]: why one node gave no usable answer, sorted into a
//! [`FailureKind`] that tells an outage (wait, retry) from a
//! misconfiguration (fix the deployment).

use std::fmt;

use redis::{ErrorKind, RedisError, ServerErrorKind};

/// What kind of failure a node call met. See [`NodeFailure`].
///
/// ```
/// use redquorum::FailureKind;
///
/// assert!(FailureKind::Auth.is_misconfiguration());
/// assert!(!FailureKind::ConnectionRefused.is_misconfiguration());
/// let denied = FailureKind::NoPermission { command: Some("pexpire".into()) };
/// assert!(denied.is_misconfiguration());
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The connection was refused: nothing listens at the address (the
    /// node is down or restarting, or the port is wrong).
    ConnectionRefused,
    /// Another I/O error: the connection was reset or dropped, the name did
    /// not resolve, the node closed the connection.
    Io,
    /// The TLS handshake failed: the certificate is not trusted (wrong CA),
    /// its name does not match, or TLS was spoken to a plain port.
    Tls,
    /// The node refused our credentials (`NOAUTH`, `WRONGPASS`).
    Auth,
    /// The node's ACL forbids a command, or a key or channel, that the lock
    /// needs (`NOPERM`). `command` names the command when it is known.
    NoPermission {
        /// The command the ACL must allow, in lower case (`pexpire`,
        /// `evalsha`, `role`), when known.
        command: Option<String>,
    },
    /// The node is a read-only replica (`READONLY`): list masters only.
    ReadOnly,
    /// Anything else: another server error (`LOADING`, `BUSY`, `MOVED`,
    /// an unexpected reply).
    Other,
}

impl FailureKind {
    /// A short name, for `error.type` in spans and metrics.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            FailureKind::ConnectionRefused => "connection_refused",
            FailureKind::Io => "io",
            FailureKind::Tls => "tls",
            FailureKind::Auth => "auth",
            FailureKind::NoPermission { .. } => "no_permission",
            FailureKind::ReadOnly => "read_only",
            FailureKind::Other => "other",
        }
    }

    /// True for failures that waiting does not cure: credentials, ACL,
    /// a replica, TLS settings. A lock attempt that fails for want of such
    /// nodes is not retried.
    ///
    /// ```
    /// assert!(redquorum::FailureKind::ReadOnly.is_misconfiguration());
    /// assert!(!redquorum::FailureKind::Io.is_misconfiguration());
    /// ```
    pub fn is_misconfiguration(&self) -> bool {
        matches!(
            self,
            FailureKind::Tls
                | FailureKind::Auth
                | FailureKind::NoPermission { .. }
                | FailureKind::ReadOnly
        )
    }
}

/// Why one call to one node failed: a [`FailureKind`] to match on and the
/// message the connection or the server gave. Carried by
/// [`NodeOutcome::Failed`](crate::NodeOutcome::Failed).
///
/// ```
/// use redquorum::{FailureKind, NodeOutcome};
///
/// # fn show(outcome: &NodeOutcome) {
/// if let NodeOutcome::Failed(failure) = outcome {
///     match failure.kind() {
///         FailureKind::NoPermission { command: Some(c) } => eprintln!("allow {c} in the ACL"),
///         kind if kind.is_misconfiguration() => eprintln!("fix the node's settings: {failure}"),
///         _ => eprintln!("node down? {failure}"),
///     }
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFailure {
    kind: FailureKind,
    message: String,
    code: Option<String>,
}

impl NodeFailure {
    /// A failure of `kind` with `message`.
    pub(crate) fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        NodeFailure {
            kind,
            message: message.into(),
            code: None,
        }
    }

    /// Sorts a redis error into a kind.
    pub(crate) fn from_redis(e: &RedisError) -> Self {
        let message = e.to_string();
        let kind = kind_of(e, &message);
        NodeFailure {
            kind,
            message,
            code: e.code().map(str::to_owned),
        }
    }

    /// What kind of failure it was.
    pub fn kind(&self) -> &FailureKind {
        &self.kind
    }

    /// The message of the connection or the server.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The server's error code (`MOVED`, `NOPERM`...), if it sent one.
    pub(crate) fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }
}

impl fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            FailureKind::NoPermission { command: Some(c) } => {
                write!(f, "the ACL forbids `{c}`: {}", self.message)
            }
            _ => f.write_str(&self.message),
        }
    }
}

/// The kind of a redis error. `message` is its text, for the errors that
/// only the text tells apart (TLS, a script refused by the ACL).
fn kind_of(e: &RedisError, message: &str) -> FailureKind {
    match e.kind() {
        ErrorKind::AuthenticationFailed => return FailureKind::Auth,
        ErrorKind::Server(ServerErrorKind::NoPerm) => {
            return FailureKind::NoPermission {
                command: quoted_command(message),
            };
        }
        ErrorKind::Server(ServerErrorKind::ReadOnly) => return FailureKind::ReadOnly,
        _ => {}
    }
    match e.code() {
        Some("NOAUTH" | "WRONGPASS") => return FailureKind::Auth,
        Some("READONLY") => return FailureKind::ReadOnly,
        Some("NOPERM") => {
            return FailureKind::NoPermission {
                command: quoted_command(message),
            };
        }
        _ => {}
    }
    if is_script_denied(message) {
        // Valkey (and Redis 7.2+) name the command; Redis 6.2 and 7.0 do not.
        return FailureKind::NoPermission {
            command: quoted_command(message),
        };
    }
    if message.contains("NOAUTH") || message.contains("WRONGPASS") {
        return FailureKind::Auth;
    }
    if is_tls(message) {
        return FailureKind::Tls;
    }
    if e.is_connection_refusal() {
        FailureKind::ConnectionRefused
    } else if e.is_io_error() || e.is_connection_dropped() {
        FailureKind::Io
    } else {
        FailureKind::Other
    }
}

/// True for the error a script gets when it calls a command, or touches a
/// key or channel, that the ACL forbids, in the words of each server:
/// Redis 6.2 and 7.0 (`The user executing the script can't run this
/// command or subcommand`, no name), Redis 7.2+ and Valkey (`ACL failure
/// in script: User ... has no permissions to run the 'pexpire' command`),
/// and the refusal of a script's declared keys (`NOPERM`).
pub(crate) fn is_script_denied(message: &str) -> bool {
    [
        "can't run this command or subcommand",
        "can't access at least one of the keys",
        "can't publish to the channel",
        "ACL failure in script",
        "no permissions to access one of the keys",
        "no permissions to access one of the channels",
        "No permissions to access a key",
        "No permissions to access a channel",
    ]
    .iter()
    .any(|words| message.contains(words))
}

/// The command in `NOPERM this user has no permissions to run the 'role'
/// command`.
fn quoted_command(message: &str) -> Option<String> {
    let rest = message.split("to run the '").nth(1)?;
    let command = rest.split('\'').next()?;
    (!command.is_empty()).then(|| command.to_ascii_lowercase())
}

fn is_tls(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    ["certificate", "tls", "ssl", "handshake", "unknownissuer"]
        .iter()
        .any(|w| lower.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: &str, detail: &str) -> RedisError {
        let text = format!("-{code} {detail}\r\n");
        match redis::parse_redis_value(text.as_bytes()) {
            Ok(redis::Value::ServerError(e)) => RedisError::from(e),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn noperm_names_the_command_in_lower_case() {
        let e = server(
            "NOPERM",
            "this user has no permissions to run the 'ROLE' command",
        );
        let failure = NodeFailure::from_redis(&e);
        assert_eq!(
            failure.kind(),
            &FailureKind::NoPermission {
                command: Some("role".into())
            }
        );
        assert!(failure.to_string().starts_with("the ACL forbids `role`"));
    }

    #[test]
    fn readonly_and_wrongpass_are_misconfigurations() {
        let readonly = server("READONLY", "You can't write against a read only replica.");
        assert_eq!(
            NodeFailure::from_redis(&readonly).kind(),
            &FailureKind::ReadOnly
        );
        let wrongpass = server("WRONGPASS", "invalid username-password pair");
        assert!(
            NodeFailure::from_redis(&wrongpass)
                .kind()
                .is_misconfiguration()
        );
    }

    #[test]
    fn a_script_refused_by_the_acl_is_no_permission_without_a_name() {
        let e = server(
            "ERR",
            "The user executing the script can't run this command or subcommand script: 1f, on @user_script:1.",
        );
        assert_eq!(
            NodeFailure::from_redis(&e).kind(),
            &FailureKind::NoPermission { command: None }
        );
    }

    #[test]
    fn valkey_names_the_command_a_script_may_not_run() {
        // Valkey 8 and 9 (and Redis 7.2) word a refusal inside a script so.
        let e = server(
            "ERR",
            "ACL failure in script: User locker has no permissions to run the 'pexpire' \
             command script: 7282ccf73c46a4672b663d324d195f26c0a61fbc, on @user_script:8.",
        );
        let failure = NodeFailure::from_redis(&e);
        assert_eq!(
            failure.kind(),
            &FailureKind::NoPermission {
                command: Some("pexpire".into())
            }
        );
        assert!(failure.kind().is_misconfiguration());
    }

    #[test]
    fn loading_is_an_outage_not_a_misconfiguration() {
        let e = server("LOADING", "Redis is loading the dataset in memory");
        let failure = NodeFailure::from_redis(&e);
        assert_eq!(failure.kind(), &FailureKind::Other);
        assert!(!failure.kind().is_misconfiguration());
    }

    #[test]
    fn a_refused_connection_is_connection_refused() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let failure = NodeFailure::from_redis(&RedisError::from(io));
        assert_eq!(failure.kind(), &FailureKind::ConnectionRefused);
        assert!(!failure.kind().is_misconfiguration());
    }

    #[test]
    fn a_certificate_error_is_tls() {
        let io = std::io::Error::other("invalid peer certificate: UnknownIssuer");
        let failure = NodeFailure::from_redis(&RedisError::from(io));
        assert_eq!(failure.kind(), &FailureKind::Tls);
    }
}
