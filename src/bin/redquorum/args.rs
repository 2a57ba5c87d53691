//! The command line: global options, subcommands, their flags.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::{EX_TEMPFAIL, duration, help};

/// Runs commands under a Redlock lock held on a quorum of independent Redis
/// masters: flock(1) for a fleet.
#[derive(Debug, Parser)]
#[command(name = "redquorum", version, after_help = help::TOP)]
pub struct Cli {
    /// Redis masters, comma-separated URLs (redis://[user[:password]@]host:port[/db]);
    /// else from --nodes-file, REDQUORUM_NODES_FILE or REDQUORUM_NODES.
    #[arg(
        long,
        value_delimiter = ',',
        global = true,
        value_name = "URLS",
        conflicts_with = "nodes_file"
    )]
    pub nodes: Vec<String>,

    /// A file of node URLs, one a line (# comments, blank lines skipped).
    #[arg(long, global = true, value_name = "PATH")]
    pub nodes_file: Option<PathBuf>,

    /// Limit on one call to one node, connection included.
    #[arg(long, default_value = "100ms", value_parser = duration::parse, global = true, value_name = "DURATION")]
    pub node_timeout: Duration,

    /// Prefix of the keys written; the lock of resource R is at {prefix}lock:{R}.
    #[arg(long, default_value = redquorum::DEFAULT_KEY_PREFIX, global = true)]
    pub key_prefix: String,

    /// CA certificate(s) to trust for rediss:// nodes instead of the
    /// system's (a PEM file).
    #[arg(long, global = true, value_name = "PATH", env = "REDQUORUM_TLS_CA")]
    pub tls_ca: Option<PathBuf>,

    /// A client certificate (a PEM file) for rediss:// nodes that require
    /// one (tls-auth-clients yes); needs --tls-key.
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        env = "REDQUORUM_TLS_CERT",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert (a PEM file).
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        env = "REDQUORUM_TLS_KEY",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,

    /// Turn on the restart guard: a node that restarted or lost its data
    /// votes only after MAX_TTL (plus drift), and no lock may have a TTL
    /// above MAX_TTL. Use the same value in every client of the nodes: a
    /// node that keeps another refuses this client.
    #[arg(long, value_parser = duration::parse, global = true, value_name = "MAX_TTL")]
    pub restart_guard: Option<Duration>,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Acquire the lock, run CMD while keeping the lock alive, release it, exit with CMD's status.
    #[command(after_help = help::RUN)]
    Run(RunArgs),
    /// Check every node: reachable, master, authenticated, not evicting keys, latency.
    #[command(after_help = help::CHECK)]
    Check(CheckArgs),
    /// Show which nodes hold a resource's lock and the TTL left on each
    /// (for a reentrant lock: its owner and number of holds).
    #[command(after_help = help::STATUS)]
    Status(StatusArgs),
    /// Mark every node trusted at once by the restart guard, so that it votes
    /// without waiting out its quarantine: only when no lock can be live.
    #[command(after_help = help::INIT)]
    Init(InitArgs),
    /// Make every node keep this client's restart-guard quarantine (from
    /// --restart-guard), after a client with another MAX_TTL set theirs:
    /// only when no lock longer than MAX_TTL can be live.
    #[command(after_help = help::SET_QUARANTINE)]
    SetQuarantine(SetQuarantineArgs),
    /// Vouch that the nodes' fence counters of a resource survived their
    /// restarts, so that fenced locks of it issue tokens again (with
    /// --restart-guard); touches nothing else.
    #[command(after_help = help::VOUCH_COUNTERS)]
    VouchCounters(VouchCountersArgs),
}

/// How long `--wait` lets `run` wait for the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// One attempt (`--no-wait`, `--wait 0`).
    Once,
    /// Until this long has passed.
    For(Duration),
    /// Until the lock is had (`--wait forever`).
    Forever,
}

/// Reads `--wait`: a duration, or `forever`.
fn parse_wait(text: &str) -> Result<Wait, String> {
    if text.trim().eq_ignore_ascii_case("forever") {
        return Ok(Wait::Forever);
    }
    duration::parse(text)
        .map(|d| {
            if d.is_zero() {
                Wait::Once
            } else {
                Wait::For(d)
            }
        })
        .map_err(|e| format!("{e}; or \"forever\""))
}

/// Options of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The resource to lock.
    #[arg(long, value_name = "NAME")]
    pub resource: String,

    /// Lock TTL; the lock is extended when a third of it is left.
    #[arg(long, default_value = "30s", value_parser = duration::parse, value_name = "DURATION")]
    pub ttl: Duration,

    /// How long to wait for the lock when it is taken (a duration, or `forever`).
    #[arg(short, long, default_value = "10s", value_parser = parse_wait, value_name = "DURATION", conflicts_with = "no_wait")]
    pub wait: Wait,

    /// Make a single attempt: give up at once when the lock is taken.
    #[arg(short, long)]
    pub no_wait: bool,

    /// The exit code when the lock is held by another owner (0 to 255;
    /// 0 makes a lost race a success).
    #[arg(short = 'E', long, value_name = "N", default_value_t = EX_TEMPFAIL as u8)]
    pub conflict_exit_code: u8,

    /// Say nothing when the lock is held by another owner; outages and
    /// errors are still reported.
    #[arg(short, long)]
    pub quiet: bool,

    /// Ask for a fencing token and pass it in REDQUORUM_FENCING_TOKEN.
    #[arg(long)]
    pub fencing: bool,

    /// Who holds the lock, as `status` shows it (default: host:pid and
    /// the command's name).
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,

    /// After SIGTERM on lock loss, how long CMD's process group has before SIGKILL.
    #[arg(long, default_value = "5s", value_parser = duration::parse, value_name = "DURATION")]
    pub grace: Duration,

    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

