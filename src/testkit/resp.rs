//! Just enough RESP parsing to rewrite TTLs in the client-to-server stream
//! for [`ProxyMode::FastClock`](super::ProxyMode::FastClock).
//!
//! Requests are RESP arrays of bulk strings (what every client sends) or
//! inline commands (one line). A chunk read from a socket may end in the
//! middle of a request, so [`Rewriter`] buffers until whole requests are
//! there, rewrites those, and keeps the incomplete tail for the next chunk.
//!
//! What is rewritten (rate `r` = `per_mille / 1000`, new TTL =
//! `max(1, ttl / r)`), so that the node's keys expire as if its clock ran
//! `r` times faster:
//! - `SET ... PX n`: the argument after `PX`;
//! - `PEXPIRE key n`: the TTL argument;
//! - `EVALSHA sha numkeys keys... argv...` of one of the library's scripts
//!   that set or extend a TTL (known by its hash): its TTL argument. (The
//!   library sends scripts by hash; after `NOSCRIPT` it loads them with
//!   `SCRIPT LOAD` and sends the hash again.)
//!
//! Everything else is forwarded byte for byte.

/// Buffers the client-to-server byte stream and rewrites whole requests.
#[derive(Debug, Default)]
pub(crate) struct Rewriter {
    pending: Vec<u8>,
}

impl Rewriter {
    /// Appends `chunk`; returns the rewritten bytes of every complete request
    /// now buffered (possibly empty), keeping the incomplete tail.
    pub(crate) fn feed(&mut self, chunk: &[u8], per_mille: u32) -> Vec<u8> {
        self.pending.extend_from_slice(chunk);
        let mut out = Vec::with_capacity(self.pending.len());
        let mut pos = 0;
        while pos < self.pending.len() {
            match parse(&self.pending[pos..]) {
                Parsed::Incomplete => break,
                Parsed::Raw(len) => {
                    out.extend_from_slice(&self.pending[pos..pos + len]);
                    pos += len;
                }
                Parsed::Array(len, args) => {
                    match rewrite(&args, per_mille) {
                        Some(args) => encode(&args, &mut out),
                        None => out.extend_from_slice(&self.pending[pos..pos + len]),
                    }
                    pos += len;
                }
            }
        }
        self.pending.drain(..pos);
        out
    }

    /// Takes whatever is buffered, unchanged (when the mode changes).
    pub(crate) fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }
}

enum Parsed {
    /// Need more bytes.
    Incomplete,
    /// Not a RESP array of bulk strings (inline command or something
    /// unexpected): forward this many bytes as they are.
    Raw(usize),
    /// A whole array of `len` bytes and its arguments.
    Array(usize, Vec<Vec<u8>>),
}

fn line(buf: &[u8]) -> Option<(&[u8], usize)> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    Some((&buf[..end], end + 2))
}

