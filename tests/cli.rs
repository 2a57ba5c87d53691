//! The `redquorum` binary against real nodes: run, check, status.
#![cfg(all(feature = "testkit", feature = "cli"))]

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{cluster, get, holders, key, unique};
use redquorum::testkit::LocalCluster;
use serde_json::Value;

/// Exit code of `run` when the lock is lost while the command runs.
const LOCK_LOST: i32 = 79;
/// Exit code when the lock cannot be had.
const EX_TEMPFAIL: i32 = 75;
const EX_USAGE: i32 = 64;
const EX_UNAVAILABLE: i32 = 69;
const EX_CONFIG: i32 = 78;
/// `check`: degraded but usable.
const DEGRADED: i32 = 80;

/// Generous upper bound that only catches hangs.
const HANG: Duration = Duration::from_secs(20);

/// The binary, with `urls` as its nodes and a node timeout that tolerates a
/// loaded machine.
fn redquorum(urls: &[String]) -> Command {
    redquorum_with_timeout(urls, "1s")
}

fn redquorum_with_timeout(urls: &[String], node_timeout: &str) -> Command {
    let mut command = bare();
    command
        .arg("--nodes")
        .arg(urls.join(","))
        .arg("--node-timeout")
        .arg(node_timeout);
    command
}

/// The binary with none of the variables it reads set: no nodes yet.
fn bare() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_redquorum"));
    command
        .env_remove("REDQUORUM_NODES")
        .env_remove("REDQUORUM_NODES_FILE")
        .env_remove("REDLOCK_NODES")
        .env_remove("REDLOCK_NODES_FILE")
        .env_remove("REDQUORUM_PASSWORD");
    command
}

/// Starts the binary with piped stdin, stdout and stderr. A command that
/// runs `read x` waits until the test calls [`finish`].
fn spawn(mut command: Command) -> Child {
    match command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => panic!("cannot start redquorum: {e}"),
    }
}

/// Waits for `child` to exit, failing the test after `limit`.
fn wait(child: &mut Child, limit: Duration) -> ExitStatus {
    let give_up = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status,
            Ok(None) if Instant::now() < give_up => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                panic!("redquorum did not exit within {limit:?}");
            }
            Err(e) => panic!("waiting for redquorum: {e}"),
        }
    }
}

/// Closes the command's standard input: its `read` returns.
fn finish(child: &mut Child) {
    drop(child.stdin.take());
}

fn stderr(child: &mut Child) -> String {
    let mut text = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut text);
    }
    text
}

/// Reads one line of the command's standard output.
fn first_line(child: &mut Child) -> String {
    let Some(out) = child.stdout.take() else {
        panic!("stdout not piped");
    };
    let mut reader = BufReader::new(out);
    let mut line = String::new();
    if let Err(e) = reader.read_line(&mut line) {
        panic!("reading the command's output: {e}");
    }
    // Keep the pipe open so that later writes do not fail.
    child.stdout = Some(reader.into_inner());
    line.trim().to_owned()
}

/// Runs to completion; returns (exit code, stdout, stderr).
fn output(mut command: Command) -> (Option<i32>, String, String) {
    common::output(&mut command)
}

/// A file path no other test uses, removed again on drop.
struct Marker(PathBuf);

impl Marker {
    fn new(name: &str) -> Marker {
        Marker(std::env::temp_dir().join(unique(&format!("redquorum-cli-{name}"))))
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap_or_default()
    }

    fn read(&self) -> String {
        std::fs::read_to_string(&self.0).unwrap_or_default()
    }

    fn exists(&self) -> bool {
        self.0.exists()
    }