impl RunArgs {
    /// How long to keep trying.
    pub fn wait(&self) -> Wait {
        if self.no_wait { Wait::Once } else { self.wait }
    }
}

/// Options of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Print one JSON object (for monitoring) instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Options of `init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Confirm that no lock taken through these nodes can still be held.
    #[arg(long)]
    pub no_lock_is_live: bool,
}

/// Options of `set-quarantine`.
#[derive(Debug, Args)]
pub struct SetQuarantineArgs {
    /// Confirm that no lock with a TTL above --restart-guard's MAX_TTL can
    /// still be held.
    #[arg(long)]
    pub no_longer_lock_is_live: bool,
}

/// Options of `vouch-counters`.
#[derive(Debug, Args)]
pub struct VouchCountersArgs {
    /// A resource whose counters to vouch for (repeat for several).
    #[arg(long, value_name = "NAME", required_unless_present = "all_resources")]
    pub resource: Vec<String>,

    /// Vouch for the counters of every resource, those never fenced too.
    #[arg(long, conflicts_with = "resource")]
    pub all_resources: bool,

    /// Confirm that the nodes' counters survived: appendfsync always, no
    /// FLUSHALL, no eviction, no failover to a lagging replica.
    #[arg(long)]
    pub counters_are_intact: bool,
}

/// Options of `status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The resource to look up.
    #[arg(long, value_name = "NAME")]
    pub resource: String,

    /// Print one JSON object (for monitoring) instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_the_command_after_a_double_dash() {
        let cli = Cli::try_parse_from([
            "redquorum",
            "--nodes",
            "redis://a,redis://b",
            "run",
            "--resource",
            "r",
            "--ttl",
            "2s",
            "--no-wait",
            "--",
            "sleep",
            "1",
        ])
        .unwrap();
        assert_eq!(cli.nodes, ["redis://a", "redis://b"]);
        let Command::Run(run) = cli.command else {
            panic!("not run");
        };
        assert_eq!(run.ttl, Duration::from_secs(2));
        assert_eq!(run.wait(), Wait::Once);
        assert_eq!(run.command, ["sleep", "1"]);
    }

    #[test]
    fn wait_and_no_wait_cannot_be_combined() {
        let err = Cli::try_parse_from([
            "redquorum",
            "run",
            "--resource",
            "r",
            "--wait",
            "1s",
            "--no-wait",
            "--",
            "true",
        ])
        .unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
    }

    #[test]
    fn a_bad_duration_names_the_flag_and_the_accepted_forms() {
        let err = Cli::try_parse_from([
            "redquorum",
            "run",
            "--resource",
            "r",
            "--ttl",
            "30",
            "--",
            "true",
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("--ttl"), "{err}");
        assert!(err.contains("500ms, 30s, 2m"), "{err}");
    }

    #[test]
    fn the_default_wait_is_ten_seconds() {
        let cli =
            Cli::try_parse_from(["redquorum", "run", "--resource", "r", "--", "true"]).unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run");
        };
        assert_eq!(run.wait(), Wait::For(Duration::from_secs(10)));
        assert_eq!(run.conflict_exit_code, 75);
        assert!(!run.quiet);
    }

    fn run_with(flags: &[&str]) -> Result<RunArgs, clap::Error> {
        let mut argv = vec!["redquorum", "run", "--resource", "r"];
        argv.extend_from_slice(flags);
        argv.extend_from_slice(&["--", "true"]);
        let cli = Cli::try_parse_from(argv)?;
        match cli.command {
            Command::Run(run) => Ok(run),
            other => panic!("not run: {other:?}"),
        }
    }

    #[test]
    fn wait_takes_a_duration_forever_or_zero_for_one_attempt() {
        assert_eq!(
            run_with(&["--wait", "forever"]).unwrap().wait(),
            Wait::Forever
        );
        assert_eq!(run_with(&["-w", "Forever"]).unwrap().wait(), Wait::Forever);
        assert_eq!(
            run_with(&["--wait", "1m30s"]).unwrap().wait(),
            Wait::For(Duration::from_secs(90))
        );
        assert_eq!(run_with(&["--wait", "0"]).unwrap().wait(), Wait::Once);
        let err = run_with(&["--wait", "never"]).unwrap_err().to_string();
        assert!(
            err.contains("forever") && err.contains("500ms, 30s"),
            "{err}"
        );
    }

    #[test]
    fn flock_style_short_flags_and_the_conflict_exit_code() {
        let run = run_with(&["-n", "-q", "-E", "0"]).unwrap();
        assert_eq!(run.wait(), Wait::Once);
        assert!(run.quiet);
        assert_eq!(run.conflict_exit_code, 0);
        assert_eq!(
            run_with(&["--conflict-exit-code", "255"])
                .unwrap()
                .conflict_exit_code,
            255
        );
        for bad in ["256", "-1", "x"] {
            assert!(run_with(&["--conflict-exit-code", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn nodes_and_a_nodes_file_cannot_be_combined() {
        let err = Cli::try_parse_from([
            "redquorum",
            "--nodes",
            "redis://a",
            "--nodes-file",
            "/etc/nodes",
            "check",
        ])
        .unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
        let cli =
            Cli::try_parse_from(["redquorum", "check", "--nodes-file", "/etc/nodes", "--json"])
                .unwrap();
        assert_eq!(cli.nodes_file, Some(PathBuf::from("/etc/nodes")));
        assert!(matches!(
            cli.command,
            Command::Check(CheckArgs { json: true })
        ));
    }
}
