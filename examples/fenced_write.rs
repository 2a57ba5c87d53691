//! A paused former holder's write is refused by a store that checks
//! fencing tokens.
//!
//! Client A takes the lock, then stalls (a GC pause, swap, a stopped VM)
//! past its validity without extending. Client B takes the lock and writes.
//! A wakes up and writes too, still believing it holds the lock: the store
//! refuses A's write because A's token is older than B's.
//!
//! Run: `cargo run --example fenced_write --features testkit`
//! (needs `redis-server` on `PATH`).

use std::error::Error;
use std::time::Duration;

use redquorum::testkit::{FencedResource, LocalCluster};
use redquorum::{Config, Redlock};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let cluster = LocalCluster::start(5)?;
    let config = Config::default()
        .with_fencing(true)
        .with_retry_delay(Duration::from_millis(20))
        .with_retries(50);
    let client_a = Redlock::with_config(cluster.urls(), config.clone())?;
    let client_b = Redlock::with_config(cluster.urls(), config)?;
    let store = FencedResource::new();

    let a = client_a.lock("ledger", Duration::from_millis(300)).await?;
    let token_a = a.fencing_token().ok_or("fencing is on: A has a token")?;
    println!("A holds the lock with token {token_a}, then stalls");
    tokio::time::sleep_until(a.valid_until() + Duration::from_millis(50)).await;

    let b = client_b.lock("ledger", Duration::from_secs(5)).await?;
    let token_b = b.fencing_token().ok_or("fencing is on: B has a token")?;
    println!("B holds the lock with token {token_b}");
    store.write("ledger", token_b, "balance = 120 (by B)")?;
    println!("B's write accepted");

    match store.write("ledger", token_a, "balance = 90 (by A)") {
        Ok(()) => return Err("A's stale write was accepted".into()),
        Err(stale) => println!("A wakes up and writes: refused ({stale})"),
    }
    println!("store holds: {:?}", store.value("ledger"));
    for write in store.writes() {
        println!(
            "  token {:>3} accepted={:<5} {}",
            write.token, write.accepted, write.data
        );
    }

    // A's release finds the lock gone and says so; B's keys are untouched.
    println!("A releases: {:?}", a.release().await);
    b.release().await?;
    client_a.shutdown().await;
    client_b.shutdown().await;
    Ok(())
}
