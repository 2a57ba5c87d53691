//! One `redis-server` child process: spawn, wait for `PING`, kill, pause,
//! resume, restart on the same port.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::certs::{CertFiles, ServerTls};
use super::error::TestkitError;

/// How long a freshly spawned server may take to answer `PING`.
const START_DEADLINE: Duration = Duration::from_secs(10);
/// How many times a start is retried (new port on first start, same port on restart).
const START_ATTEMPTS: usize = 5;
/// How many log lines are quoted in a start error.
const LOG_TAIL_LINES: usize = 20;

/// Observable state of one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeState {
    /// The process is running and not stopped.
    Up,
    /// The process is stopped with `SIGSTOP`: connections are accepted by the
    /// kernel but nothing is answered until it is resumed.
    Paused,
    /// No process: killed, or exited on its own.
    Down,
}

/// One `redis-server` child process owned by the testkit.
#[derive(Debug)]
pub(crate) struct RedisServer {
    index: usize,
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
    paused: bool,
    /// Started (or switched at runtime) with `appendonly yes` and
    /// `appendfsync always`: a restart keeps the data.
    aof: bool,
    /// Also listens for TLS (the plain port stays open for the testkit).
    tls: Option<ServerTls>,
    /// More arguments, with `{bus}` standing for a second free port (the
    /// cluster bus of a cluster node).
    extra: Vec<String>,
    /// The second port, when `extra` asks for one.
    bus_port: Option<u16>,
}

impl RedisServer {
    /// Spawns a server for node `index` on a free port, retrying with a new
    /// port if the chosen one was taken in between. With `tls`, it also
    /// listens for TLS on a second free port with those certificates,
    /// requiring client certificates when the flag is set.
    pub(crate) fn start(
        index: usize,
        bin: &Path,
        dir: &Path,
        tls: Option<(&CertFiles, bool)>,
    ) -> Result<Self, TestkitError> {
        Self::start_with(index, bin, dir, tls, &[])
    }

