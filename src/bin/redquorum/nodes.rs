//! Direct connections to the nodes (for `status`) and table printing.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, IntoConnectionInfo, RedisError};

/// One node of the command line: its display name and a client.
pub struct Target {
    /// `host:port` (and `/db` when not 0), never the password.
    pub name: String,
    client: Client,
}

/// Parses the node URLs.
///
/// # Errors
///
/// The message names the node that is not a usable URL.
pub fn targets(urls: &[String]) -> Result<Vec<Target>, String> {
    urls.iter()
        .enumerate()
        .map(|(index, url)| {
            let info = url
                .as_str()
                .into_connection_info()
                .map_err(|e| format!("node {index}: not a usable Redis URL: {e}"))?;
            let name = match info.redis_settings().db() {
                0 => info.addr().to_string(),
                db => format!("{}/{db}", info.addr()),
            };
            let client = Client::open(info).map_err(|e| format!("node {index} ({name}): {e}"))?;
            Ok(Target { name, client })
        })
        .collect()
}

/// Why a node could not be used.
#[derive(Debug)]
pub enum Failure {
    /// No connection or no answer in time.
    Unreachable(String),
    /// The node answered but refused our credentials.
    Auth(String),
}

impl Failure {
    /// Sorts a redis error: authentication problems apart from the rest.
    pub fn from_redis(e: &RedisError) -> Failure {
        let auth = e.kind() == redis::ErrorKind::AuthenticationFailed
            || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"));
        if auth {
            Failure::Auth(format!(
                "authentication failed ({e}): check the password in the node URL"
            ))
        } else {
            Failure::Unreachable(format!("unreachable: {e}"))
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unreachable(why) | Failure::Auth(why) => f.write_str(why),
        }
    }
}

impl Target {
    /// Opens a connection whose set-up and every reply are bounded by `timeout`.
    ///
    /// # Errors
    ///
    /// [`Failure`] telling an unreachable node from a refused password.
    pub async fn connect(&self, timeout: Duration) -> Result<MultiplexedConnection, Failure> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        let connecting = self
            .client
            .get_multiplexed_async_connection_with_config(&config);
        match tokio::time::timeout(timeout * 2, connecting).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(Failure::from_redis(&e)),
            Err(_) => Err(Failure::Unreachable(format!(
                "unreachable: no connection within {timeout:?}"
            ))),
        }
    }
}

/// Prints rows as columns aligned under `header`, two spaces apart.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}
