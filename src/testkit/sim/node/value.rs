//! A reply as the value redis-rs's connection makes of it. A number, a
//! string, a status or an array of them is built as that value at once;
//! an error is written as RESP and read back by redis's own
//! [`ValueCodec`](redis::ValueCodec), so it is parsed exactly as on a real
//! connection. Decoding every reply was a fortieth of a simulation batch.

use redis::{RedisResult, Value};

use super::reply::Reply;

/// `reply` as the connection's decoder reads it: `+OK` is
/// [`Value::Okay`], another status a simple string, a nil bulk
/// [`Value::Nil`]; an error, or a status with a line break (which the
/// encoder rewrites), goes through the decoder.
pub(super) fn of(reply: Reply) -> RedisResult<Value> {
    Ok(match reply {
        Reply::Status(text) if text == "OK" => Value::Okay,
        Reply::Status(text) if !text.contains(['\r', '\n']) => Value::SimpleString(text),
        Reply::Int(n) => Value::Int(n),
        Reply::Bulk(bytes) => Value::BulkString(bytes),
        Reply::Nil => Value::Nil,
        Reply::Array(items) => Value::Array(items.into_iter().map(of).collect::<RedisResult<_>>()?),
        other => return decode(&other.encode()),
    })
}

/// A reply's bytes as the value the real connection's decoder (redis's
/// [`ValueCodec`](redis::ValueCodec)) makes of them.
pub(crate) fn decode(bytes: &[u8]) -> RedisResult<Value> {
    use tokio_util::codec::Decoder;
    let mut buffer = bytes::BytesMut::from(bytes);
    match redis::ValueCodec::default().decode_eof(&mut buffer)? {
        Some(value) => Ok(value),
        None => Err(redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "a simulated reply ended before its value",
        ))),
    }
}