    /// Writes `text` to the file, with permission bits `mode`.
    fn write(&self, text: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        if let Err(e) = std::fs::write(&self.0, text) {
            panic!("write {}: {e}", self.path());
        }
        let set = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(mode));
        assert!(set.is_ok(), "chmod {}: {set:?}", self.path());
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The state letter of process `pid` in `/proc/<pid>/stat` (`S`, `R`, `T`,
/// `Z`...), or `None` once it is gone.
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain anything.
    let (_, after_name) = stat.rsplit_once(')')?;
    after_name.trim_start().chars().next()
}

/// True while `pid` exists and is not a zombie (a zombie has ended; only
/// its exit status is left for its parent to collect).
fn running(pid: u32) -> bool {
    proc_state(pid).is_some_and(|state| state != 'Z')
}

/// Ends a process this test started (through redquorum) if it still runs.
fn end_leftover(pid: u32) {
    if running(pid) {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

/// Sends signal `name` (`TSTP`, `CONT`...) to process `pid`.
fn send(pid: u32, name: &str) {
    let sent = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status();
    assert!(sent.is_ok_and(|s| s.success()), "kill -{name} {pid} failed");
}

/// Polls `cond` every 10 ms until it holds or `limit` passes; returns whether it held.
fn within(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let give_up = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= give_up {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// True while process `pid` is stopped (by a signal).
fn stopped(pid: u32) -> bool {
    proc_state(pid) == Some('T')
}

/// Fails the test without leaving processes behind: continues redquorum,
/// kills the command it started, and waits for redquorum to exit.
fn fail_after_cleanup(child: &mut Child, command_pid: u32, why: &str) -> ! {
    send(child.id(), "CONT");
    end_leftover(command_pid);
    finish(child);
    let _ = wait(child, HANG);
    panic!("{why}");
}

/// Kills node `index` of `nodes` (a test set-up step: a failure panics).
fn kill(nodes: &LocalCluster, index: usize) {
    if let Err(e) = nodes.kill(index) {
        panic!("kill node {index}: {e}");
    }
}

fn run_args(command: &mut Command, resource: &str, extra: &[&str], cmd: &[&str]) {
    command
        .args(["run", "--resource", resource])
        .args(extra)
        .arg("--")
        .args(cmd);
}

#[test]
fn two_concurrent_no_wait_runs_let_one_run_and_turn_the_other_away_at_once() {
    let nodes = cluster(5);
    let resource = unique("cli-race");
    let start = || {
        let mut command = redquorum(&nodes.urls());
        run_args(&mut command, &resource, &["--no-wait"], &["sleep", "2"]);
        spawn(command)
    };
    let mut children = [start(), start()];
    let (first, status) = first_to_exit(&mut children, "neither run exited");
    let other = 1 - first;
    let loser_stderr = stderr(&mut children[first]);
    assert_eq!(status.code(), Some(EX_TEMPFAIL), "{loser_stderr}");
    assert!(
        loser_stderr.contains("held by another owner"),
        "{loser_stderr}"
    );
    assert_eq!(loser_stderr.trim().lines().count(), 1, "{loser_stderr}");
    assert!(
        matches!(children[other].try_wait(), Ok(None)),
        "the loser must be turned away while the winner's command still runs"
    );
    let winner = wait(&mut children[other], HANG);
    assert_eq!(winner.code(), Some(0), "{}", stderr(&mut children[other]));
}

#[test]
fn a_waiting_run_starts_once_the_first_one_has_released() {
    let nodes = cluster(5);
    let resource = unique("cli-wait");
    let done = Marker::new("first-done");
    let first_script = format!("echo started; sleep 1; touch {}", done.path());
    let mut first = redquorum(&nodes.urls());
    run_args(
        &mut first,
        &resource,
        &["--no-wait"],
        &["sh", "-c", &first_script],
    );
    let mut first = spawn(first);
    assert_eq!(first_line(&mut first), "started");

    // Exits 9 if it runs before the first command has finished.
    let second_script = format!("test -e {}", done.path());
    let mut second = redquorum(&nodes.urls());
    run_args(
        &mut second,
        &resource,
        &["--wait", "5s"],
        &["sh", "-c", &second_script],
    );
    let (code, _, err) = output(second);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(wait(&mut first, HANG).code(), Some(0));
}

#[test]
fn the_commands_exit_status_is_passed_on_and_the_lock_released_afterwards() {
    let nodes = cluster(5);
    let resource = unique("cli-status");
    let mut command = redquorum(&nodes.urls());
    run_args(
        &mut command,
        &resource,
        &[],
        &[
            "sh",
            "-c",
            "test \"$REDQUORUM_RESOURCE\" = \"$0\" || exit 99; echo \"$REDQUORUM_LOCK_VALUE\"; read x; exit 7",
            &resource,
        ],
    );
    let mut child = spawn(command);
    let value = first_line(&mut child);
    // 40 hex digits, then the holder label (host:pid of `run` and the
    // command's name).
    let random = value.split('.').next().unwrap_or_default();
    assert_eq!(random.len(), 40, "lock value {value:?}");
    assert!(
        value.ends_with(&format!(":{} sh", child.id())),
        "lock value {value:?}"
    );
    let direct = nodes.direct_urls();
    assert!(holders(&direct, &key(&resource), &value) >= 3);
    finish(&mut child);
    let status = wait(&mut child, HANG);
    assert_eq!(status.code(), Some(7), "{}", stderr(&mut child));
    for url in &direct {
        assert_eq!(get(url, &key(&resource)), None, "key left on {url}");
    }
}

#[test]
fn fencing_passes_a_token_that_grows_from_one_run_to_the_next() {
    let nodes = cluster(3);
    let resource = unique("cli-fencing");
    let mut tokens = Vec::new();
    for _ in 0..2 {
        let mut command = redquorum(&nodes.urls());
        run_args(
            &mut command,
            &resource,
            &["--fencing"],
            &["sh", "-c", "echo \"$REDQUORUM_FENCING_TOKEN\""],
        );
        let (code, out, err) = output(command);
        assert_eq!(code, Some(0), "{err}");
        let token: u64 = out
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("token {out:?}"));
        tokens.push(token);
    }
    assert!(tokens[1] > tokens[0], "{tokens:?}");
}

#[test]
fn a_command_killed_by_a_signal_exits_with_128_plus_the_signal() {
    let nodes = cluster(3);
    let mut command = redquorum(&nodes.urls());
    run_args(
        &mut command,
        &unique("cli-signal"),
        &[],
        &["sh", "-c", "kill -TERM $$"],
    );
    let (code, _, err) = output(command);
    assert_eq!(code, Some(128 + 15), "{err}");
}

#[test]
fn losing_a_majority_of_nodes_sends_sigterm_and_exits_with_the_lock_lost_code() {
    let nodes = cluster(5);
    let marker = Marker::new("term");
    let script = format!(
        "trap 'echo term > {}; exit 0' TERM; echo up; while :; do sleep 0.1; done",
        marker.path()
    );
    let mut command = redquorum_with_timeout(&nodes.urls(), "300ms");
    run_args(
        &mut command,
        &unique("cli-lost"),
        &["--ttl", "2s", "--grace", "5s"],
        &["sh", "-c", &script],
    );
    let mut child = spawn(command);
    let line = first_line(&mut child);
    assert_eq!(line, "up", "{}", stderr(&mut child));
    for i in 0..3 {
        kill(&nodes, i);
    }
    let status = wait(&mut child, HANG);
    let err = stderr(&mut child);
    assert_eq!(status.code(), Some(LOCK_LOST), "{err}");
    assert!(err.contains("lost the lock"), "{err}");
    assert_eq!(
        marker.read().trim(),
        "term",
        "the command did not get SIGTERM"
    );
}

#[test]
fn sigint_to_redquorum_is_passed_on_to_the_command_and_the_lock_released() {
    let nodes = cluster(5);
    let resource = unique("cli-int");
    let marker = Marker::new("int");
    let script = format!(
        "trap 'echo int > {}; exit 5' INT; echo up; while :; do sleep 0.1; done",
        marker.path()
    );
    let mut command = redquorum(&nodes.urls());
    run_args(&mut command, &resource, &[], &["sh", "-c", &script]);
    let mut child = spawn(command);
    let line = first_line(&mut child);
    assert_eq!(line, "up", "{}", stderr(&mut child));
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    assert!(sent.is_ok_and(|s| s.success()), "kill -INT failed");
    let status = wait(&mut child, HANG);
    assert_eq!(status.code(), Some(5), "{}", stderr(&mut child));
    assert_eq!(marker.read().trim(), "int");
    for url in &nodes.direct_urls() {
        assert_eq!(get(url, &key(&resource)), None, "key left on {url}");
    }
}

#[test]
fn a_run_exits_69_and_says_so_even_when_quiet_when_a_majority_of_nodes_is_down() {
    let nodes = cluster(5);
    for i in 0..3 {
        kill(&nodes, i);
    }
    for flags in [
        &["--no-wait"][..],
        &["--no-wait", "--quiet", "--conflict-exit-code", "0"],
        &["--wait", "1s", "--quiet"],
    ] {
        let mut command = redquorum(&nodes.urls());
        run_args(&mut command, &unique("cli-down"), flags, &["true"]);
        let (code, _, err) = output(command);
        assert_eq!(code, Some(EX_UNAVAILABLE), "{flags:?}: {err}");
        assert!(err.contains("nodes unavailable"), "{flags:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{flags:?}: {err}");
    }
}

#[test]
fn status_shows_the_holder_and_ttl_on_every_node_while_a_command_runs() {
    let nodes = cluster(5);
    let resource = unique("cli-status-cmd");
    let mut command = redquorum(&nodes.urls());
    run_args(
        &mut command,
        &resource,
        &["--ttl", "30s"],
        &["sh", "-c", "echo \"$REDQUORUM_LOCK_VALUE\"; read x; exit 0"],
    );
    let mut child = spawn(command);
    let value = first_line(&mut child);
    // The holder is shown by its label (host:pid of `run`) and a short id,
    // never by the value, which would let anyone release the lock.
    let pid = child.id();
    let id: String = value.chars().take(8).collect();
    let mut status = redquorum(&nodes.urls());
    status.args(["status", "--resource", &resource]);
    let (code, out, err) = output(status);
    assert_eq!(code, Some(0), "{err}");
    assert!(!out.contains(&value), "the lock value is shown: {out}");
    assert!(out.contains(&format!(":{pid} sh (id {id}) on")), "{out}");
    let rows = out
        .lines()
        .filter(|l| l.contains(&id) && l.contains(" yes "))
        .count();
    assert!(rows >= 3, "{out}");
    assert!(out.contains("quorum 3"), "{out}");
    finish(&mut child);
    assert_eq!(wait(&mut child, HANG).code(), Some(0));

    let mut after = redquorum(&nodes.urls());
    after.args(["status", "--resource", &resource]);
    let (code, out, _) = output(after);
    assert_eq!(code, Some(0));
    assert!(out.contains("free on all 5 nodes"), "{out}");
}

#[test]
fn check_flags_a_replica_and_a_wrong_password_and_exits_78() {
    let nodes = cluster(3);
    let master_port = nodes
        .direct_url(0)
        .trim_start_matches("redis://127.0.0.1:")
        .trim_end_matches('/')
        .to_owned();
    let replicate = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(&master_port)
        .query::<()>(&mut nodes.connection(1).unwrap());
    assert!(replicate.is_ok(), "{replicate:?}");
    let password = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("s3cret")
        .query::<()>(&mut nodes.connection(2).unwrap());
    assert!(password.is_ok(), "{password:?}");
    let urls = vec![
        nodes.url(0),
        nodes.url(1),
        nodes.url(2).replace("redis://", "redis://:wrong@"),
    ];
    let mut check = redquorum(&urls);
    check.arg("check");
    let (code, out, err) = output(check);
    assert_eq!(code, Some(EX_CONFIG), "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("NODE"), "{out}");
    assert!(lines[1].ends_with("  ok"), "{out}");
    assert!(lines[2].contains("replica of 127.0.0.1:"), "{out}");
    assert!(lines[3].contains("authentication failed"), "{out}");
    assert!(
        !out.contains("wrong"),
        "the password must not be shown: {out}"
    );
    assert!(out.contains("2 misconfigured"), "{out}");
}

#[test]
fn check_exits_0_when_healthy_80_with_a_minority_down_and_69_without_a_quorum() {
    let nodes = cluster(3);
    let mut check = redquorum(&nodes.urls());
    check.arg("check");
    let (code, out, err) = output(check);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("3 ok"), "{out}");
    assert_eq!(out.matches(" master ").count(), 3, "{out}");

    kill(&nodes, 2);
    let mut check = redquorum(&nodes.urls());
    check.arg("check");
    let (code, out, err) = output(check);
    assert_eq!(code, Some(DEGRADED), "{out}{err}");
    let dead = out.lines().nth(3).unwrap_or_default();
    assert!(
        dead.contains(" no ") && dead.contains("unreachable"),
        "{out}"
    );
    assert!(out.contains("locks can be acquired"), "{out}");

    kill(&nodes, 1);
    let mut check = redquorum(&nodes.urls());
    check.arg("check");
    let (code, out, err) = output(check);
    assert_eq!(code, Some(EX_UNAVAILABLE), "{out}{err}");
    assert!(
        out.contains("2 unreachable; locks CANNOT be acquired"),
        "{out}"
    );
}

#[test]
fn bad_flags_and_missing_nodes_are_usage_errors_with_clear_messages() {
    let nowhere = vec!["redis://127.0.0.1:1/".to_owned()];

    let mut bad_ttl = redquorum(&nowhere);
    run_args(&mut bad_ttl, "r", &["--ttl", "30"], &["true"]);
    let (code, _, err) = output(bad_ttl);
    assert_eq!(code, Some(EX_USAGE), "{err}");
    assert!(
        err.contains("--ttl") && err.contains("500ms, 30s, 2m"),
        "{err}"
    );

    let mut no_nodes = bare();
    no_nodes.arg("check");
    let (code, _, err) = output(no_nodes);
    assert_eq!(code, Some(EX_USAGE), "{err}");
    assert!(err.contains("REDQUORUM_NODES"), "{err}");

    let mut bad_url = redquorum(&["http://example".to_owned()]);
    bad_url.arg("check");
    let (code, _, err) = output(bad_url);
    assert_eq!(code, Some(EX_CONFIG), "{err}");
    assert!(err.contains("node 0"), "{err}");

    let mut help = Command::new(env!("CARGO_BIN_EXE_redquorum"));
    help.arg("--help");
    let (code, out, _) = output(help);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("Examples:") && out.contains("redquorum run --resource"),
        "{out}"
    );
}

#[test]
fn messages_name_command_line_flags_not_library_calls() {
    let nodes = cluster(3);
    // The test nodes run without AOF: the persistence advice names the
    // restart guard.
    let mut check = redquorum(&nodes.urls());
    check.arg("check");
    let (code, out, err) = output(check);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("--restart-guard"), "{out}");
    assert!(
        !out.contains("Config::") && !out.contains("Redlock::"),
        "{out}"
    );
    let mut json = redquorum(&nodes.urls());
    json.args(["check", "--json"]);
    let (_, out, _) = output(json);
    assert!(
        out.contains("--restart-guard") && !out.contains("Config::"),
        "{out}"
    );

    let mut run = redquorum(&nodes.urls());
    run.args([
        "--restart-guard",
        "1s",
        "run",
        "--resource",
        "flags",
        "--ttl",
        "5s",
        "--",
        "true",
    ]);
    let (code, _, err) = output(run);
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("--restart-guard") && !err.contains("Config::"),
        "{err}"
    );
}

#[test]
fn nodes_come_from_redquorum_nodes_when_no_flag_is_given() {
    let nodes = cluster(3);
    let mut check = bare();
    check
        .env("REDQUORUM_NODES", nodes.urls().join(","))
        .args(["--node-timeout", "1s", "check"]);
    let (code, out, err) = output(check);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("3 nodes, quorum 2"), "{out}");
    assert!(!err.contains("deprecated"), "{err}");
}

