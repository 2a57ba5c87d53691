//! [`Reply`]: one RESP2 reply, and the error texts redis-server 7.0.15
//! answers with.

use std::io::Write;

/// One RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Reply {
    /// `+text`.
    Status(String),
    /// `-text` (the text starts with its code: `ERR ...`, `WRONGTYPE ...`).
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$len` and the bytes.
    Bulk(Vec<u8>),
    /// `$-1`.
    Nil,
    /// `*n` and the elements.
    Array(Vec<Reply>),
}

impl Reply {
    /// `+OK`.
    pub(super) fn ok() -> Reply {
        Reply::Status("OK".to_owned())
    }

    /// An error reply from its text (code first).
    pub(super) fn error(text: impl Into<String>) -> Reply {
        Reply::Error(text.into())
    }

    /// A bulk string from anything that is bytes.
    pub(super) fn bulk(bytes: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(bytes.into())
    }

    /// The reply as RESP2 bytes. Line breaks inside a status or an error
    /// become spaces, as Redis makes them, so the framing stays valid.
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Reply::Status(text) => line(out, b'+', text),
            Reply::Error(text) => line(out, b'-', text),
            Reply::Int(n) => {
                let _ = write!(out, ":{n}\r\n");
            }
            Reply::Bulk(bytes) => {
                let _ = write!(out, "${}\r\n", bytes.len());
                out.extend_from_slice(bytes);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::Array(items) => {
                let _ = write!(out, "*{}\r\n", items.len());
                for item in items {
                    item.write(out);
                }
            }
        }
    }
}

fn line(out: &mut Vec<u8>, kind: u8, text: &str) {
    out.push(kind);
    out.extend(
        text.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

/// `WRONGTYPE`, for a command on a key of another type.
pub(super) fn wrong_type() -> Reply {
    Reply::error("WRONGTYPE Operation against a key holding the wrong kind of value")
}

/// A value that must be an integer is not.
pub(super) fn not_integer() -> Reply {
    Reply::error("ERR value is not an integer or out of range")
}

/// `ERR syntax error`.
pub(super) fn syntax_error() -> Reply {
    Reply::error("ERR syntax error")
}

/// An expiry Redis refuses, named by the command's name.
pub(super) fn invalid_expire(command: &str) -> Reply {
    Reply::error(format!("ERR invalid expire time in '{command}' command"))
}

/// What a replica answers to a write.
pub(super) const READONLY: &str = "READONLY You can't write against a read only replica.";

/// What `EVALSHA` answers for a script the node does not know.
pub(super) const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_encode_as_resp2() {
        let reply = Reply::Array(vec![
            Reply::ok(),
            Reply::Int(-3),
            Reply::bulk("ab"),
            Reply::Nil,
            Reply::error("ERR a\r\nb"),
        ]);
        assert_eq!(
            reply.encode(),
            b"*5\r\n+OK\r\n:-3\r\n$2\r\nab\r\n$-1\r\n-ERR a  b\r\n".to_vec()
        );
    }
}
