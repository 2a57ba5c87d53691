//! A Redis Cluster's layout as `CLUSTER SLOTS` gives it: which master
//! serves which slots, and its replicas.

use redis::Value;

/// One server of the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// Host or IP address, as the cluster announces it.
    pub(crate) host: String,
    /// Client port.
    pub(crate) port: u16,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// A range of slots, its master and replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Shard {
    pub(crate) start: u16,
    pub(crate) end: u16,
    pub(crate) master: Endpoint,
    pub(crate) replicas: Vec<Endpoint>,
}

/// Reads a `CLUSTER SLOTS` reply. An empty host (the server does not know
/// its own address) is `fallback`, the host the reply came from.
///
/// # Errors
///
/// A message saying what was unexpected in the reply.
pub(crate) fn parse(reply: Value, fallback: &str) -> Result<Vec<Shard>, String> {
    let Value::Array(ranges) = reply else {
        return Err(format!("CLUSTER SLOTS answered {reply:?}, not a list"));
    };
    let mut shards = Vec::new();
    for range in ranges {
        let Value::Array(parts) = range else {
            return Err("a CLUSTER SLOTS entry is not a list".to_owned());
        };
        let mut parts = parts.into_iter();
        let (Some(start), Some(end)) = (parts.next().and_then(slot), parts.next().and_then(slot))
        else {
            return Err("a CLUSTER SLOTS entry has no slot range".to_owned());
        };
        let mut servers = parts.filter_map(|p| endpoint(p, fallback));
        let Some(master) = servers.next() else {
            return Err(format!("slots {start}-{end} have no master"));
        };
        shards.push(Shard {
            start,
            end,
            master,
            replicas: servers.collect(),
        });
    }
    Ok(shards)
}

/// The shard that serves `slot`, if any.
pub(crate) fn owner(shards: &[Shard], slot: u16) -> Option<&Shard> {
    shards.iter().find(|s| (s.start..=s.end).contains(&slot))
}

fn slot(value: Value) -> Option<u16> {
    match value {
        Value::Int(n) => u16::try_from(n).ok(),
        _ => None,
    }
}

fn endpoint(value: Value, fallback: &str) -> Option<Endpoint> {
    let Value::Array(fields) = value else {
        return None;
    };
    let mut fields = fields.into_iter();
    let host: String = redis::from_redis_value(fields.next()?).ok()?;
    let port = u16::try_from(redis::from_redis_value::<i64>(fields.next()?).ok()?).ok()?;
    let host = if host.is_empty() || host == "?" {
        fallback.to_owned()
    } else {
        host
    };
    Some(Endpoint { host, port })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(host: &str, port: i64) -> Value {
        Value::Array(vec![
            Value::BulkString(host.into()),
            Value::Int(port),
            Value::BulkString(b"id".to_vec()),
        ])
    }

    #[test]
    fn a_reply_gives_each_ranges_master_and_replicas() {
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(8191),
                server("10.0.0.1", 7000),
                server("10.0.0.2", 7001),
            ]),
            Value::Array(vec![Value::Int(8192), Value::Int(16383), server("", 7002)]),
        ]);
        let shards = parse(reply, "seed").expect("parsed");
        assert_eq!(shards.len(), 2);
        assert_eq!(shards[0].master.to_string(), "10.0.0.1:7000");
        assert_eq!(shards[0].replicas[0].to_string(), "10.0.0.2:7001");
        assert_eq!(
            shards[1].master.to_string(),
            "seed:7002",
            "empty host: the seed's"
        );
        assert_eq!(owner(&shards, 8192).map(|s| s.start), Some(8192));
        assert_eq!(owner(&shards, 8191).map(|s| s.start), Some(0));
    }

    #[test]
    fn a_reply_that_is_not_a_slot_list_is_an_error() {
        assert!(parse(Value::Okay, "seed").is_err());
        let no_master = Value::Array(vec![Value::Array(vec![Value::Int(0), Value::Int(5)])]);
        let err = parse(no_master, "seed").expect_err("no master");
        assert!(err.contains("no master"), "{err}");
    }
}