#[test]
fn the_old_redlock_nodes_still_works_with_a_deprecation_warning_and_the_new_name_wins() {
    let nodes = cluster(3);
    let mut old = bare();
    old.env("REDLOCK_NODES", nodes.urls().join(","))
        .args(["--node-timeout", "1s", "check"]);
    let (code, out, err) = output(old);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        err.contains("REDLOCK_NODES is deprecated") && err.contains("REDQUORUM_NODES"),
        "{err}"
    );
    // Both set: the new name is used (the old one names no usable node).
    let mut both = bare();
    both.env("REDQUORUM_NODES", nodes.urls().join(","))
        .env("REDLOCK_NODES", "redis://127.0.0.1:1/")
        .args(["--node-timeout", "1s", "check"]);
    let (code, out, err) = output(both);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(!err.contains("deprecated"), "{err}");
}

#[test]
fn a_command_that_outlives_the_ttl_keeps_the_lock() {
    let nodes = cluster(5);
    let resource = unique("cli-keepalive");
    let mut command = redquorum(&nodes.urls());
    run_args(
        &mut command,
        &resource,
        &["--ttl", "1s"],
        &["sh", "-c", "echo up; read x; exit 0"],
    );
    let mut child = spawn(command);
    assert_eq!(first_line(&mut child), "up");
    // Well past the TTL: only extensions can still hold the lock.
    std::thread::sleep(Duration::from_millis(2_500));
    let mut contender = redquorum(&nodes.urls());
    run_args(&mut contender, &resource, &["--no-wait"], &["true"]);
    let (code, _, err) = output(contender);
    assert_eq!(code, Some(EX_TEMPFAIL), "{err}");
    assert!(err.contains("held by another owner"), "{err}");
    finish(&mut child);
    let status = wait(&mut child, HANG);
    assert_eq!(status.code(), Some(0), "{}", stderr(&mut child));
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let nodes = cluster(3);
    let mut command = redquorum_with_timeout(&nodes.urls(), "300ms");
    run_args(
        &mut command,
        &unique("cli-grace"),
        &["--ttl", "1s", "--grace", "500ms"],
        &[
            "sh",
            "-c",
            "trap '' TERM; echo up; while :; do sleep 0.1; done",
        ],
    );
    let mut child = spawn(command);
    assert_eq!(first_line(&mut child), "up");
    for i in 0..2 {
        kill(&nodes, i);
    }
    let status = wait(&mut child, HANG);
    let err = stderr(&mut child);
    assert_eq!(status.code(), Some(LOCK_LOST), "{err}");
    assert!(err.contains("SIGKILL"), "{err}");
}

#[test]
fn sigint_while_waiting_for_the_lock_gives_up_with_130_and_leaves_the_holder_alone() {
    let nodes = cluster(3);
    let resource = unique("cli-int-wait");
    let mut holder = redquorum(&nodes.urls());
    run_args(
        &mut holder,
        &resource,
        &[],
        &["sh", "-c", "echo \"$REDQUORUM_LOCK_VALUE\"; read x; exit 0"],
    );
    let mut holder = spawn(holder);
    let value = first_line(&mut holder);

    let mut waiter = redquorum(&nodes.urls());
    run_args(&mut waiter, &resource, &["--wait", "60s"], &["true"]);
    let mut waiter = spawn(waiter);
    std::thread::sleep(Duration::from_millis(500));
    let sent = Command::new("kill")
        .args(["-INT", &waiter.id().to_string()])
        .status();
    assert!(sent.is_ok_and(|s| s.success()), "kill -INT failed");
    let status = wait(&mut waiter, HANG);
    let err = stderr(&mut waiter);
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("while waiting for the lock"), "{err}");
    assert!(holders(&nodes.direct_urls(), &key(&resource), &value) >= 2);
    finish(&mut holder);
    assert_eq!(wait(&mut holder, HANG).code(), Some(0));
}

