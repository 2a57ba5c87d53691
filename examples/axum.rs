//! An axum service that serialises the work on each account with a
//! redquorum lock, and answers 409 when the account is busy (the
//! failure's [`Reason`] is `Contended`) and 503 for every other reason:
//! the lock nodes are down, hung or misconfigured.
//!
//! ```text
//! cargo run --example axum --features testkit            # five local nodes
//! REDQUORUM_NODES=redis://10.0.0.1:6379/,... cargo run --example axum --features testkit
//! curl -X POST localhost:3000/accounts/7/charge
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use redquorum::testkit::Nodes;
use redquorum::{Config, Error, LockOptions, Reason, Redlock};

/// What each request may wait for its account's lock.
const WAIT: Duration = Duration::from_secs(2);
/// The lock's TTL: longer than a charge takes.
const TTL: Duration = Duration::from_secs(5);

async fn charge(State(redlock): State<Redlock>, Path(account): Path<u64>) -> (StatusCode, String) {
    let options = LockOptions::new()
        .wait(redquorum::Wait::For(WAIT))
        .fencing(true);
    let resource = format!("account:{account}");
    match redlock.lock_with(&resource, TTL, &options).await {
        Ok(guard) => {
            // The store would refuse writes with a token lower than the
            // highest it has seen.
            let token = guard.fencing_token().unwrap_or_default();
            tokio::time::sleep(Duration::from_millis(50)).await; // the charge
            let answer = if guard.remaining() > Duration::ZERO {
                (
                    StatusCode::OK,
                    format!("charged account {account} (token {token})\n"),
                )
            } else {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "lock expired mid-charge\n".to_owned(),
                )
            };
            if let Err(e) = guard.release().await {
                tracing::warn!(%e, "release");
            }
            answer
        }
        // One reason per failure: 409 only when another request holds the
        // account; nodes down, hung or misconfigured are an outage (503),
        // even if one of them holds a stale key.
        Err(Error::NotAcquired(why)) if why.reason() == Reason::Contended => (
            StatusCode::CONFLICT,
            format!("account {account} is busy, try again\n"),
        ),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_env_filter("warn").init();
    // REDQUORUM_NODES, or five local redis-server processes.
    let nodes = Nodes::from_env(5)?;
    let config = Config::default().with_node_timeout(Duration::from_millis(100));
    let redlock = Redlock::with_config(nodes.urls(), config)?;
    if let Err(e) = redlock.check().await {
        eprintln!("lock nodes: {e}");
    }
    let app = Router::new()
        .route("/accounts/{account}/charge", post(charge))
        .with_state(redlock.clone());
    let addr: SocketAddr = "127.0.0.1:3000".parse()?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("listening on http://{addr} (POST /accounts/<n>/charge); Ctrl-C stops");
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    redlock.shutdown().await;
    Ok(())
}
