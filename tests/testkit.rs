#![cfg(feature = "testkit")]
//! Tests of the `testkit` feature against real `redis-server` processes.

use std::io::ErrorKind;
use std::net::TcpStream;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redquorum::testkit::{LocalCluster, NodeState, ProxyMode, TestkitError};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn connect(url: &str, timeout: Duration) -> redis::RedisResult<redis::Connection> {
    let con = redis::Client::open(url)?.get_connection_with_timeout(timeout)?;
    con.set_read_timeout(Some(timeout))?;
    con.set_write_timeout(Some(timeout))?;
    Ok(con)
}

fn ping(con: &mut redis::Connection) -> redis::RedisResult<String> {
    redis::cmd("PING").query::<String>(con)
}

fn ping_url(url: &str) -> redis::RedisResult<String> {
    ping(&mut connect(url, Duration::from_secs(2))?)
}

fn port_of(url: &str) -> u16 {
    let port = url
        .trim_start_matches("redis://127.0.0.1:")
        .trim_end_matches('/');
    port.parse()
        .unwrap_or_else(|_| panic!("unexpected url {url}"))
}

/// `true` while a `redis-server` process (even a zombie) has this pid.
/// True while `pid` is a live server process (Redis or Valkey, whichever
/// `REDIS_SERVER_BIN` selects).
fn redis_process_exists(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.contains("(redis-server)") || stat.contains("(valkey-server)"),
        Err(_) => false,
    }
}

#[test]
fn every_node_answers_ping_through_its_proxy_and_directly() -> TestResult {
    let cluster = LocalCluster::start(3)?;
    assert_eq!(cluster.len(), 3);
    assert!(!cluster.is_empty());
    let urls = cluster.urls();
    let direct = cluster.direct_urls();
    assert_eq!(urls.len(), 3);
    assert_eq!(direct.len(), 3);
    for i in 0..3 {
        assert_eq!(urls[i], cluster.url(i));
        assert_eq!(direct[i], cluster.direct_url(i));
        assert_ne!(
            urls[i], direct[i],
            "proxy and server must be distinct ports"
        );
        assert_eq!(ping_url(&urls[i])?, "PONG");
        assert_eq!(ping_url(&direct[i])?, "PONG");
        assert_eq!(cluster.state(i), NodeState::Up);
        assert!(cluster.pid(i).is_some());
        let mut con = cluster.connection(i)?;
        assert_eq!(ping(&mut con)?, "PONG");
    }
    Ok(())
}

#[test]
fn nodes_are_independent_servers() -> TestResult {
    let cluster = LocalCluster::start(2)?;
    let mut a = cluster.connection(0)?;
    let mut b = cluster.connection(1)?;
    redis::cmd("SET").arg("k").arg("on-0").query::<()>(&mut a)?;
    let on_b: Option<String> = redis::cmd("GET").arg("k").query(&mut b)?;
    assert_eq!(on_b, None);
    // Writes through the proxy land on the same server as direct reads.
    let mut via_proxy = connect(&cluster.url(1), Duration::from_secs(2))?;
    redis::cmd("SET")
        .arg("k")
        .arg("on-1")
        .query::<()>(&mut via_proxy)?;
    let direct: Option<String> = redis::cmd("GET").arg("k").query(&mut b)?;
    assert_eq!(direct.as_deref(), Some("on-1"));
    Ok(())
}

#[test]
fn killed_node_refuses_connections_and_restart_brings_it_back_empty_on_the_same_port() -> TestResult
{
    let cluster = LocalCluster::start(3)?;
    let direct = cluster.direct_url(1);
    let mut con = cluster.connection(1)?;
    redis::cmd("SET")
        .arg("lock")
        .arg("token")
        .query::<()>(&mut con)?;
    let old_pid = cluster.pid(1).ok_or("node 1 should have a pid")?;

    cluster.kill(1)?;
    assert_eq!(cluster.state(1), NodeState::Down);
    assert_eq!(cluster.pid(1), None);
    assert!(
        !redis_process_exists(old_pid),
        "killed server must be reaped"
    );
    let refused = TcpStream::connect(("127.0.0.1", port_of(&direct)))
        .err()
        .ok_or("connecting to a killed node must fail")?;
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);
    assert!(
        ping_url(&cluster.url(1)).is_err(),
        "proxy of a dead node must not answer"
    );
    // Other nodes are unaffected.
    assert_eq!(ping_url(&cluster.url(0))?, "PONG");

    cluster.restart(1)?;
    assert_eq!(cluster.state(1), NodeState::Up);
    assert_eq!(cluster.direct_url(1), direct, "restart must reuse the port");
    assert_ne!(cluster.pid(1), Some(old_pid));
    let mut con = cluster.connection(1)?;
    let value: Option<String> = redis::cmd("GET").arg("lock").query(&mut con)?;
    assert_eq!(value, None, "restarted node must be empty");
    assert_eq!(ping_url(&cluster.url(1))?, "PONG");
    Ok(())
}