#[test]
fn status_names_the_owner_and_the_number_of_holds_of_a_reentrant_lock() {
    let nodes = cluster(5);
    let resource = unique("cli-status-reentrant");
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => panic!("runtime: {e}"),
    };
    let redlock = common::redlock(&nodes.urls(), common::fast_config());
    let ttl = Duration::from_secs(30);
    let holds = runtime.block_on(async {
        let mut holds = Vec::new();
        for _ in 0..2 {
            match redlock
                .lock_with(
                    &resource,
                    ttl,
                    &redquorum::LockOptions::new().owner("job-17"),
                )
                .await
            {
                Ok(guard) => holds.push(guard),
                Err(e) => panic!("reentrant hold: {e}"),
            }
        }
        holds
    });
    // A lock is granted at quorum; wait for the slower nodes to have both holds.
    let lock_key = redlock.lock_key(&resource);
    let both_everywhere = || {
        nodes.direct_urls().iter().all(|url| {
            common::query::<Option<String>>(url, redis::cmd("HGET").arg(&lock_key).arg("count"))
                .ok()
                .flatten()
                .as_deref()
                == Some("2")
        })
    };
    let give_up = Instant::now() + Duration::from_secs(5);
    while !both_everywhere() && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(10));
    }

    let mut status = redquorum(&nodes.urls());
    status.args(["status", "--resource", &resource]);
    let (code, out, err) = output(status);
    assert_eq!(code, Some(0), "{out}{err}");
    let rows = out
        .lines()
        .filter(|l| l.contains(" yes ") && l.contains("job-17") && l.contains("2 holds"))
        .count();
    assert_eq!(rows, 5, "{out}");
    assert!(out.contains("held by owner job-17"), "{out}");
    assert!(!out.contains("unreachable"), "{out}");

    let mut status = redquorum(&nodes.urls());
    status.args(["status", "--resource", &resource, "--json"]);
    let (code, out, err) = output(status);
    assert_eq!(code, Some(0), "{out}{err}");
    let v = json(&out);
    assert_eq!(v["status"], "held", "{v}");
    let holder = &v["holder"];
    assert_eq!(
        (
            &holder["kind"],
            &holder["owner"],
            &holder["holds"],
            &holder["nodes"]
        ),
        (
            &Value::from("reentrant"),
            &Value::from("job-17"),
            &Value::from(2),
            &Value::from(5)
        ),
        "{v}"
    );
    assert!(holder["label"].is_null() && holder["id"].is_null(), "{v}");
    for node in v["nodes"].as_array().cloned().unwrap_or_default() {
        assert_eq!(
            (&node["state"], &node["holds"]),
            (&Value::from("reentrant"), &Value::from(2)),
            "{node}"
        );
        assert!(node["ttl_ms"].as_u64().is_some_and(|t| t > 0), "{node}");
    }

    runtime.block_on(async {
        for hold in holds {
            if let Err(e) = hold.release().await {
                panic!("release: {e}");
            }
        }
    });
}

#[test]
fn a_grandchild_that_ignores_sigterm_is_killed_when_the_lock_is_lost() {
    let nodes = cluster(3);
    let mut command = redquorum_with_timeout(&nodes.urls(), "300ms");
    // The command's shell dies of SIGTERM at once; the process it started
    // ignores SIGTERM and would go on working without the lock.
    let script = r#"sh -c 'trap "" TERM; echo $$; exec sleep 30 >/dev/null 2>&1' & wait"#;
    run_args(
        &mut command,
        &unique("cli-grandchild"),
        &["--ttl", "1s", "--grace", "500ms"],
        &["sh", "-c", script],
    );
    let mut child = spawn(command);
    let line = first_line(&mut child);
    let grandchild: u32 = line
        .parse()
        .unwrap_or_else(|_| panic!("grandchild pid {line:?}: {}", stderr(&mut child)));
    for i in 0..2 {
        kill(&nodes, i);
    }
    let status = wait(&mut child, HANG);
    let survived = running(grandchild);
    end_leftover(grandchild);
    let err = stderr(&mut child);
    assert_eq!(status.code(), Some(LOCK_LOST), "{err}");
    assert!(
        !survived,
        "the grandchild {grandchild} still ran after redquorum exited: {err}"
    );
    assert!(err.contains("SIGKILL"), "{err}");
}

/// Spawns `redquorum run` whose command prints its pid first, sends it
/// SIGTSTP and checks that both it and the command are stopped. Returns
/// the child, its pid and the command's pid.
fn spawn_and_stop(command: Command) -> (std::process::Child, u32, u32) {
    let mut child = spawn(command);
    let line = first_line(&mut child);
    let command_pid: u32 = line
        .parse()
        .unwrap_or_else(|_| panic!("command pid {line:?}: {}", stderr(&mut child)));
    let run_pid = child.id();

    send(run_pid, "TSTP");
    if !within(HANG, || stopped(run_pid) && stopped(command_pid)) {
        let why = format!(
            "after SIGTSTP redquorum is {:?} and the command {:?}; both must be stopped (T)",
            proc_state(run_pid),
            proc_state(command_pid)
        );
        fail_after_cleanup(&mut child, command_pid, &why);
    }
    (child, run_pid, command_pid)
}

#[test]
fn sigtstp_stops_the_command_with_redquorum_and_sigcont_resumes_both() {
    let nodes = cluster(3);
    let mut command = redquorum(&nodes.urls());
    run_args(
        &mut command,
        &unique("cli-tstp"),
        &["--ttl", "30s"],
        &["sh", "-c", "echo $$; read x; exit 3"],
    );
    let (mut child, run_pid, command_pid) = spawn_and_stop(command);

    send(run_pid, "CONT");
    if !within(HANG, || !stopped(run_pid) && !stopped(command_pid)) {
        let why = format!(
            "after SIGCONT redquorum is {:?} and the command {:?}; both must run again",
            proc_state(run_pid),
            proc_state(command_pid)
        );
        fail_after_cleanup(&mut child, command_pid, &why);
    }
    finish(&mut child);
    let status = wait(&mut child, HANG);
    assert_eq!(status.code(), Some(3), "{}", stderr(&mut child));
}

#[test]
fn a_lock_that_lapses_while_redquorum_is_stopped_gets_the_command_killed_not_resumed() {
    let nodes = cluster(3);
    let resource = unique("cli-tstp-lapse");
    let ticks = Marker::new("tstp-ticks");
    let script = format!(
        "echo $$; while :; do echo tick >> {}; sleep 0.05; done",
        ticks.path()
    );
    let mut command = redquorum(&nodes.urls());
    run_args(
        &mut command,
        &resource,
        &["--ttl", "1s"],
        &["sh", "-c", &script],
    );
    let (mut child, run_pid, command_pid) = spawn_and_stop(command);

    // Nothing extends the lock now: another run gets it once the TTL is over.
    let mut contender = redquorum(&nodes.urls());
    run_args(&mut contender, &resource, &["--wait", "15s"], &["true"]);
    let (code, _, err) = output(contender);
    if code != Some(0) {
        fail_after_cleanup(
            &mut child,
            command_pid,
            &format!("the contender did not get the lapsed lock: {code:?} {err}"),
        );
    }
    let ticks_while_stopped = ticks.read().lines().count();

    send(run_pid, "CONT");
    let status = wait(&mut child, HANG);
    let survived = running(command_pid);
    end_leftover(command_pid);
    let err = stderr(&mut child);
    assert_eq!(status.code(), Some(LOCK_LOST), "{err}");
    assert!(
        !survived,
        "the command still ran after redquorum exited: {err}"
    );
    assert_eq!(
        ticks.read().lines().count(),
        ticks_while_stopped,
        "the command ran again after the lock had lapsed: {err}"
    );
    assert!(err.contains("SIGKILL"), "{err}");
}

