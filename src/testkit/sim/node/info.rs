//! `INFO`: the sections the library and the testkit read (`server`,
//! `persistence`, `replication`, `cluster`, `keyspace`), with the fields
//! and format of redis-server 7.0.15.

use std::fmt::Write;

use super::core::Core;

/// The version every simulated node reports.
pub(super) const VERSION: &str = "7.0.15";

/// Writes one section.
type Section = fn(&Core, &mut String);

const SECTIONS: [(&str, Section); 6] = [
    ("server", server),
    ("clients", clients),
    ("persistence", persistence),
    ("replication", replication),
    ("cluster", cluster),
    ("keyspace", keyspace),
];

/// The text of `INFO` with `sections` (none: every section modelled).
/// Sections the node does not model come back empty, as unknown ones do.
pub(super) fn text(core: &Core, sections: &[Vec<u8>]) -> String {
    let all = sections.is_empty()
        || sections.iter().any(|s| {
            ["default", "all", "everything"]
                .iter()
                .any(|w| s.eq_ignore_ascii_case(w.as_bytes()))
        });
    let mut out = String::new();
    for (name, write) in SECTIONS {
        let wanted = all
            || sections
                .iter()
                .any(|s| s.eq_ignore_ascii_case(name.as_bytes()));
        if wanted {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            write(core, &mut out);
        }
    }
    out
}

/// One line's value: anything written with `Display`.
type Field<'a> = (&'a str, &'a dyn std::fmt::Display);

fn fields(out: &mut String, title: &str, lines: &[Field<'_>]) {
    let _ = write!(out, "# {title}\r\n");
    for (name, value) in lines {
        let _ = write!(out, "{name}:{value}\r\n");
    }
}

/// The `Server` section's lines up to `process_id`, which never change.
const SERVER_HEAD: &str = concat!(
    "# Server\r\n",
    "redis_version:7.0.15\r\n",
    "redis_git_sha1:00000000\r\n",
    "redis_git_dirty:0\r\n",
    "redis_build_id:5fc3d4b8a7e0c1f2\r\n",
    "redis_mode:standalone\r\n",
    "os:Linux (simulated) x86_64\r\n",
    "arch_bits:64\r\n",
    "multiplexing_api:epoll\r\n",
);

/// Its lines after `uptime_in_days`.
const SERVER_TAIL: &str = concat!(
    "hz:10\r\n",
    "configured_hz:10\r\n",
    "executable:/usr/bin/redis-server\r\n",
    "config_file:\r\n",
    "io_threads_active:0\r\n",
);

/// Written straight, not through [`fields`]: every guarded script reads
/// it, twice a vote.
fn server(core: &Core, out: &mut String) {
    let uptime = (core.us - core.process.started_us).max(0) / 1_000_000;
    let days = uptime / 86_400;
    let port = core.config.get("port").map_or("", String::as_str);
    out.push_str(SERVER_HEAD);
    let _ = write!(
        out,
        "process_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\ntcp_port:{port}\r\n\
         server_time_usec:{}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{days}\r\n",
        core.process.pid, core.process.run_id, core.us
    );
    out.push_str(SERVER_TAIL);
}

fn clients(_: &Core, out: &mut String) {
    fields(
        out,
        "Clients",
        &[("connected_clients", &"1"), ("blocked_clients", &"0")],
    );
}

fn persistence(core: &Core, out: &mut String) {
    let aof = u8::from(core.config.get("appendonly").is_some_and(|v| v == "yes"));
    let saved = core.process.last_save_us.div_euclid(1_000_000);
    fields(
        out,
        "Persistence",
        &[
            ("loading", &"0"),
            ("async_loading", &"0"),
            ("rdb_changes_since_last_save", &core.keys.dirty),
            ("rdb_bgsave_in_progress", &"0"),
            ("rdb_last_save_time", &saved),
            ("rdb_last_bgsave_status", &"ok"),
            ("rdb_saves", &core.process.saves),
            ("aof_enabled", &aof),
            ("aof_rewrite_in_progress", &"0"),
            ("aof_rewrite_scheduled", &"0"),
            ("aof_last_bgrewrite_status", &"ok"),
            ("aof_last_write_status", &"ok"),
        ],
    );
}

/// Written straight, as [`server`]: every guarded script reads it too.
fn replication(core: &Core, out: &mut String) {
    out.push_str("# Replication\r\n");
    match &core.master {
        None => out.push_str("role:master\r\n"),
        Some((host, port)) => {
            let _ = write!(
                out,
                "role:slave\r\nmaster_host:{host}\r\nmaster_port:{port}\r\n"
            );
            out.push_str(REPLICA_LINK);
        }
    }
    out.push_str("connected_slaves:0\r\nmaster_replid:");
    out.push_str(&core.process.replid);
    out.push_str("\r\nmaster_repl_offset:0\r\n");
}

/// A replica's lines after `master_port`.
const REPLICA_LINK: &str = concat!(
    "master_link_status:up\r\n",
    "master_last_io_seconds_ago:0\r\n",
    "master_sync_in_progress:0\r\n",
    "slave_repl_offset:0\r\n",
    "slave_priority:100\r\n",
    "slave_read_only:1\r\n",
);

fn cluster(_: &Core, out: &mut String) {
    fields(out, "Cluster", &[("cluster_enabled", &"0")]);
}

fn keyspace(core: &Core, out: &mut String) {
    let live: Vec<_> = core.keys.live(core.ms()).collect();
    let expires = live.iter().filter(|(_, e)| e.expire_at.is_some()).count();
    let db0 = format!("keys={},expires={expires},avg_ttl=0", live.len());
    let lines: &[Field<'_>] = if live.is_empty() {
        &[]
    } else {
        &[("db0", &db0)]
    };
    fields(out, "Keyspace", lines);
}