#[test]
fn restart_of_a_running_node_replaces_the_process_and_loses_its_data() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let mut con = cluster.connection(0)?;
    redis::cmd("SET").arg("k").arg("v").query::<()>(&mut con)?;
    let old_pid = cluster.pid(0).ok_or("node 0 should have a pid")?;
    cluster.restart(0)?;
    assert!(!redis_process_exists(old_pid));
    let mut con = cluster.connection(0)?;
    let value: Option<String> = redis::cmd("GET").arg("k").query(&mut con)?;
    assert_eq!(value, None);
    Ok(())
}

#[test]
fn paused_node_times_out_and_resumed_node_answers_again() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let mut con = connect(&cluster.direct_url(0), Duration::from_millis(300))?;
    assert_eq!(ping(&mut con)?, "PONG");

    cluster.pause(0)?;
    assert_eq!(cluster.state(0), NodeState::Paused);
    let err = ping(&mut con)
        .err()
        .ok_or("a paused node must not answer")?;
    assert!(err.is_timeout(), "expected a timeout, got {err}");

    cluster.resume(0)?;
    assert_eq!(cluster.state(0), NodeState::Up);
    assert_eq!(ping_url(&cluster.direct_url(0))?, "PONG");
    assert_eq!(ping_url(&cluster.url(0))?, "PONG");
    Ok(())
}

#[test]
fn node_state_follows_pause_resume_kill_and_restart() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    assert_eq!(cluster.state(0), NodeState::Up);
    cluster.pause(0)?;
    cluster.pause(0)?; // idempotent
    assert_eq!(cluster.state(0), NodeState::Paused);
    cluster.kill(0)?; // killing a paused node works
    assert_eq!(cluster.state(0), NodeState::Down);
    cluster.kill(0)?; // idempotent
    assert!(matches!(
        cluster.pause(0),
        Err(TestkitError::NodeDown { index: 0, .. })
    ));
    assert!(matches!(
        cluster.resume(0),
        Err(TestkitError::NodeDown { index: 0, .. })
    ));
    cluster.restart(0)?;
    assert_eq!(cluster.state(0), NodeState::Up);
    cluster.pause(0)?;
    cluster.restart(0)?; // restarting a paused node works
    assert_eq!(cluster.state(0), NodeState::Up);
    assert_eq!(ping_url(&cluster.url(0))?, "PONG");
    Ok(())
}

#[test]
fn delay_mode_adds_at_least_the_configured_latency_in_each_direction() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let mut con = connect(&cluster.url(0), Duration::from_secs(5))?;
    assert_eq!(ping(&mut con)?, "PONG");

    cluster.set_proxy(0, ProxyMode::Delay(Duration::from_millis(50)));
    let started = Instant::now();
    assert_eq!(ping(&mut con)?, "PONG");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(100),
        "round trip through a 50 ms proxy took only {elapsed:?}"
    );

    // A new connection is delayed too.
    let mut fresh = connect(&cluster.url(0), Duration::from_secs(5))?;
    let started = Instant::now();
    assert_eq!(ping(&mut fresh)?, "PONG");
    assert!(started.elapsed() >= Duration::from_millis(100));

    cluster.set_proxy(0, ProxyMode::Pass);
    assert_eq!(ping(&mut con)?, "PONG");
    Ok(())
}

#[test]
fn blackhole_mode_swallows_requests_and_pass_mode_restores_service() -> TestResult {
    let cluster = LocalCluster::start(2)?;
    let mut con = connect(&cluster.url(0), Duration::from_millis(300))?;
    assert_eq!(ping(&mut con)?, "PONG");
    let forwarded_before = cluster.proxy_forwarded_bytes(0);
    assert!(forwarded_before > 0, "the PING must have been counted");

    cluster.set_proxy(0, ProxyMode::Blackhole);
    let err = ping(&mut con)
        .err()
        .ok_or("a blackholed connection must not answer")?;
    assert!(err.is_timeout(), "expected a timeout, got {err}");
    // New connections are accepted and kept open, but nothing is forwarded.
    let raw = TcpStream::connect(("127.0.0.1", port_of(&cluster.url(0))))?;
    raw.set_read_timeout(Some(Duration::from_millis(200)))?;
    std::io::Write::write_all(&mut &raw, b"PING\r\n")?;
    let mut buf = [0u8; 16];
    let read = std::io::Read::read(&mut &raw, &mut buf);
    assert!(
        matches!(&read, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)),
        "blackholed connection must stay open and silent, got {read:?}"
    );
    assert_eq!(
        cluster.proxy_forwarded_bytes(0),
        forwarded_before,
        "nothing may reach a blackholed node"
    );
    // Other proxies are unaffected.
    assert_eq!(ping_url(&cluster.url(1))?, "PONG");

    cluster.set_proxy(0, ProxyMode::Pass);
    assert_eq!(ping_url(&cluster.url(0))?, "PONG");
    assert!(cluster.proxy_forwarded_bytes(0) > forwarded_before);
    Ok(())
}