#[test]
fn sigtstp_while_waiting_for_the_lock_stops_redquorum_until_sigcont() {
    let nodes = cluster(3);
    let resource = unique("cli-tstp-wait");
    let mut holder = redquorum(&nodes.urls());
    run_args(
        &mut holder,
        &resource,
        &[],
        &["sh", "-c", "echo up; read x; exit 0"],
    );
    let mut holder = spawn(holder);
    assert_eq!(first_line(&mut holder), "up");

    let mut waiter = redquorum(&nodes.urls());
    run_args(
        &mut waiter,
        &resource,
        &["--wait", "60s"],
        &["sh", "-c", "echo ran"],
    );
    let mut waiter = spawn(waiter);
    let waiter_pid = waiter.id();
    // Let it get past start-up and into its wait.
    std::thread::sleep(Duration::from_millis(500));
    send(waiter_pid, "TSTP");
    assert!(
        within(HANG, || stopped(waiter_pid)),
        "the waiting redquorum is {:?} after SIGTSTP",
        proc_state(waiter_pid)
    );
    finish(&mut holder);
    assert_eq!(wait(&mut holder, HANG).code(), Some(0));
    assert!(
        matches!(waiter.try_wait(), Ok(None)) && stopped(waiter_pid),
        "a stopped redquorum must not go on"
    );
    send(waiter_pid, "CONT");
    let status = wait(&mut waiter, HANG);
    assert_eq!(status.code(), Some(0), "{}", stderr(&mut waiter));
    assert_eq!(first_line(&mut waiter), "ran");
}

/// Parses one JSON document printed on stdout.
fn json(out: &str) -> Value {
    match serde_json::from_str(out.trim()) {
        Ok(v) => v,
        Err(e) => panic!("not JSON ({e}): {out}"),
    }
}

/// Node `i` then requires `password` of every client.
fn require_password(nodes: &LocalCluster, i: usize, password: &str) {
    let set = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg(password)
        .query::<()>(&mut nodes.connection(i).unwrap());
    assert!(set.is_ok(), "{set:?}");
}

/// Runs `redquorum run` on `urls` to completion.
fn run_to_end(
    urls: &[String],
    resource: &str,
    flags: &[&str],
    cmd: &[&str],
) -> (Option<i32>, String, String) {
    let mut command = redquorum(urls);
    run_args(&mut command, resource, flags, cmd);
    output(command)
}

