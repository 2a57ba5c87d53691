//! A TCP fault-injection proxy in front of one `redis-server`.
//!
//! Threads, per proxy: one accept loop. Per proxied connection and per
//! direction: a reader that timestamps each chunk and asks [`decide`] what to
//! do with it, and a writer that writes forwarded chunks at their due time.
//! Reading and writing are decoupled so that `Delay(d)` adds `d` to every
//! chunk without serialising pipelined requests.
//!
//! To add a mode: add a [`ProxyMode`] variant and handle it in [`decide`]
//! (and, if it needs new behaviour, a new [`ChunkAction`]).

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::error::TestkitError;
use super::resp::Rewriter;

/// What a proxy does with traffic. Switch with
/// [`LocalCluster::set_proxy`](super::LocalCluster::set_proxy) at any time;
/// the new mode applies to the next chunk read on every connection, including
/// connections that are already open.
///
/// ```no_run
/// use std::time::Duration;
/// use redquorum::testkit::{LocalCluster, ProxyMode};
///
/// let cluster = LocalCluster::start(3)?;
/// cluster.set_proxy(0, ProxyMode::Delay(Duration::from_millis(50)));
/// cluster.set_proxy(1, ProxyMode::Blackhole);
/// cluster.set_proxy(2, ProxyMode::Reset);
/// cluster.set_proxy(1, ProxyMode::Pass);
/// # Ok::<(), redquorum::testkit::TestkitError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyMode {
    /// Forward both directions unchanged.
    Pass,
    /// Forward both directions, each chunk written the given duration after
    /// it was read. Pipelined chunks are not serialised: each one is delayed
    /// by about the duration, delays do not accumulate.
    ///
    /// The delay applies in *each* direction, so a request/reply round trip
    /// takes at least twice the duration longer than in `Pass`.
    Delay(Duration),
    /// Accept connections and keep them open, read and discard everything the
    /// client sends, forward nothing in either direction. Applies to
    /// connections already open when the mode is set. Chunks already queued
    /// by an earlier `Delay` may still be delivered.
    Blackhole,
    /// Close every open connection immediately, and close new ones right
    /// after accepting them.
    Reset,
    /// Like `Delay`, with a different delay per direction: `request` for
    /// client-to-server chunks, `reply` for server-to-client chunks.
    DelayEach {
        /// Added to every chunk on its way to `redis-server`.
        request: Duration,
        /// Added to every chunk on its way back to the client.
        reply: Duration,
    },
    /// Forward requests (the node applies them) but swallow every reply: the
    /// client sees a timeout although the command took effect.
    DropReplies,
    /// Make the node's TTLs run `per_mille / 1000` times faster, as if its
    /// clock ran fast: the TTL of `SET ... PX n`, of `PEXPIRE key n` and the
    /// TTL argument of the lock scripts become `n * 1000 / per_mille`
    /// (at least 1). `FastClock { per_mille: 1010 }` is a clock 1 % fast.
    /// Requests split across reads are buffered until complete; see the
    /// `resp` module for exactly what is rewritten.
    FastClock {
        /// Clock rate in thousandths: 1000 is a correct clock, 2000 twice as fast.
        per_mille: u32,
    },
}

/// Direction of a chunk through the proxy: the hook point for per-direction
/// behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// From the lock client to `redis-server` (requests).
    ClientToServer,
    /// From `redis-server` back to the client (replies).
    ServerToClient,
}

/// What to do with one chunk that was just read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChunkAction {
    /// Write it to the other side once `delay` has elapsed since it was read.
    Forward {
        /// Extra latency for this chunk.
        delay: Duration,
    },
    /// Drop it silently; keep the connection open.
    Discard,
    /// Close the connection (both sockets).
    Close,
}

/// The single place where a mode is turned into behaviour, per chunk and per
/// direction. New modes are added here. (`FastClock` forwards at once; the
/// rewriting itself is done by the reader, which keeps the parse state.)
pub(crate) fn decide(mode: ProxyMode, direction: Direction, chunk: &[u8]) -> ChunkAction {
    let _ = chunk;
    let now = ChunkAction::Forward {
        delay: Duration::ZERO,
    };
    match mode {
        ProxyMode::Pass | ProxyMode::FastClock { .. } => now,
        ProxyMode::Delay(delay) => ChunkAction::Forward { delay },
        ProxyMode::DelayEach { request, reply } => ChunkAction::Forward {
            delay: match direction {
                Direction::ClientToServer => request,
                Direction::ServerToClient => reply,
            },
        },
        ProxyMode::Blackhole => ChunkAction::Discard,
        ProxyMode::Reset => ChunkAction::Close,
        ProxyMode::DropReplies => match direction {
            Direction::ClientToServer => now,
            Direction::ServerToClient => ChunkAction::Discard,
        },
    }
}

/// Both sockets of one proxied connection, kept to close them from outside.
#[derive(Debug)]
struct ConnSockets {
    client: TcpStream,
    server: Option<TcpStream>,
}