fn number(digits: &[u8]) -> Option<usize> {
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn parse(buf: &[u8]) -> Parsed {
    let Some((head, mut pos)) = line(buf) else {
        return Parsed::Incomplete;
    };
    let Some(count) = head.strip_prefix(b"*").and_then(number) else {
        return Parsed::Raw(pos);
    };
    let mut args = Vec::with_capacity(count);
    for _ in 0..count {
        let Some((head, used)) = line(&buf[pos..]) else {
            return Parsed::Incomplete;
        };
        let Some(len) = head.strip_prefix(b"$").and_then(number) else {
            // Not a bulk string: give up on rewriting, forward what we have.
            return Parsed::Raw(pos);
        };
        let start = pos + used;
        if buf.len() < start + len + 2 {
            return Parsed::Incomplete;
        }
        args.push(buf[start..start + len].to_vec());
        pos = start + len + 2;
    }
    Parsed::Array(pos, args)
}

fn scaled(arg: &[u8], per_mille: u32) -> Option<Vec<u8>> {
    let ttl: u64 = std::str::from_utf8(arg).ok()?.parse().ok()?;
    let scaled = (ttl * 1000 / u64::from(per_mille.max(1))).max(1);
    Some(scaled.to_string().into_bytes())
}

/// The rewritten arguments, or `None` if the request has no TTL to change.
fn rewrite(args: &[Vec<u8>], per_mille: u32) -> Option<Vec<Vec<u8>>> {
    let name = args.first()?.to_ascii_uppercase();
    let index = match name.as_slice() {
        b"SET" => args.iter().position(|a| a.eq_ignore_ascii_case(b"PX"))? + 1,
        b"PEXPIRE" => 2,
        b"EVALSHA" => {
            let numkeys = number(args.get(2)?)?;
            // Which ARGV is a TTL: the script registry knows, by the hash (a
            // script's arguments alone do not tell a TTL from, say, a token).
            3 + numkeys + crate::node::registry::ttl_argv(std::str::from_utf8(args.get(1)?).ok()?)?
        }
        _ => return None,
    };
    let new = scaled(args.get(index)?, per_mille)?;
    let mut out = args.to_vec();
    out[index] = new;
    Some(out)
}

fn encode(args: &[Vec<u8>], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(args: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(
            &args
                .iter()
                .map(|a| a.as_bytes().to_vec())
                .collect::<Vec<_>>(),
            &mut out,
        );
        out
    }

    #[test]
    fn set_px_is_divided_by_the_rate_even_when_split_across_chunks() {
        let input = req(&["SET", "k", "v", "NX", "PX", "1000"]);
        let mut r = Rewriter::default();
        let (a, b) = input.split_at(17);
        assert!(r.feed(a, 2000).is_empty());
        assert_eq!(r.feed(b, 2000), req(&["SET", "k", "v", "NX", "PX", "500"]));
    }

    #[test]
    fn the_extend_script_ttl_is_rewritten_and_release_is_not() {
        let mut r = Rewriter::default();
        let sha = crate::node::scripts::EXTEND.get_hash();
        let extend = req(&["EVALSHA", sha, "1", "k", "v", "1000"]);
        let release = req(&[
            "EVALSHA",
            crate::node::scripts::RELEASE.get_hash(),
            "1",
            "k",
            "v",
        ]);
        let mut both = extend.clone();
        both.extend_from_slice(&release);
        let mut expected = req(&["EVALSHA", sha, "1", "k", "v", "500"]);
        expected.extend_from_slice(&release);
        assert_eq!(r.feed(&both, 2000), expected);
    }

    #[test]
    fn a_script_with_two_arguments_but_no_ttl_is_forwarded_unchanged() {
        // The fencing write-back takes (value, token): the token is no TTL.
        let mut r = Rewriter::default();
        let write_back = req(&["EVALSHA", "0123456789abcdef", "2", "l", "f", "v", "1000"]);
        assert_eq!(r.feed(&write_back, 2000), write_back);
    }

    #[test]
    fn inline_commands_and_other_requests_pass_unchanged() {
        let mut r = Rewriter::default();
        assert_eq!(r.feed(b"PING\r\n", 2000), b"PING\r\n");
        let get = req(&["GET", "k"]);
        assert_eq!(r.feed(&get, 2000), get);
        assert!(r.take().is_empty());
    }

    #[test]
    fn the_restart_guards_scripts_have_their_ttl_rewritten_too() {
        use crate::node::restart_guard::*;
        let guarded: [(&crate::node::script::Lua, usize); 6] = [
            (&GUARDED_ACQUIRE_ALL, 1),
            (&GUARDED_REENTRANT_ACQUIRE, 2),
            (&GUARDED_FENCED_ACQUIRE, 1),
            (&GUARDED_EXTEND, 1),
            (&GUARDED_EXTEND_OR_MISSING, 1),
            (&GUARDED_REENTRANT_EXTEND, 1),
        ];
        for (script, ttl) in guarded {
            let sha = script.get_hash();
            assert_eq!(crate::node::registry::ttl_argv(sha), Some(ttl), "{sha}");
            let mut args = vec!["EVALSHA", sha, "2", "k", "guard", "v"];
            args.extend(std::iter::repeat_n("o", ttl - 1));
            args.extend(["1000", "60000"]);
            let mut expected = args.clone();
            expected[5 + ttl] = "500";
            assert_eq!(Rewriter::default().feed(&req(&args), 2000), req(&expected));
        }
    }

    #[test]
    fn a_batched_extension_has_its_ttl_rewritten() {
        use crate::node::batch::{BATCHED_EXTEND, GUARDED_BATCHED_EXTEND};
        let args = [
            "EVALSHA",
            BATCHED_EXTEND.get_hash(),
            "2",
            "a",
            "b",
            "1000",
            "v",
            "w",
        ];
        let mut expected = args;
        expected[5] = "500";
        assert_eq!(Rewriter::default().feed(&req(&args), 2000), req(&expected));
        let hash = GUARDED_BATCHED_EXTEND.get_hash();
        let args = ["EVALSHA", hash, "2", "a", "g", "1000", "v", "60000"];
        let mut expected = args;
        expected[5] = "500";
        assert_eq!(Rewriter::default().feed(&req(&args), 2000), req(&expected));
    }
}