#[test]
fn a_lost_race_exits_75_naming_the_holder_or_quietly_with_the_conflict_exit_code() {
    let nodes = cluster(3);
    let resource = unique("cli-conflict");
    let mut holder = redquorum(&nodes.urls());
    run_args(
        &mut holder,
        &resource,
        &["--label", "nightly on web-3"],
        &["sh", "-c", "echo up; read x; exit 0"],
    );
    let mut holder = spawn(holder);
    assert_eq!(first_line(&mut holder), "up", "{}", stderr(&mut holder));
    let ran = Marker::new("conflict-ran");
    let job = format!("touch {}", ran.path());
    let attempt = |flags: &[&str]| run_to_end(&nodes.urls(), &resource, flags, &["sh", "-c", &job]);

    let (code, out, err) = attempt(&["--no-wait"]);
    assert_eq!(code, Some(EX_TEMPFAIL), "{err}");
    assert!(
        err.contains("held by another owner (nightly on web-3 (id "),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(out, "");

    let (code, out, err) = attempt(&["--no-wait", "--quiet"]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (Some(EX_TEMPFAIL), "", "")
    );

    // flock's habits: -n, -E; a lost race can be a silent success.
    let (code, out, err) = attempt(&["-n", "-q", "-E", "0"]);
    assert_eq!((code, out.as_str(), err.as_str()), (Some(0), "", ""));

    // A wait that runs out while the lock is still taken is a conflict too.
    let (code, _, err) = attempt(&["--wait", "300ms", "--conflict-exit-code", "3"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("held by another owner"), "{err}");

    assert!(!ran.exists(), "a run that lost the race ran the command");
    finish(&mut holder);
    assert_eq!(wait(&mut holder, HANG).code(), Some(0));
}

#[test]
fn wait_forever_takes_the_lock_once_the_holder_releases_it() {
    let nodes = cluster(3);
    let resource = unique("cli-forever");
    let done = Marker::new("forever-first-done");
    let first_script = format!("echo started; read x; touch {}", done.path());
    let mut first = redquorum(&nodes.urls());
    run_args(&mut first, &resource, &[], &["sh", "-c", &first_script]);
    let mut first = spawn(first);
    assert_eq!(first_line(&mut first), "started");

    let second_script = format!("test -e {}", done.path());
    let mut second = redquorum(&nodes.urls());
    run_args(
        &mut second,
        &resource,
        &["--wait", "forever"],
        &["sh", "-c", &second_script],
    );
    let mut second = spawn(second);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        matches!(second.try_wait(), Ok(None)),
        "the waiter gave up: {}",
        stderr(&mut second)
    );
    finish(&mut first);
    assert_eq!(wait(&mut first, HANG).code(), Some(0));
    let status = wait(&mut second, HANG);
    assert_eq!(status.code(), Some(0), "{}", stderr(&mut second));
}

#[test]
fn misconfigured_nodes_exit_78_at_once_even_with_wait_forever() {
    let nodes = cluster(3);
    for i in 1..3 {
        require_password(&nodes, i, "s3cret");
    }
    let (code, _, err) = run_to_end(
        &nodes.urls(),
        &unique("cli-misconfigured"),
        &["--wait", "forever"],
        &["true"],
    );
    assert_eq!(code, Some(EX_CONFIG), "{err}");
    assert!(err.contains("misconfigured nodes"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");

    let mut status = redquorum(&nodes.urls());
    status.args(["status", "--resource", "r", "--json"]);
    let (code, out, err) = output(status);
    assert_eq!(code, Some(EX_CONFIG), "{out}{err}");
    assert!(
        err.contains("misconfigured nodes among the others"),
        "{err}"
    );
    let v = json(&out);
    assert_eq!(v["status"], "unknown");
    assert_eq!(v["exit_code"], EX_CONFIG);
    assert_eq!(v["nodes"][0]["state"], "free");
    assert_eq!(v["nodes"][1]["state"], "misconfigured");
    assert!(v["nodes"][2]["error"].is_string(), "{v}");
}

#[test]
fn a_missing_command_exits_127_and_a_non_executable_one_126() {
    let nodes = cluster(3);
    let (code, _, err) = run_to_end(
        &nodes.urls(),
        &unique("cli-127"),
        &[],
        &["/nonexistent/redquorum-test-command"],
    );
    assert_eq!(code, Some(127), "{err}");
    assert!(err.contains("command not found"), "{err}");

    let script = Marker::new("not-executable");
    script.write("#!/bin/sh\necho hi\n", 0o644);
    let (code, out, err) = run_to_end(&nodes.urls(), &unique("cli-126"), &[], &[script.path()]);
    assert_eq!(code, Some(126), "{err}");
    assert!(err.contains("permission denied"), "{err}");
    assert_eq!(out, "");
}

#[test]
fn bad_wait_and_conflict_codes_are_usage_errors() {
    let nowhere = vec!["redis://127.0.0.1:1/".to_owned()];
    for (flags, hint) in [
        (&["--wait", "never"][..], "forever"),
        (&["--wait", "30"], "has no unit"),
        (&["--conflict-exit-code", "256"], "256"),
        (&["--nodes-file", "/x", "--no-wait"], "--nodes-file"),
    ] {
        let (code, _, err) = run_to_end(&nowhere, "r", flags, &["true"]);
        assert_eq!(code, Some(EX_USAGE), "{flags:?}: {err}");
        assert!(err.contains(hint), "{flags:?}: {err}");
    }
}

#[test]
fn check_json_gives_each_node_and_the_verdict_with_its_exit_code() {
    let nodes = cluster(3);
    let check = || {
        let mut command = redquorum(&nodes.urls());
        command.args(["check", "--json"]);
        output(command)
    };
    let (code, out, err) = check();
    assert_eq!(code, Some(0), "{out}{err}");
    let v = json(&out);
    assert_eq!(v["schema"], 1);
    assert_eq!(v["status"], "healthy");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["usable"], true);
    assert_eq!(
        (
            &v["nodes_total"],
            &v["quorum"],
            &v["ok"],
            &v["misconfigured"],
            &v["unreachable"]
        ),
        (
            &Value::from(3),
            &Value::from(2),
            &Value::from(3),
            &Value::from(0),
            &Value::from(0)
        )
    );
    let listed = v["nodes"].as_array().cloned().unwrap_or_default();
    assert_eq!(listed.len(), 3, "{v}");
    for (i, node) in listed.iter().enumerate() {
        assert_eq!(node["index"], i, "{node}");
        assert!(
            nodes.url(i).contains(node["node"].as_str().unwrap_or("?")),
            "{node}"
        );
        assert_eq!(node["state"], "ok", "{node}");
        assert_eq!(node["reachable"], true, "{node}");
        assert_eq!(node["role"], "master", "{node}");
        assert_eq!(node["eviction_policy"], "noeviction", "{node}");
        assert!(node["latency_us"].is_u64(), "{node}");
        assert_eq!(node["replicas"], 0, "{node}");
        // The test nodes run without an append-only file: a warning,
        // which leaves the verdict healthy.
        assert_eq!(node["appendonly"], "no", "{node}");
        assert!(node["appendfsync"].is_string(), "{node}");
        let problems = node["problems"].as_array().cloned().unwrap_or_default();
        assert!(
            problems
                .iter()
                .any(|p| p["kind"] == "persistence" && p["warning"] == true),
            "{node}"
        );
        assert!(problems.iter().all(|p| p["message"].is_string()), "{node}");
    }

    kill(&nodes, 2);
    let (code, out, err) = check();
    assert_eq!(code, Some(DEGRADED), "{out}{err}");
    let v = json(&out);
    assert_eq!(
        (&v["status"], &v["exit_code"], &v["usable"]),
        (
            &Value::from("degraded"),
            &Value::from(DEGRADED),
            &Value::from(true)
        )
    );
    let dead = &v["nodes"][2];
    assert_eq!(dead["state"], "unreachable", "{dead}");
    assert_eq!(dead["reachable"], false, "{dead}");
    assert!(
        dead["role"].is_null() && dead["latency_us"].is_null(),
        "{dead}"
    );
    assert_eq!(dead["problems"][0]["kind"], "unreachable", "{dead}");
    assert_eq!(dead["problems"][0]["warning"], false, "{dead}");

    kill(&nodes, 1);
    let (code, out, err) = check();
    assert_eq!(code, Some(EX_UNAVAILABLE), "{out}{err}");
    let v = json(&out);
    assert_eq!(
        (&v["status"], &v["usable"], &v["unreachable"]),
        (
            &Value::from("unavailable"),
            &Value::from(false),
            &Value::from(2)
        )
    );
}

#[test]
fn check_json_names_misconfigured_nodes_and_exits_78_without_the_password() {
    let nodes = cluster(3);
    let evict = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("allkeys-lru")
        .query::<()>(&mut nodes.connection(1).unwrap());
    assert!(evict.is_ok(), "{evict:?}");
    require_password(&nodes, 2, "s3cret");
    let urls = vec![
        nodes.url(0),
        nodes.url(1),
        nodes.url(2).replace("redis://", "redis://:wrong%22pass@"),
    ];
    let mut check = redquorum(&urls);
    check.args(["check", "--json"]);
    let (code, out, err) = output(check);
    assert_eq!(code, Some(EX_CONFIG), "{out}{err}");
    assert!(!out.contains("wrong"), "the password is shown: {out}");
    let v = json(&out);
    assert_eq!(
        (&v["status"], &v["exit_code"]),
        (&Value::from("misconfigured"), &Value::from(EX_CONFIG))
    );
    assert_eq!(v["misconfigured"], 2);
    assert_eq!(v["nodes"][0]["state"], "ok");
    assert_eq!(v["nodes"][1]["state"], "misconfigured");
    assert_eq!(v["nodes"][1]["eviction_policy"], "allkeys-lru");
    assert!(
        v["nodes"][1]["problems"].as_array().is_some_and(|p| p
            .iter()
            .any(|p| p["kind"] == "eviction" && p["warning"] == false)),
        "{v}"
    );
    assert_eq!(v["nodes"][2]["problems"][0]["kind"], "auth_failed", "{v}");
}

#[test]
fn status_json_gives_the_holder_ttl_and_counter_and_69_when_too_few_answer() {
    let nodes = cluster(5);
    let resource = unique("cli-status-json");
    // Quotes, a backslash and a tab in the label: the JSON must escape them.
    let label = "nightly \"export\" \\ web-3";
    let mut command = redquorum(&nodes.urls());
    run_args(
        &mut command,
        &resource,
        &["--fencing", "--label", label],
        &["sh", "-c", "echo \"$REDQUORUM_LOCK_VALUE\"; read x; exit 0"],
    );
    let mut child = spawn(command);
    let value = first_line(&mut child);
    let status_json = || {
        let mut status = redquorum(&nodes.urls());
        status.args(["status", "--resource", &resource, "--json"]);
        output(status)
    };
    let (code, out, err) = status_json();
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(!out.contains(&value), "the lock value is shown: {out}");
    let v = json(&out);
    assert_eq!(v["schema"], 1);
    assert_eq!(v["resource"], resource.as_str());
    assert_eq!(v["key"], key(&resource));
    assert_eq!(
        (&v["status"], &v["exit_code"]),
        (&Value::from("held"), &Value::from(0))
    );
    assert_eq!(
        (&v["nodes_total"], &v["quorum"], &v["answered"]),
        (&Value::from(5), &Value::from(3), &Value::from(5))
    );
    let holder = &v["holder"];
    assert_eq!(holder["kind"], "plain", "{v}");
    assert_eq!(holder["label"], label, "{v}");
    assert_eq!(
        holder["id"],
        value.chars().take(8).collect::<String>(),
        "{v}"
    );
    assert!(
        holder["owner"].is_null() && holder["holds"].is_null(),
        "{v}"
    );
    assert!(holder["nodes"].as_u64().is_some_and(|n| n >= 3), "{v}");
    assert!(v["fence_counter"].as_u64().is_some_and(|c| c >= 1), "{v}");
    let held: Vec<&Value> = v["nodes"]
        .as_array()
        .map(|a| a.iter().filter(|n| n["state"] == "held").collect())
        .unwrap_or_default();
    assert!(held.len() >= 3, "{v}");
    for node in held {
        assert!(
            node["ttl_ms"]
                .as_u64()
                .is_some_and(|t| t > 0 && t <= 30_000),
            "{node}"
        );
        assert_eq!(node["label"], label, "{node}");
        assert!(
            node["error"].is_null() && node["key_type"].is_null(),
            "{node}"
        );
    }
    finish(&mut child);
    assert_eq!(wait(&mut child, HANG).code(), Some(0));

    let (code, out, err) = status_json();
    assert_eq!(code, Some(0), "{out}{err}");
    let v = json(&out);
    assert_eq!(v["status"], "free");
    assert!(v["holder"].is_null(), "{v}");
    for node in v["nodes"].as_array().cloned().unwrap_or_default() {
        assert_eq!(node["state"], "free", "{node}");
        assert!(
            node["ttl_ms"].is_null() && node["label"].is_null(),
            "{node}"
        );
    }

    for i in 0..3 {
        kill(&nodes, i);
    }
    let (code, out, err) = status_json();
    assert_eq!(code, Some(EX_UNAVAILABLE), "{out}{err}");
    assert!(err.contains("only 2 of 5 nodes answered"), "{err}");
    let v = json(&out);
    assert_eq!(
        (&v["status"], &v["exit_code"], &v["answered"]),
        (
            &Value::from("unknown"),
            &Value::from(EX_UNAVAILABLE),
            &Value::from(2)
        )
    );
    for i in 0..3 {
        assert_eq!(v["nodes"][i]["state"], "unavailable", "{v}");
        assert!(v["nodes"][i]["error"].is_string(), "{v}");
    }
}

#[test]
fn a_nodes_file_skips_comments_and_blank_lines_and_takes_the_place_of_the_list() {
    let nodes = cluster(3);
    let urls = nodes.urls();
    let file = Marker::new("nodes");
    file.write(
        &format!(
            "# lock nodes\n\n{}\n   {}   # rack 2\n\t\n# redis://127.0.0.1:1/ is retired\n{}\n",
            urls[0], urls[1], urls[2]
        ),
        0o600,
    );
    let check = |setup: &dyn Fn(&mut Command)| {
        let mut command = bare();
        command.args(["--node-timeout", "1s"]);
        setup(&mut command);
        command.arg("check");
        output(command)
    };
    let (code, out, err) = check(&|c| {
        c.args(["--nodes-file", file.path()]);
    });
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("3 nodes, quorum 2: 3 ok"), "{out}");
    // From the environment, and the flag over REDQUORUM_NODES.
    let (code, out, err) = check(&|c| {
        c.env("REDQUORUM_NODES_FILE", file.path());
    });
    assert_eq!(code, Some(0), "{out}{err}");
    let (code, out, err) = check(&|c| {
        c.env("REDQUORUM_NODES", "redis://127.0.0.1:1/")
            .args(["--nodes-file", file.path()]);
    });
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("3 nodes, quorum 2"), "{out}");
    // Both variables: which one was meant?
    let (code, _, err) = check(&|c| {
        c.env("REDQUORUM_NODES_FILE", file.path())
            .env("REDQUORUM_NODES", urls.join(","));
    });
    assert_eq!(code, Some(EX_USAGE), "{err}");
    assert!(err.contains("unset one"), "{err}");

    let (code, _, err) = check(&|c| {
        c.args(["--nodes-file", "/nonexistent/redquorum-nodes"]);
    });
    assert_eq!(code, Some(EX_CONFIG), "{err}");
    assert!(
        err.contains("cannot read the nodes file /nonexistent/redquorum-nodes"),
        "{err}"
    );

    let bad = Marker::new("bad-nodes");
    bad.write(
        &format!("{}\nredis://:s3cret@a:6379 redis://b:6379\n", urls[0]),
        0o600,
    );
    let (code, _, err) = check(&|c| {
        c.args(["--nodes-file", bad.path()]);
    });
    assert_eq!(code, Some(EX_CONFIG), "{err}");
    assert!(err.contains("line 2 has more than one word"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");

    bad.write("# nothing yet\n\n", 0o600);
    let (code, _, err) = check(&|c| {
        c.args(["--nodes-file", bad.path()]);
    });
    assert_eq!(code, Some(EX_CONFIG), "{err}");
    assert!(err.contains("lists no node URL"), "{err}");
}

/// The command line of process `pid`, its arguments joined by spaces.
fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .unwrap_or_default()
}

#[test]
fn passwords_come_from_redquorum_password_or_a_private_file_never_the_command_line() {
    let password = "p@ss:w/rd #%\"";
    let encoded = "p%40ss%3Aw%2Frd%20%23%25%22";
    let nodes = cluster(3);
    for i in 0..3 {
        require_password(&nodes, i, password);
    }
    let resource = unique("cli-password");
    let with_password = |secret: &str| {
        let mut command = redquorum(&nodes.urls());
        command.env("REDQUORUM_PASSWORD", secret);
        command
    };

    let mut check = redquorum(&nodes.urls());
    check.arg("check");
    let (code, out, err) = output(check);
    assert_eq!(code, Some(EX_CONFIG), "without the password: {out}{err}");

    let mut check = with_password(password);
    check.arg("check");
    let (code, out, err) = output(check);
    assert_eq!(code, Some(0), "{out}{err}");

    let mut wrong = with_password("not-it");
    wrong.arg("check");
    let (code, out, err) = output(wrong);
    assert_eq!(code, Some(EX_CONFIG), "{out}{err}");
    assert!(out.contains("authentication failed"), "{out}");
    assert!(
        !out.contains("not-it") && !err.contains("not-it"),
        "{out}{err}"
    );

    // The command does not get the password; ps does not show it.
    let mut run = with_password(password);
    run_args(
        &mut run,
        &resource,
        &[],
        &[
            "sh",
            "-c",
            "echo \"${REDQUORUM_PASSWORD-unset}\"; read x; exit 0",
        ],
    );
    let mut child = spawn(run);
    assert_eq!(first_line(&mut child), "unset", "{}", stderr(&mut child));
    let shown = cmdline(child.id());
    assert!(shown.contains("run --resource"), "{shown}");
    assert!(!shown.contains("w/rd"), "{shown}");
    let mut status = with_password(password);
    status.args(["status", "--resource", &resource]);
    let (code, out, err) = output(status);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("held by"), "{out}");
    finish(&mut child);
    let ended = wait(&mut child, HANG);
    let err = stderr(&mut child);
    assert_eq!(ended.code(), Some(0), "{err}");
    assert!(!err.contains("w/rd"), "{err}");

    // In a nodes file: a warning while others may read it.
    let file = Marker::new("secret-nodes");
    let listed: Vec<String> = nodes
        .urls()
        .iter()
        .map(|u| u.replace("redis://", &format!("redis://:{encoded}@")))
        .collect();
    file.write(&(listed.join("\n") + "\n"), 0o644);
    let check_file = || {
        let mut command = bare();
        command.args(["--node-timeout", "1s", "--nodes-file", file.path(), "check"]);
        output(command)
    };
    let (code, out, err) = check_file();
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        err.contains("holds passwords and every user can read it"),
        "{err}"
    );
    assert!(
        !err.contains(encoded) && !out.contains(encoded),
        "{out}{err}"
    );
    file.write(&(listed.join("\n") + "\n"), 0o600);
    let (code, out, err) = check_file();
    assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");
}