impl ConnSockets {
    fn close(&self) {
        let _ = self.client.shutdown(Shutdown::Both);
        if let Some(server) = &self.server {
            let _ = server.shutdown(Shutdown::Both);
        }
    }
}

/// State shared by the proxy handle, its accept loop and its connections.
#[derive(Debug)]
struct Shared {
    target: SocketAddr,
    mode: Mutex<ProxyMode>,
    stop: AtomicBool,
    forwarded_to_server: AtomicU64,
    conns: Mutex<HashMap<u64, ConnSockets>>,
    next_conn: AtomicU64,
    /// How many times `Reset` closed every connection: a connection opened
    /// before the last one forwards nothing more, not even bytes its
    /// socket still held when it was shut down.
    resets: AtomicU64,
}

impl Shared {
    fn mode(&self) -> ProxyMode {
        *lock(&self.mode)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    fn resets(&self) -> u64 {
        self.resets.load(Ordering::Acquire)
    }

    fn close_all(&self) {
        for conn in lock(&self.conns).values() {
            conn.close();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running proxy: `127.0.0.1:<port>` forwarding to one `redis-server`.
#[derive(Debug)]
pub(crate) struct Proxy {
    port: u16,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    /// Binds a listener on a free port and starts forwarding to `target`.
    pub(crate) fn start(index: usize, target: SocketAddr) -> Result<Self, TestkitError> {
        let io_err = |what: &str, source| TestkitError::Io {
            context: format!("{what} the proxy of node {index}"),
            source,
        };
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| io_err("binding 127.0.0.1:0 for", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| io_err("reading the address of", e))?
            .port();
        let shared = Arc::new(Shared {
            target,
            mode: Mutex::new(ProxyMode::Pass),
            stop: AtomicBool::new(false),
            forwarded_to_server: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(0),
            resets: AtomicU64::new(0),
        });
        let accept_shared = Arc::clone(&shared);
        let accept = thread::Builder::new()
            .name(format!("testkit-proxy-{index}"))
            .spawn(move || accept_loop(&listener, &accept_shared))
            .map_err(|e| io_err("spawning the accept thread of", e))?;
        Ok(Proxy {
            port,
            shared,
            accept: Some(accept),
        })
    }

    /// The port clients connect to.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Switches the mode; `Reset` also closes every open connection now.
    pub(crate) fn set_mode(&self, mode: ProxyMode) {
        let reset = decide(mode, Direction::ClientToServer, &[]) == ChunkAction::Close;
        if reset {
            self.shared.resets.fetch_add(1, Ordering::AcqRel);
        }
        *lock(&self.shared.mode) = mode;
        if reset {
            self.shared.close_all();
        }
    }

    /// Client-to-server bytes handed to `redis-server` so far (counted just
    /// before each write).
    pub(crate) fn forwarded_bytes(&self) -> u64 {
        self.shared.forwarded_to_server.load(Ordering::Acquire)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        // Wake the blocking accept() with a connection to ourselves.
        let _ = TcpStream::connect_timeout(
            &SocketAddr::from((Ipv4Addr::LOCALHOST, self.port)),
            Duration::from_secs(1),
        );
        let conn_threads = match self.accept.take().map(JoinHandle::join) {
            Some(Ok(handles)) => handles,
            _ => Vec::new(),
        };
        // Every connection is registered before its thread starts, so this
        // unblocks all of them.
        self.shared.close_all();
        for handle in conn_threads {
            let _ = handle.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) -> Vec<JoinHandle<()>> {
    let mut handles: Vec<JoinHandle<()>> = Vec::new();
    loop {
        let accepted = listener.accept();
        if shared.stopped() {
            break;
        }
        let Ok((client, _)) = accepted else {
            // Transient accept errors (EMFILE, ECONNABORTED): back off a bit.
            thread::sleep(Duration::from_millis(10));
            continue;
        };
        handles.retain(|h| !h.is_finished());
        let _ = client.set_nodelay(true);
        // Read before the mode: a Reset from now on is this connection's.
        let born = shared.resets();
        if decide(shared.mode(), Direction::ClientToServer, &[]) == ChunkAction::Close {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let Ok(client_clone) = client.try_clone() else {
            continue;
        };
        let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        lock(&shared.conns).insert(
            id,
            ConnSockets {
                client: client_clone,
                server: None,
            },
        );
        let conn_shared = Arc::clone(shared);
        let spawned = thread::Builder::new()
            .name(format!("testkit-proxy-conn-{id}"))
            .spawn(move || {
                handle_connection(client, &conn_shared, (id, born));
                if let Some(conn) = lock(&conn_shared.conns).remove(&id) {
                    conn.close();
                }
            });
        match spawned {
            Ok(handle) => handles.push(handle),
            Err(_) => {
                if let Some(conn) = lock(&shared.conns).remove(&id) {
                    conn.close();
                }
            }
        }
    }
    handles
}

/// Forwards one client connection (`id`, opened when `born` resets had
/// happened) to the server.
fn handle_connection(client: TcpStream, shared: &Arc<Shared>, (id, born): (u64, u64)) {
    let Ok(server) = TcpStream::connect_timeout(&shared.target, Duration::from_secs(1)) else {
        // Node down. In Blackhole keep the client open and swallow its bytes
        // (it must not learn that the node is gone); otherwise close at once,
        // as a dead server would.
        if shared.mode() == ProxyMode::Blackhole {
            discard_while_blackholed(&client, shared);
        }
        return;
    };
    let _ = server.set_nodelay(true);
    let (Ok(server_reg), Ok(client_r), Ok(server_r)) =
        (server.try_clone(), client.try_clone(), server.try_clone())
    else {
        return;
    };
    {
        let mut conns = lock(&shared.conns);
        match conns.get_mut(&id) {
            // Closed by Reset or by the cluster dropping while connecting.
            None => return,
            Some(conn) => conn.server = Some(server_reg),
        }
    }
    if shared.stopped() || shared.mode() == ProxyMode::Reset {
        return;
    }
    let back_shared = Arc::clone(shared);
    let back = thread::Builder::new()
        .name(format!("testkit-proxy-s2c-{id}"))
        .spawn(move || {
            pump(
                server_r,
                client,
                (Direction::ServerToClient, born),
                &back_shared,
            )
        });
    if back.is_err() {
        return;
    }
    pump(client_r, server, (Direction::ClientToServer, born), shared);
    if let Ok(back) = back {
        let _ = back.join();
    }
}

/// Reads a client whose server is unreachable, discarding its bytes, for as
/// long as the proxy stays in `Blackhole`.
fn discard_while_blackholed(client: &TcpStream, shared: &Shared) {
    let mut client = client;
    let _ = client.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = [0u8; 4096];
    while !shared.stopped() && shared.mode() == ProxyMode::Blackhole {
        match client.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}

/// Copies `src` to `dst`, chunk by chunk, as [`decide`] says. Returns when
/// either side closes, or once a Reset came after the connection opened
/// (`born`: the resets before it); then both sockets are shut down.
fn pump(
    mut src: TcpStream,
    dst: TcpStream,
    (direction, born): (Direction, u64),
    shared: &Arc<Shared>,
) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writer_shared = Arc::clone(shared);
    let Ok(dst_w) = dst.try_clone() else {
        let _ = src.shutdown(Shutdown::Both);
        let _ = dst.shutdown(Shutdown::Both);
        return;
    };
    let writer = thread::Builder::new()
        .name("testkit-proxy-writer".to_owned())
        .spawn(move || write_loop(dst_w, &rx, direction, &writer_shared));
    if writer.is_ok() {
        let mut buf = vec![0u8; 16 * 1024];
        let mut rewriter = Rewriter::default();
        // Once a chunk was discarded, the client and server disagree on
        // which reply belongs to which request. A real network would have
        // delayed or reset the connection, not lost bytes from a TCP stream,
        // so the connection is closed before anything else is forwarded.
        let mut desynced = false;
        loop {
            let n = match src.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if shared.resets() != born {
                // Read after a Reset (the socket still held it): a reset
                // connection loses what it carried.
                break;
            }
            let read_at = Instant::now();
            let chunk = &buf[..n];
            let mode = shared.mode();
            match decide(mode, direction, chunk) {
                ChunkAction::Forward { .. } if desynced => break,
                ChunkAction::Forward { delay } => {
                    let bytes = match (mode, direction) {
                        (ProxyMode::FastClock { per_mille }, Direction::ClientToServer) => {
                            rewriter.feed(chunk, per_mille)
                        }
                        _ => {
                            let mut held = rewriter.take();
                            held.extend_from_slice(chunk);
                            held
                        }
                    };
                    if !bytes.is_empty() && tx.send((read_at + delay, bytes)).is_err() {
                        break;
                    }
                }
                ChunkAction::Discard => desynced = true,
                ChunkAction::Close => break,
            }
            if shared.stopped() {
                break;
            }
        }
    }
    drop(tx);
    let _ = src.shutdown(Shutdown::Both);
    let _ = dst.shutdown(Shutdown::Both);
    if let Ok(writer) = writer {
        let _ = writer.join();
    }
    drop(dst);
}

/// Writes queued chunks to `dst` at their due time.
fn write_loop(
    mut dst: TcpStream,
    rx: &mpsc::Receiver<(Instant, Vec<u8>)>,
    direction: Direction,
    shared: &Shared,
) {
    while let Ok((due, chunk)) = rx.recv() {
        // Sleep in slices so that dropping the cluster is not held up by a
        // long delay.
        loop {
            if shared.stopped() {
                return;
            }
            let now = Instant::now();
            if now >= due {
                break;
            }
            thread::sleep((due - now).min(Duration::from_millis(50)));
        }
        // Counted before writing, so that the count never lags behind what
        // the server (and hence the client, via replies) has seen.
        if direction == Direction::ClientToServer {
            shared
                .forwarded_to_server
                .fetch_add(chunk.len() as u64, Ordering::AcqRel);
        }
        if dst.write_all(&chunk).is_err() {
            let _ = dst.shutdown(Shutdown::Both);
            return;
        }
    }
}
