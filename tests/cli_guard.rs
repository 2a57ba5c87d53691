//! The `redquorum` binary's restart-guard commands against real nodes:
//! setting the quarantine the nodes keep.
#![cfg(all(feature = "testkit", feature = "cli"))]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{cluster, output, unique};
use redquorum::testkit::LocalCluster;
use serde_json::Value;

const EX_USAGE: i32 = 64;
const EX_CONFIG: i32 = 78;

/// The binary on `nodes` with the restart guard at `max_ttl`, run with `args`.
fn guarded(nodes: &LocalCluster, max_ttl: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_redquorum"));
    command
        .env_remove("REDLOCK_NODES")
        .env_remove("REDLOCK_NODES_FILE")
        .env_remove("REDQUORUM_PASSWORD")
        .arg("--nodes")
        .arg(nodes.urls().join(","))
        .args(["--node-timeout", "1s", "--restart-guard", max_ttl])
        .args(args);
    output(&mut command)
}

/// `status --json` of `resource` as the client with `max_ttl` sees it.
fn status(nodes: &LocalCluster, max_ttl: &str, resource: &str) -> Value {
    let (_, out, err) = guarded(
        nodes,
        max_ttl,
        &["status", "--resource", resource, "--json"],
    );
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"))
}

/// A client with a huge `max_ttl` is the first to meet a restarted node,
/// which then keeps its quarantine; an operator who knows that no lock that
/// long can be live gives the nodes the fleet's quarantine back.
#[test]
fn set_quarantine_gives_the_nodes_the_fleets_quarantine_after_a_client_set_a_huge_one() {
    let nodes = cluster(3);
    let (code, out, err) = guarded(&nodes, "300ms", &["init", "--no-lock-is-live"]);
    assert_eq!(code, Some(0), "{out}{err}");
    if let Err(e) = nodes.restart_empty(0) {
        panic!("restart: {e}");
    }
    let resource = unique("cli-set-quarantine");
    let run = [
        "run",
        "--resource",
        resource.as_str(),
        "--ttl",
        "300ms",
        "--no-wait",
        "--",
        "true",
    ];
    let (code, out, err) = guarded(&nodes, "600s", &run);
    assert_ne!(code, Some(0), "{out}{err}");
    let seen = status(&nodes, "300ms", &resource);
    let left = seen["nodes"][0]["quarantine_ms"].as_u64();
    assert!(left.is_some_and(|ms| ms > 60_000), "{seen}");

    let (code, out, err) = guarded(&nodes, "300ms", &["set-quarantine"]);
    assert_eq!(code, Some(EX_USAGE), "{out}{err}");
    assert!(err.contains("--no-longer-lock-is-live"), "{err}");
    let (code, out, err) = guarded(
        &nodes,
        "300ms",
        &["set-quarantine", "--no-longer-lock-is-live"],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out.matches("keeps 305ms").count(), 3, "{out}");

    // Node 0 now waits 305 ms from its restart, not 600 s.
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = status(&nodes, "300ms", &resource);
        if seen["nodes"][0]["quarantine_ms"].is_null() {
            break;
        }
        assert!(Instant::now() < give_up, "still quarantined: {seen}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, out, err) = guarded(&nodes, "300ms", &run);
    assert_eq!(code, Some(0), "{out}{err}");
    let (code, out, err) = guarded(&nodes, "300ms", &["check"]);
    assert_eq!(code, Some(0), "{out}{err}");
    // The huge client is now the one refused, and check says why.
    let (code, out, err) = guarded(&nodes, "600s", &["check"]);
    assert_eq!(code, Some(EX_CONFIG), "{out}{err}");
    assert!(
        out.contains("keeps a restart-guard quarantine of 305ms"),
        "{out}"
    );
    let (code, out, err) = guarded(&nodes, "600s", &["check", "--json"]);
    assert_eq!(code, Some(EX_CONFIG), "{out}{err}");
    let json: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let kinds = json["nodes"][0]["problems"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        kinds.iter().any(|p| p["kind"] == "quarantine_mismatch"),
        "{json}"
    );
}

#[test]
fn the_guard_commands_help_lists_their_exit_codes() {
    for sub in ["set-quarantine", "vouch-counters"] {
        let mut help = Command::new(env!("CARGO_BIN_EXE_redquorum"));
        help.args([sub, "--help"]);
        let (code, out, _) = output(&mut help);
        assert_eq!(code, Some(0), "{out}");
        let Some((_, section)) = out.split_once("Exit codes:") else {
            panic!("{sub}: no exit codes: {out}");
        };
        for code in ["0", "80", "69", "78", "64"] {
            assert!(
                section
                    .lines()
                    .any(|l| l.trim_start().starts_with(&format!("{code} "))),
                "{sub}: exit code {code} not explained: {section}"
            );
        }
    }
}

/// After clean restarts (AOF `always`) of two nodes of three, a resource
/// not fenced since cannot issue a token; an operator who knows the
/// counters survived vouches for them, and the next token follows the last.
#[test]
fn vouch_counters_lets_a_resource_issue_tokens_again_after_clean_restarts() {
    let nodes = cluster(3);
    for i in 0..3 {
        if let Err(e) = nodes.enable_aof(i) {
            panic!("AOF: {e}");
        }
    }
    let (code, out, err) = guarded(&nodes, "1s", &["init", "--no-lock-is-live"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let resource = unique("cli-vouch");
    let token = [
        "run",
        "--resource",
        resource.as_str(),
        "--ttl",
        "1s",
        "--fencing",
        "--no-wait",
        "--",
        "sh",
        "-c",
        "echo token=$REDQUORUM_FENCING_TOKEN",
    ];
    let (code, out, err) = guarded(&nodes, "1s", &token);
    assert_eq!((code, out.trim()), (Some(0), "token=1"), "{err}");
    for i in [0, 1] {
        if let Err(e) = nodes.restart_with_aof(i) {
            panic!("restart: {e}");
        }
    }
    // A vote starts both quarantines; wait them out. Locks of a second
    // (not 300 ms): a cold CLI process on a loaded machine once took the
    // whole of a 300 ms TTL to gather its quorum.
    let plain = [
        "run",
        "--resource",
        "cli-vouch-plain",
        "--ttl",
        "1s",
        "--no-wait",
        "--",
        "true",
    ];
    let _ = guarded(&nodes, "1s", &plain);
    std::thread::sleep(Duration::from_millis(2000));
    let (code, out, err) = guarded(&nodes, "1s", &plain);
    assert_eq!(code, Some(0), "{out}{err}");

    let (code, out, err) = guarded(&nodes, "1s", &token);
    assert_eq!(code, Some(EX_CONFIG), "{out}{err}");
    assert!(err.contains("vouch-counters"), "{err}");
    let vouch = ["vouch-counters", "--resource", resource.as_str()];
    let (code, out, err) = guarded(&nodes, "1s", &vouch);
    assert_eq!(code, Some(EX_USAGE), "{out}{err}");
    assert!(err.contains("--counters-are-intact"), "{err}");
    let mut confirmed = vouch.to_vec();
    confirmed.push("--counters-are-intact");
    let (code, out, err) = guarded(&nodes, "1s", &confirmed);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out.matches("vouched").count(), 3, "{out}");
    let (code, out, err) = guarded(&nodes, "1s", &token);
    assert_eq!((code, out.trim()), (Some(0), "token=2"), "{err}");
}