#[test]
fn reset_mode_closes_open_connections_and_new_ones() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let mut con = connect(&cluster.url(0), Duration::from_secs(2))?;
    assert_eq!(ping(&mut con)?, "PONG");

    cluster.set_proxy(0, ProxyMode::Reset);
    let err = ping(&mut con).err().ok_or("a reset connection must fail")?;
    assert!(
        !err.is_timeout(),
        "expected EOF/reset, not a timeout: {err}"
    );
    assert!(
        ping_url(&cluster.url(0)).is_err(),
        "new connections must be closed"
    );
    // The server itself is fine.
    assert_eq!(ping_url(&cluster.direct_url(0))?, "PONG");

    cluster.set_proxy(0, ProxyMode::Pass);
    assert_eq!(ping_url(&cluster.url(0))?, "PONG");
    Ok(())
}

#[test]
fn dropping_the_cluster_leaves_no_redis_server_alive() -> TestResult {
    let cluster = LocalCluster::start(3)?;
    cluster.pause(2)?; // a stopped process must die too
    let pids: Vec<u32> = (0..3).filter_map(|i| cluster.pid(i)).collect();
    assert_eq!(pids.len(), 3);
    assert!(pids.iter().all(|&pid| redis_process_exists(pid)));
    let proxy_port = port_of(&cluster.url(0));
    drop(cluster);
    for pid in pids {
        assert!(
            !redis_process_exists(pid),
            "redis-server {pid} survived the drop"
        );
    }
    assert!(
        TcpStream::connect(("127.0.0.1", proxy_port)).is_err(),
        "the proxy listener must be closed"
    );
    Ok(())
}

#[test]
fn a_panic_while_a_cluster_is_alive_still_kills_every_redis_server() {
    let pids = Mutex::new(Vec::new());
    let result = catch_unwind(AssertUnwindSafe(|| {
        let cluster = LocalCluster::start(2).unwrap_or_else(|e| panic!("start failed: {e}"));
        let mut recorded = pids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        recorded.extend((0..2).filter_map(|i| cluster.pid(i)));
        drop(recorded);
        panic!("deliberate panic with a live cluster");
    }));
    assert!(result.is_err(), "the closure must have panicked");
    let pids = pids
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    assert_eq!(
        pids.len(),
        2,
        "pids must have been recorded before the panic"
    );
    for pid in pids {
        assert!(
            !redis_process_exists(pid),
            "redis-server {pid} survived the panic"
        );
    }
}

#[test]
fn a_missing_binary_is_reported_as_redis_server_missing() {
    let result = LocalCluster::builder()
        .nodes(1)
        .redis_server_bin("/nonexistent/redquorum-test/redis-server")
        .start();
    match result {
        Err(e @ TestkitError::RedisServerMissing { .. }) => {
            let message = e.to_string();
            assert!(
                message.contains("apt-get install -y redis-server"),
                "{message}"
            );
            assert!(message.contains("REDIS_SERVER_BIN"), "{message}");
            assert!(
                message.contains("/nonexistent/redquorum-test/redis-server"),
                "{message}"
            );
        }
        Err(other) => panic!("expected RedisServerMissing, got {other}"),
        Ok(_) => panic!("a nonexistent binary must not start"),
    }
}

#[test]
fn out_of_range_node_indices_are_errors_naming_the_index() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let err = cluster.kill(7).err().ok_or("kill(7) must fail")?;
    assert!(matches!(err, TestkitError::NoSuchNode { index: 7, len: 1 }));
    assert!(err.to_string().contains('7'));
    assert!(matches!(
        cluster.restart(1),
        Err(TestkitError::NoSuchNode { index: 1, .. })
    ));
    assert!(matches!(
        cluster.pause(1),
        Err(TestkitError::NoSuchNode { .. })
    ));
    assert!(matches!(
        cluster.resume(1),
        Err(TestkitError::NoSuchNode { .. })
    ));
    assert!(matches!(
        cluster.connection(1),
        Err(TestkitError::NoSuchNode { .. })
    ));
    assert_eq!(cluster.pid(1), None);
    assert!(catch_unwind(AssertUnwindSafe(|| cluster.url(1))).is_err());
    // The cluster is still usable.
    assert_eq!(ping_url(&cluster.url(0))?, "PONG");
    Ok(())
}

#[test]
fn an_empty_cluster_is_allowed() -> TestResult {
    let cluster = LocalCluster::start(0)?;
    assert!(cluster.is_empty());
    assert!(cluster.urls().is_empty());
    Ok(())
}

#[test]
fn a_shared_cluster_can_be_driven_from_several_threads() -> TestResult {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<LocalCluster>();

    let cluster = Arc::new(LocalCluster::start(3)?);
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let cluster = Arc::clone(&cluster);
            thread::spawn(move || -> Result<String, String> {
                cluster.kill(i).map_err(|e| e.to_string())?;
                cluster.restart(i).map_err(|e| e.to_string())?;
                ping_url(&cluster.url(i)).map_err(|e| e.to_string())
            })
        })
        .collect();
    for worker in workers {
        let pong = worker.join().map_err(|_| "worker panicked")??;
        assert_eq!(pong, "PONG");
    }
    Ok(())
}