#[test]
fn every_subcommands_help_lists_its_exit_codes() {
    for (sub, codes) in [
        (
            "run",
            &[
                "CMD's own",
                "75",
                "69",
                "78",
                "79",
                "64",
                "70",
                "126, 127",
                "128+N",
            ][..],
        ),
        ("check", &["0", "80", "69", "78", "64"]),
        ("status", &["0", "69", "78", "64"]),
    ] {
        let mut help = bare();
        help.args([sub, "--help"]);
        let (code, out, _) = output(help);
        assert_eq!(code, Some(0), "{sub}");
        let Some((_, section)) = out.split_once("Exit codes:") else {
            panic!("{sub} --help lists no exit codes: {out}");
        };
        for code in codes {
            assert!(
                section
                    .lines()
                    .any(|l| l.trim_start().starts_with(&format!("{code} "))),
                "{sub} --help does not explain exit code {code}: {section}"
            );
        }
    }
    let mut help = bare();
    help.args(["run", "--help"]);
    let (_, out, _) = output(help);
    for flag in [
        "--conflict-exit-code",
        "--quiet",
        "forever",
        "REDQUORUM_PASSWORD",
    ] {
        assert!(out.contains(flag), "{flag}: {out}");
    }
}

/// The README's cron recipe: its variables and its job's command (the
/// line without the five time fields).
fn readme_cron() -> (Vec<(String, String)>, String) {
    let readme = include_str!("../README.md");
    let Some((_, block)) = readme.split_once("```cron\n") else {
        panic!("README.md has no cron block");
    };
    let block = block.split("```").next().unwrap_or_default();
    let mut vars = Vec::new();
    let mut jobs = Vec::new();
    for line in block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        match line.split_once('=') {
            Some((name, value)) if name.chars().all(|c| c.is_ascii_uppercase() || c == '_') => {
                vars.push((name.to_owned(), value.to_owned()));
            }
            _ => {
                let mut rest = line;
                for _ in 0..5 {
                    rest = rest.trim_start();
                    rest = &rest[rest.find(char::is_whitespace).unwrap_or(rest.len())..];
                }
                jobs.push(rest.trim().to_owned());
            }
        }
    }
    assert_eq!(
        jobs.len(),
        1,
        "one job line in the README's cron block: {block}"
    );
    (vars, jobs.remove(0))
}

