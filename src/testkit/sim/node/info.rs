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

fn fields(out: &mut String, title: &str, lines: &[(&str, String)]) {
    let _ = write!(out, "# {title}\r\n");
    for (name, value) in lines {
        let _ = write!(out, "{name}:{value}\r\n");
    }
}

fn server(core: &Core, out: &mut String) {
    let uptime = (core.us - core.process.started_us).max(0) / 1_000_000;
    let port = core.config.get("port").cloned().unwrap_or_default();
    fields(
        out,
        "Server",
        &[
            ("redis_version", VERSION.to_owned()),
            ("redis_git_sha1", "00000000".to_owned()),
            ("redis_git_dirty", "0".to_owned()),
            ("redis_build_id", "5fc3d4b8a7e0c1f2".to_owned()),
            ("redis_mode", "standalone".to_owned()),
            ("os", "Linux (simulated) x86_64".to_owned()),
            ("arch_bits", "64".to_owned()),
            ("multiplexing_api", "epoll".to_owned()),
            ("process_id", core.process.pid.to_string()),
            ("process_supervised", "no".to_owned()),
            ("run_id", core.process.run_id.clone()),
            ("tcp_port", port),
            ("server_time_usec", core.us.to_string()),
            ("uptime_in_seconds", uptime.to_string()),
            ("uptime_in_days", (uptime / 86_400).to_string()),
            ("hz", "10".to_owned()),
            ("configured_hz", "10".to_owned()),
            ("executable", "/usr/bin/redis-server".to_owned()),
            ("config_file", String::new()),
            ("io_threads_active", "0".to_owned()),
        ],
    );
}

fn clients(_: &Core, out: &mut String) {
    fields(
        out,
        "Clients",
        &[
            ("connected_clients", "1".to_owned()),
            ("blocked_clients", "0".to_owned()),
        ],
    );
}

fn persistence(core: &Core, out: &mut String) {
    let aof = core.config.get("appendonly").is_some_and(|v| v == "yes");
    fields(
        out,
        "Persistence",
        &[
            ("loading", "0".to_owned()),
            ("async_loading", "0".to_owned()),
            ("rdb_changes_since_last_save", core.keys.dirty.to_string()),
            ("rdb_bgsave_in_progress", "0".to_owned()),
            (
                "rdb_last_save_time",
                core.process.last_save_us.div_euclid(1_000_000).to_string(),
            ),
            ("rdb_last_bgsave_status", "ok".to_owned()),
            ("rdb_saves", core.process.saves.to_string()),
            ("aof_enabled", u8::from(aof).to_string()),
            ("aof_rewrite_in_progress", "0".to_owned()),
            ("aof_rewrite_scheduled", "0".to_owned()),
            ("aof_last_bgrewrite_status", "ok".to_owned()),
            ("aof_last_write_status", "ok".to_owned()),
        ],
    );
}

fn replication(core: &Core, out: &mut String) {
    let mut lines = Vec::new();
    match &core.master {
        None => lines.push(("role", "master".to_owned())),
        Some((host, port)) => {
            lines.push(("role", "slave".to_owned()));
            lines.push(("master_host", host.clone()));
            lines.push(("master_port", port.to_string()));
            lines.push(("master_link_status", "up".to_owned()));
            lines.push(("master_last_io_seconds_ago", "0".to_owned()));
            lines.push(("master_sync_in_progress", "0".to_owned()));
            lines.push(("slave_repl_offset", "0".to_owned()));
            lines.push(("slave_priority", "100".to_owned()));
            lines.push(("slave_read_only", "1".to_owned()));
        }
    }
    lines.push(("connected_slaves", "0".to_owned()));
    lines.push(("master_replid", core.process.replid.clone()));
    lines.push(("master_repl_offset", "0".to_owned()));
    fields(out, "Replication", &lines);
}

fn cluster(_: &Core, out: &mut String) {
    fields(out, "Cluster", &[("cluster_enabled", "0".to_owned())]);
}

fn keyspace(core: &Core, out: &mut String) {
    let live: Vec<_> = core.keys.live(core.ms()).collect();
    let expires = live.iter().filter(|(_, e)| e.expire_at.is_some()).count();
    let mut lines = Vec::new();
    if !live.is_empty() {
        lines.push((
            "db0",
            format!("keys={},expires={expires},avg_ttl=0", live.len()),
        ));
    }
    fields(out, "Keyspace", &lines);
}