    /// [`start`](Self::start) with `extra` arguments after ours; `{bus}`
    /// in them stands for a second free port, kept across restarts.
    pub(crate) fn start_with(
        index: usize,
        bin: &Path,
        dir: &Path,
        tls: Option<(&CertFiles, bool)>,
        extra: &[&str],
    ) -> Result<Self, TestkitError> {
        std::fs::create_dir_all(dir).map_err(|source| TestkitError::Io {
            context: format!("creating data directory {} for node {index}", dir.display()),
            source,
        })?;
        let mut last_err = None;
        for _ in 0..START_ATTEMPTS {
            let port = free_port()?;
            let tls = match tls {
                Some((files, auth_clients)) => Some(ServerTls {
                    port: free_port()?,
                    files: files.clone(),
                    auth_clients,
                }),
                None => None,
            };
            let mut server = RedisServer {
                index,
                bin: bin.to_path_buf(),
                dir: dir.to_path_buf(),
                port,
                child: None,
                paused: false,
                aof: false,
                tls,
                extra: extra.iter().map(|a| (*a).to_owned()).collect(),
                bus_port: if extra.iter().any(|a| a.contains("{bus}")) {
                    Some(free_port()?)
                } else {
                    None
                },
            };
            match server.spawn_and_wait() {
                Ok(()) => return Ok(server),
                Err(e @ (TestkitError::RedisServerMissing { .. } | TestkitError::Spawn { .. })) => {
                    return Err(e);
                }
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or(TestkitError::StartFailed {
            index,
            port: 0,
            waited: Duration::ZERO,
            reason: "no attempt was made".to_owned(),
            log_tail: String::new(),
        }))
    }

    /// The port `redis-server` listens on (stable across restarts).
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// The TLS port, for a node started with TLS.
    pub(crate) fn tls_port(&self) -> Option<u16> {
        self.tls.as_ref().map(|tls| tls.port)
    }

    /// The pid of the running process, if any.
    pub(crate) fn pid(&mut self) -> Option<u32> {
        self.refresh();
        self.child.as_ref().map(Child::id)
    }

    /// Current state; reaps the child if it exited on its own.
    pub(crate) fn state(&mut self) -> NodeState {
        self.refresh();
        match (&self.child, self.paused) {
            (None, _) => NodeState::Down,
            (Some(_), true) => NodeState::Paused,
            (Some(_), false) => NodeState::Up,
        }
    }

    /// `SIGKILL` and reap. A no-op if already down.
    pub(crate) fn kill(&mut self) -> Result<(), TestkitError> {
        self.paused = false;
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let pid = child.id();
        // Child::kill sends SIGKILL, which also ends a SIGSTOPped process.
        // It fails with InvalidInput only if the child was already reaped,
        // which cannot happen since we own it; ignore "already exited".
        match child.kill() {
            Err(source) if source.kind() != std::io::ErrorKind::InvalidInput => {
                // Still try to reap so that no zombie is left behind.
                let _ = child.try_wait();
                return Err(TestkitError::Signal {
                    index: self.index,
                    pid,
                    signal: "SIGKILL",
                    source,
                });
            }
            _ => {}
        }
        child.wait().map_err(|source| TestkitError::Signal {
            index: self.index,
            pid,
            signal: "wait after SIGKILL",
            source,
        })?;
        Ok(())
    }

    /// Kills the process if running, then starts a fresh, empty one on the
    /// same port and waits for `PING`.
    pub(crate) fn restart(&mut self) -> Result<(), TestkitError> {
        self.kill()?;
        let mut last_err = None;
        for attempt in 0..START_ATTEMPTS {
            if attempt > 0 {
                thread::sleep(Duration::from_millis(100));
            }
            match self.spawn_and_wait() {
                Ok(()) => return Ok(()),
                Err(e @ (TestkitError::RedisServerMissing { .. } | TestkitError::Spawn { .. })) => {
                    return Err(e);
                }
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or(TestkitError::StartFailed {
            index: self.index,
            port: self.port,
            waited: Duration::ZERO,
            reason: "no attempt was made".to_owned(),
            log_tail: String::new(),
        }))
    }

    /// Turns on `appendonly yes` + `appendfsync always` on the running
    /// server (`CONFIG SET`) and waits until the AOF rewrite that this starts
    /// has finished, so that everything written from now on survives a
    /// kill. A no-op if AOF is already on.
    pub(crate) fn enable_aof(&mut self) -> Result<(), TestkitError> {
        if self.aof {
            return Ok(());
        }
        let url = format!("redis://127.0.0.1:{}/", self.port);
        let err = |source| TestkitError::Redis {
            index: self.index,
            url: url.clone(),
            source,
        };
        let mut con = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .map_err(err)?;
        con.set_read_timeout(Some(Duration::from_secs(2)))
            .map_err(err)?;
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("appendfsync")
            .arg("always")
            .exec(&mut con)
            .map_err(err)?;
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("appendonly")
            .arg("yes")
            .exec(&mut con)
            .map_err(err)?;
        let started = Instant::now();
        loop {
            let info: String = redis::cmd("INFO")
                .arg("persistence")
                .query(&mut con)
                .map_err(err)?;
            let done = info.contains("aof_enabled:1")
                && info.contains("aof_rewrite_in_progress:0")
                && info.contains("aof_rewrite_scheduled:0");
            if done {
                break;
            }
            if started.elapsed() > START_DEADLINE {
                return Err(self.start_failed(started, "AOF rewrite did not finish".to_owned()));
            }
            thread::sleep(Duration::from_millis(10));
        }
        self.aof = true;
        Ok(())
    }

    /// Kills the process and starts it again with AOF (`appendfsync
    /// always`), turning AOF on first if needed, so the data written before
    /// the kill is loaded again.
    pub(crate) fn restart_with_aof(&mut self) -> Result<(), TestkitError> {
        if self.state() == NodeState::Paused {
            self.resume()?;
        }
        if self.state() == NodeState::Up {
            self.enable_aof()?;
        }
        self.aof = true;
        self.restart()
    }

    /// Kills the process and starts it again with no data and AOF off.
    pub(crate) fn restart_empty(&mut self) -> Result<(), TestkitError> {
        self.kill()?;
        self.aof = false;
        let _ = std::fs::remove_dir_all(self.dir.join("appendonlydir"));
        let _ = std::fs::remove_file(self.dir.join("dump.rdb"));
        self.restart()
    }

    /// Kills the process (`SIGKILL`) and starts it again with AOF off,
    /// loading the last RDB snapshot (`dump.rdb`) if there is one.
    pub(crate) fn restart_from_snapshot(&mut self) -> Result<(), TestkitError> {
        self.kill()?;
        self.aof = false;
        let _ = std::fs::remove_dir_all(self.dir.join("appendonlydir"));
        self.restart()
    }

    /// `SIGSTOP`. A no-op if already paused.
    pub(crate) fn pause(&mut self) -> Result<(), TestkitError> {
        self.signal(libc::SIGSTOP, "SIGSTOP", "pause")?;
        self.paused = true;
        Ok(())
    }

    /// `SIGCONT`. A no-op (but still sent) if not paused.
    pub(crate) fn resume(&mut self) -> Result<(), TestkitError> {
        self.signal(libc::SIGCONT, "SIGCONT", "resume")?;
        self.paused = false;
        Ok(())
    }

    fn signal(
        &mut self,
        sig: libc::c_int,
        signal: &'static str,
        operation: &'static str,
    ) -> Result<(), TestkitError> {
        self.refresh();
        let Some(child) = &self.child else {
            return Err(TestkitError::NodeDown {
                index: self.index,
                operation,
            });
        };
        let pid = child.id();
        let Ok(raw_pid) = libc::pid_t::try_from(pid) else {
            return Err(TestkitError::Signal {
                index: self.index,
                pid,
                signal,
                source: std::io::Error::other("pid does not fit in pid_t"),
            });
        };
        // SAFETY: `kill(2)` has no memory-safety preconditions. The pid is
        // that of our own child, which has not been reaped (we hold the
        // `Child` and only reap through it), so it cannot have been reused by
        // another process.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::kill(raw_pid, sig) };
        if rc != 0 {
            return Err(TestkitError::Signal {
                index: self.index,
                pid,
                signal,
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(())
    }

    /// Reaps the child if it exited by itself.
    fn refresh(&mut self) {
        let exited = match &mut self.child {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => false,
        };
        if exited {
            self.child = None;
            self.paused = false;
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    fn spawn_and_wait(&mut self) -> Result<(), TestkitError> {
        let log = self.log_path();
        // A fresh log per attempt so that the tail in errors is relevant.
        let _ = std::fs::remove_file(&log);
        let child = Command::new(&self.bin)
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", if self.aof { "yes" } else { "no" }])
            .args(["--appendfsync", "always"])
            .args(["--protected-mode", "no"])
            .args(["--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(&log)
            .args(self.tls.iter().flat_map(ServerTls::args))
            .args(self.extra.iter().map(|a| match self.bus_port {
                Some(bus) => a.replace("{bus}", &bus.to_string()),
                None => a.clone(),
            }))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| {
                if source.kind() == std::io::ErrorKind::NotFound {
                    TestkitError::RedisServerMissing {
                        configured: Some(self.bin.clone()),
                    }
                } else {
                    TestkitError::Spawn {
                        index: self.index,
                        bin: self.bin.clone(),
                        source,
                    }
                }
            })?;
        self.child = Some(child);
        self.paused = false;

        let started = Instant::now();
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        loop {
            if let Some(status) = self.exit_status() {
                self.child = None;
                return Err(self.start_failed(started, format!("redis-server exited: {status}")));
            }
            if ping(addr) {
                // Make sure the PONG came from our process and not from a
                // server that grabbed the port first (ours then exits).
                thread::sleep(Duration::from_millis(5));
                if self.exit_status().is_none() {
                    return Ok(());
                }
                continue;
            }
            if started.elapsed() >= START_DEADLINE {
                let err = self.start_failed(started, "no PONG before the deadline".to_owned());
                let _ = self.kill();
                return Err(err);
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// `Some(status)` if the child has exited (or cannot be polled).
    fn exit_status(&mut self) -> Option<String> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => Some(status.to_string()),
            Err(e) => Some(format!("cannot poll the process: {e}")),
        }
    }

    fn start_failed(&self, started: Instant, reason: String) -> TestkitError {
        TestkitError::StartFailed {
            index: self.index,
            port: self.port,
            waited: started.elapsed(),
            reason,
            log_tail: log_tail(&self.log_path()),
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// Sends an inline `PING` and checks for `+PONG`.
fn ping(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(250)) else {
        return false;
    };
    if stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .is_err()
        || stream.write_all(b"PING\r\n").is_err()
    {
        return false;
    }
    let mut buf = [0u8; 64];
    let mut len = 0;
    while len < buf.len() {
        match stream.read(&mut buf[len..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => len += n,
        }
        if buf[..len].ends_with(b"\r\n") {
            break;
        }
    }
    buf[..len].starts_with(b"+PONG")
}

/// The lowest port a node may get: below it are the well-known and
/// registered services of a typical machine.
const LOWEST_PORT: u16 = 10_000;

/// The ports handed to nodes by this process: never handed twice.
static HANDED: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());

/// The first port of the kernel's range for outgoing connections' local
/// ports (`ip_local_port_range`; 32768 when it cannot be read).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}

/// A port free on 127.0.0.1 now, below the ephemeral range (so that no
/// outgoing connection takes it while its node is down) and never handed
/// out before by this process. Racy by nature against other processes:
/// the caller retries with another port if the server cannot bind it.
fn free_port() -> Result<u16, TestkitError> {
    let ceiling = ephemeral_low();
    let mut handed = HANDED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if ceiling > LOWEST_PORT + 1000 {
        for _ in 0..1000 {
            let port = rand::random_range(LOWEST_PORT..ceiling);
            if !handed.contains(&port) && TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
                handed.push(port);
                return Ok(port);
            }
        }
    }
    // No room below the ephemeral range: ask the kernel.
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|source| TestkitError::Io {
            context: "binding 127.0.0.1:0 to find a free port".to_owned(),
            source,
        })?;
    let port = listener
        .local_addr()
        .map_err(|source| TestkitError::Io {
            context: "reading the address of a free-port probe".to_owned(),
            source,
        })?
        .port();
    handed.push(port);
    Ok(port)
}

fn log_tail(path: &Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            let start = lines.len().saturating_sub(LOG_TAIL_LINES);
            if lines.is_empty() {
                format!("(log {} is empty)", path.display())
            } else {
                lines[start..].join("\n")
            }
        }
        Err(e) => format!("(could not read log {}: {e})", path.display()),
    }
}

/// A synchronous connection to `url` (node `index`, for errors), with
/// `timeout` on connecting, reading and writing.
pub(crate) fn connect(
    index: usize,
    url: &str,
    timeout: Duration,
) -> Result<redis::Connection, TestkitError> {
    let err = |source| TestkitError::Redis {
        index,
        url: url.to_owned(),
        source,
    };
    let con = redis::Client::open(url)
        .and_then(|client| client.get_connection_with_timeout(timeout))
        .map_err(err)?;
    con.set_read_timeout(Some(timeout)).map_err(err)?;
    con.set_write_timeout(Some(timeout)).map_err(err)?;
    Ok(con)
}

/// Runs `cmd` on `con`, a connection to node `index` at `url`.
pub(crate) fn run<T: redis::FromRedisValue>(
    index: usize,
    url: &str,
    con: &mut redis::Connection,
    cmd: &redis::Cmd,
) -> Result<T, TestkitError> {
    cmd.query(con).map_err(|source| TestkitError::Redis {
        index,
        url: url.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_handed_to_nodes_are_below_the_ephemeral_range_and_never_handed_twice() {
        // An outgoing connection's local port is drawn from the ephemeral
        // range: a node port there can be taken by a client connection
        // while its node is down, and the restart on it fails.
        let low = ephemeral_low();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let port = free_port().expect("a port");
            assert!(
                port < low,
                "port {port} is in the ephemeral range from {low}"
            );
            assert!(seen.insert(port), "port {port} handed out twice");
        }
    }
}
