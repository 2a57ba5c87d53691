//! The command line: global options, subcommands, help text.

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::duration;

const EXAMPLES: &str = "\
Examples:
  # Run a nightly job on at most one host of the fleet; skip it if another host has it:
  export REDLOCK_NODES=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
  redquorum run --resource nightly-export --no-wait -- /usr/local/bin/export --full

  # Wait up to 2 minutes for the lock, hold it with a 30 s TTL kept alive while the job runs:
  redquorum run --resource db-migrate --wait 2m --ttl 30s -- ./migrate.sh

  # Check that every node is a reachable master that does not evict keys:
  redquorum check

  # Who holds a lock, and for how long on each node:
  redquorum status --resource nightly-export

Exit codes (run): the command's own status (128+N when killed by signal N);
  75 lock not acquired, 79 lock lost while the command ran,
  64 bad usage, 78 bad configuration, 126/127 command not executable/not found.";

/// Runs commands under a Redlock lock held on a quorum of independent Redis
/// masters: flock(1) for a fleet.
#[derive(Debug, Parser)]
#[command(name = "redquorum", version, after_help = EXAMPLES)]
pub struct Cli {
    /// Redis masters, comma-separated URLs (redis://[:password@]host:port[/db]).
    #[arg(
        long,
        env = "REDLOCK_NODES",
        hide_env_values = true,
        value_delimiter = ',',
        global = true,
        value_name = "URLS"
    )]
    pub nodes: Vec<String>,

    /// Limit on one call to one node, connection included.
    #[arg(long, default_value = "100ms", value_parser = duration::parse, global = true, value_name = "DURATION")]
    pub node_timeout: Duration,

    /// Prefix of the keys written; the lock of resource R is at {prefix}lock:{R}.
    #[arg(long, default_value = redquorum::DEFAULT_KEY_PREFIX, global = true)]
    pub key_prefix: String,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Acquire the lock, run CMD while keeping the lock alive, release it, exit with CMD's status.
    #[command(after_help = "\
CMD gets these environment variables:
  REDQUORUM_RESOURCE       the resource name
  REDQUORUM_LOCK_VALUE     the random value marking this holder on the nodes
  REDQUORUM_VALID_MS       validity left when CMD started, in milliseconds
  REDQUORUM_FENCING_TOKEN  the fencing token (with --fencing)

If the lock is lost while CMD runs, CMD's process group gets SIGTERM; when
--grace is over, the whole group gets SIGKILL if any process of it is left,
even if CMD itself has exited. redquorum then exits 79 and says how CMD
ended and whether processes had to be killed. SIGINT, SIGTERM, SIGHUP,
SIGQUIT, SIGUSR1 and SIGUSR2 sent to redquorum are passed on to CMD.
CMD runs in its own process group: it should not read from the terminal.

Ctrl-Z (SIGTSTP) stops CMD's process group (with SIGSTOP, which CMD cannot
catch) and then redquorum. Nothing extends the lock while they are stopped.
On SIGCONT (fg, bg), redquorum continues CMD if the lock is still valid;
if it lapsed meanwhile (another host may hold it now), CMD is killed with
SIGKILL while still stopped, and redquorum exits 79. Continue the job with
fg or bg, not by sending SIGCONT to CMD. SIGSTOP to redquorum alone cannot
be caught: CMD would go on while the lock is not extended.

Example:
  redquorum run --resource nightly-export --ttl 30s --no-wait -- ./export.sh")]
    Run(RunArgs),
    /// Check every node: reachable, master, authenticated, not evicting keys, latency.
    Check,
    /// Show which nodes hold a resource's lock and the TTL left on each
    /// (for a reentrant lock: its owner and number of holds).
    Status(StatusArgs),
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

    /// How long to wait for the lock when it is taken.
    #[arg(long, default_value = "10s", value_parser = duration::parse, value_name = "DURATION", conflicts_with = "no_wait")]
    pub wait: Duration,

    /// Make a single attempt: exit 75 at once when the lock is taken.
    #[arg(long)]
    pub no_wait: bool,

    /// Ask for a fencing token and pass it in REDQUORUM_FENCING_TOKEN.
    #[arg(long)]
    pub fencing: bool,

    /// Who holds the lock, as `status` shows it (default: host:pid).
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
    /// How long to keep trying; `None` for one attempt.
    pub fn wait(&self) -> Option<Duration> {
        (!self.no_wait && !self.wait.is_zero()).then_some(self.wait)
    }
}

/// Options of `status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The resource to look up.
    #[arg(long, value_name = "NAME")]
    pub resource: String,
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
        assert_eq!(run.wait(), None);
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
        assert_eq!(run.wait(), Some(Duration::from_secs(10)));
    }
}
