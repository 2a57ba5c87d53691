//! Two floors for a five-node acquire+release pair, the least a Redlock
//! client can spend: the same commands, no timeouts, no early quorum, no
//! clean-up, each waiting for all five answers.
//!
//! - [`Floor`]: a hand-written fan-out on redis-rs `ConnectionManager`s,
//!   the connections both libraries use.
//! - [`Raw`]: the same bytes written and read on plain tokio sockets, with
//!   no client library: each call writes its command and reads its reply
//!   itself, with no connection task in between.

use futures::future::join_all;
use redquorum::redis;
use redquorum::redis::aio::ConnectionManager;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

/// The release script both floors and the libraries run, in essence.
pub const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/// The value the floors lock with (its length is that of ours).
pub const VALUE: &str = "floor-value-0123456789abcdef0123456789";

pub struct Floor {
    conns: Vec<ConnectionManager>,
    release: redis::Script,
}

impl Floor {
    pub async fn new(urls: &[String]) -> Floor {
        let mut conns = Vec::new();
        for url in urls {
            let client = redis::Client::open(url.as_str()).expect("client");
            conns.push(ConnectionManager::new(client).await.expect("connect"));
        }
        Floor {
            conns,
            release: redis::Script::new(RELEASE),
        }
    }

    /// SET NX PX to all five, wait for all, then the release script to all five.
    pub async fn pair(&self, resource: &str, value: &str) {
        let mut set = redis::cmd("SET");
        set.arg(resource).arg(value).arg("NX").arg("PX").arg(10_000);
        let set = &set;
        let granted = join_all(self.conns.iter().map(|c| {
            let mut c = c.clone();
            async move { set.query_async::<Option<String>>(&mut c).await }
        }))
        .await;
        assert!(granted.iter().filter(|g| matches!(g, Ok(Some(_)))).count() >= 3);
        let mut invocation = self.release.key(resource);
        invocation.arg(value);
        let invocation = &invocation;
        join_all(self.conns.iter().map(|c| {
            let mut c = c.clone();
            async move { invocation.invoke_async::<i64>(&mut c).await }
        }))
        .await;
    }
}

/// One plain socket per node and a read buffer.
pub struct Raw {
    conns: Vec<Mutex<(TcpStream, Vec<u8>)>>,
    sha: String,
}

/// A command in RESP.
fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
    }
    out
}

impl Raw {
    /// `urls`: `redis://host:port/` without credentials.
    pub async fn new(urls: &[String]) -> Raw {
        let sha = redis::Script::new(RELEASE).get_hash().to_owned();
        let mut conns = Vec::new();
        for url in urls {
            let addr = url.trim_start_matches("redis://").trim_end_matches('/');
            let stream = TcpStream::connect(addr).await.expect("connect");
            stream.set_nodelay(true).expect("nodelay");
            let conn = Mutex::new((stream, Vec::new()));
            let loaded = call(&conn, &resp(&["SCRIPT", "LOAD", RELEASE])).await;
            assert!(loaded.starts_with(b"$40"), "SCRIPT LOAD: {loaded:?}");
            conns.push(conn);
        }
        Raw { conns, sha }
    }

    pub async fn pair(&self, resource: &str, value: &str) {
        let set = resp(&["SET", resource, value, "NX", "PX", "10000"]);
        let granted = join_all(self.conns.iter().map(|c| call(c, &set))).await;
        assert!(granted.iter().filter(|r| r.starts_with(b"+OK")).count() >= 3);
        let release = resp(&["EVALSHA", &self.sha, "1", resource, value]);
        join_all(self.conns.iter().map(|c| call(c, &release))).await;
    }
}

/// Writes `command`, reads one one-line reply (`+OK`, `$-1`, `:1`, or the
/// bulk string of a script's hash).
async fn call(conn: &Mutex<(TcpStream, Vec<u8>)>, command: &[u8]) -> Vec<u8> {
    let mut conn = conn.lock().await;
    let (stream, buf) = &mut *conn;
    stream.write_all(command).await.expect("write");
    buf.clear();
    let lines = |buf: &[u8]| buf.windows(2).filter(|w| w == b"\r\n").count();
    loop {
        let mut chunk = [0u8; 256];
        let n = stream.read(&mut chunk).await.expect("read");
        assert!(n > 0, "connection closed");
        buf.extend_from_slice(&chunk[..n]);
        let complete = match buf.first() {
            Some(b'$') if !buf.starts_with(b"$-1") => lines(buf) >= 2,
            _ => lines(buf) >= 1,
        };
        if complete {
            return buf.clone();
        }
    }
}