#[test]
fn the_readme_cron_recipe_mails_an_outage_but_not_a_lost_race() {
    let (vars, job) = readme_cron();
    let nodes = cluster(5);
    let file = Marker::new("cron-nodes");
    file.write(&(nodes.urls().join("\n") + "\n"), 0o600);
    let ran = Marker::new("cron-ran");
    let go = Marker::new("cron-go");
    // The job records that it ran, then holds the lock until the test says.
    let stand_in = format!(
        "sh -c 'echo ran >> {}; i=0; while [ ! -e {} ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done'",
        ran.path(),
        go.path()
    );
    assert!(job.starts_with("redquorum "), "{job}");
    assert!(job.contains("/usr/local/bin/export --full"), "{job}");
    // A node timeout that tolerates a loaded test machine.
    let line = job
        .replacen(
            "redquorum ",
            &format!("'{}' --node-timeout 1s ", env!("CARGO_BIN_EXE_redquorum")),
            1,
        )
        .replace("/usr/local/bin/export --full", &stand_in);
    // As cron runs it: sh -c, a bare environment plus the recipe's variables.
    let cron = || {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(&line)
            .env_clear()
            .env("PATH", "/usr/bin:/bin");
        for (name, value) in &vars {
            match name.as_str() {
                "REDQUORUM_NODES_FILE" => command.env(name, file.path()),
                "REDQUORUM_NODES" => command.env(name, nodes.urls().join(",")),
                "MAILTO" => command.env(name, value),
                other => panic!("the cron recipe sets {other}, which this test does not know"),
            };
        }
        spawn(command)
    };

    // Two hosts start the job: one runs it, the other says nothing (no mail) and exits 0.
    let mut hosts = [cron(), cron()];
    let (loser, status) = first_to_exit(&mut hosts, "neither host's job ended");
    let mut loser_out = String::new();
    if let Some(mut out) = hosts[loser].stdout.take() {
        let _ = out.read_to_string(&mut loser_out);
    }
    let loser_err = stderr(&mut hosts[loser]);
    assert_eq!(status.code(), Some(0), "{loser_err}");
    assert_eq!(
        (loser_out.as_str(), loser_err.as_str()),
        ("", ""),
        "a lost race would be mailed"
    );
    go.write("", 0o600);
    let winner = &mut hosts[1 - loser];
    let status = wait(winner, HANG);
    assert_eq!(status.code(), Some(0), "{}", stderr(winner));
    assert_eq!(ran.read(), "ran\n", "the job must run exactly once");

    // 3 of 5 nodes down: the job cannot run, and cron must mail why.
    for i in 0..3 {
        kill(&nodes, i);
    }
    let mut host = cron();
    let status = wait(&mut host, HANG);
    let err = stderr(&mut host);
    assert_eq!(status.code(), Some(EX_UNAVAILABLE), "{err}");
    assert!(err.contains("nodes unavailable"), "{err}");
    assert_eq!(ran.read(), "ran\n", "the job ran without a quorum");
}

#[test]
fn status_json_tells_a_partial_hold_and_a_foreign_key_apart() {
    let nodes = cluster(5);
    let resource = unique("cli-status-partial");
    common::set(
        &nodes.direct_url(0),
        &key(&resource),
        "0123456789abcdef0123456789abcdef01234567.stale-host:1",
        Duration::from_secs(30),
    );
    let pushed = common::query::<()>(
        &nodes.direct_url(1),
        redis::cmd("RPUSH").arg(key(&resource)).arg("x"),
    );
    assert!(pushed.is_ok(), "{pushed:?}");
    let mut status = redquorum(&nodes.urls());
    status.args(["status", "--resource", &resource, "--json"]);
    let (code, out, err) = output(status);
    assert_eq!(code, Some(0), "{out}{err}");
    let v = json(&out);
    assert_eq!(v["status"], "partial", "{v}");
    assert!(v["holder"].is_null(), "{v}");
    let first = &v["nodes"][0];
    assert_eq!(
        (&first["state"], &first["label"], &first["id"]),
        (
            &Value::from("held"),
            &Value::from("stale-host:1"),
            &Value::from("01234567")
        ),
        "{first}"
    );
    let second = &v["nodes"][1];
    assert_eq!(
        (&second["state"], &second["key_type"]),
        (&Value::from("foreign"), &Value::from("list")),
        "{second}"
    );
    assert_eq!(v["nodes"][2]["state"], "free", "{v}");
}

/// Which of `children` exits first, and how; fails with `what` after `HANG`.
fn first_to_exit(children: &mut [Child], what: &str) -> (usize, ExitStatus) {
    let give_up = Instant::now() + HANG;
    loop {
        let done = children
            .iter_mut()
            .enumerate()
            .find_map(|(i, c)| c.try_wait().ok().flatten().map(|s| (i, s)));
        if let Some(found) = done {
            return found;
        }
        assert!(Instant::now() < give_up, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn init_wants_confirmation_then_lets_guarded_nodes_vote_at_once_and_exits_80_with_a_node_down() {
    let nodes = cluster(3);
    let guarded = |args: &[&str]| {
        let mut command = redquorum(&nodes.urls());
        command.args(["--restart-guard", "600s"]).args(args);
        output(command)
    };
    let (code, out, err) = guarded(&["init"]);
    assert_eq!(code, Some(EX_USAGE), "{out}{err}");
    assert!(err.contains("--no-lock-is-live"), "{err}");

    // Never marked: every node quarantines itself at first contact.
    let resource = unique("cli-init");
    let run = [
        "run",
        "--resource",
        resource.as_str(),
        "--no-wait",
        "--",
        "true",
    ];
    let (code, out, err) = guarded(&run);
    assert_eq!(code, Some(EX_UNAVAILABLE), "{out}{err}");
    assert!(err.contains("quarantined"), "{err}");

    let (code, out, err) = guarded(&["init", "--no-lock-is-live"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out.matches("marked trusted").count(), 3, "{out}");
    let (code, out, err) = guarded(&run);
    assert_eq!(code, Some(0), "{out}{err}");

    // A restarted node shows its quarantine in status.
    if let Err(e) = nodes.restart_empty(0) {
        panic!("restart: {e}");
    }
    let (_, out, err) = guarded(&["status", "--resource", resource.as_str(), "--json"]);
    let json: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert!(json["nodes"][0]["quarantine_ms"].is_u64(), "{json}");
    assert!(json["nodes"][1]["quarantine_ms"].is_null(), "{json}");
    let (_, out, _) = guarded(&["status", "--resource", resource.as_str()]);
    assert!(out.contains("no vote for"), "{out}");

    kill(&nodes, 2);
    let (code, out, err) = guarded(&["init", "--no-lock-is-live"]);
    assert_eq!(code, Some(DEGRADED), "{out}{err}");
    assert!(out.contains("not marked"), "{out}");
}
