//! The long help texts: examples, environment variables, and every
//! subcommand's exit codes (the tests read them back from `--help`).

/// After the top-level `--help`.
pub const TOP: &str = "\
Nodes come from --nodes, --nodes-file, REDQUORUM_NODES_FILE or
REDQUORUM_NODES (in that order; the two variables together are an error;
the old names REDLOCK_NODES_FILE and REDLOCK_NODES are still read, with a
warning). A nodes file has
one URL a line; blank lines and # comments are skipped. REDQUORUM_PASSWORD,
when set, is the password of every node URL that has none of its own, so
that neither ps nor a cron line shows it. redquorum never prints a password
or a lock value.

rediss:// nodes (in a build with TLS): --tls-ca PATH trusts that CA
instead of the system's; --tls-cert PATH with --tls-key PATH gives a client
certificate; or REDQUORUM_TLS_CA, REDQUORUM_TLS_CERT, REDQUORUM_TLS_KEY.

Examples:
  # Run a nightly job on at most one host of the fleet; skip it quietly
  # (exit 0) if another host has it, fail loudly if the nodes are down:
  export REDQUORUM_NODES_FILE=/etc/redquorum/nodes
  redquorum run --resource nightly-export --no-wait --quiet --conflict-exit-code 0 -- /usr/local/bin/export --full

  # Wait up to 2 minutes for the lock, hold it with a 30 s TTL kept alive while the job runs:
  redquorum run --resource db-migrate --wait 2m --ttl 30s -- ./migrate.sh

  # Check that every node is a reachable master that does not evict keys:
  redquorum check

  # Who holds a lock, and for how long on each node:
  redquorum status --resource nightly-export

  # A new cluster with the restart guard: let its nodes vote at once:
  redquorum --restart-guard 60s init --no-lock-is-live

Each subcommand's --help lists its exit codes.";

/// After `run --help`.
pub const RUN: &str = "\
CMD gets these environment variables:
  REDQUORUM_RESOURCE       the resource name
  REDQUORUM_LOCK_VALUE     the random value marking this holder on the nodes
  REDQUORUM_VALID_MS       validity left when CMD started, in milliseconds
  REDQUORUM_FENCING_TOKEN  the fencing token (with --fencing)
REDQUORUM_PASSWORD is removed from CMD's environment.

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

Exit codes:
  CMD's own  CMD ran: its exit status (128+N when a signal N killed it)
  75         the lock is held by another owner (EX_TEMPFAIL), after --wait
             or at once with --no-wait; --conflict-exit-code N changes it,
             --quiet keeps this case silent
  69         nodes unavailable (EX_UNAVAILABLE): too few answered in time
             for a quorum; always reported on stderr
  78         bad configuration or nodes file, or misconfigured nodes
             (credentials, ACL, a replica, TLS) leave no quorum (EX_CONFIG)
  79         the lock was lost while CMD ran
  64         bad usage (EX_USAGE)
  70         internal error (EX_SOFTWARE)
  126, 127   CMD cannot be executed, CMD not found
  128+N      signal N ended the wait for the lock

Examples:
  # cron on every host; lost races are silent successes, outages mail:
  redquorum run --resource nightly-export --ttl 60s --no-wait --quiet --conflict-exit-code 0 -- ./export.sh
  # flock-like short forms, waiting for ever:
  redquorum run --resource db-migrate -w forever -- ./migrate.sh";

/// After `check --help`.
pub const CHECK: &str = "\
--json prints one JSON object instead of the table (fields in README.md,
section \"Command line\"); the exit code is the same.

Exit codes:
  0   every node is a reachable, well-configured master (warnings, such as
      persistence short of appendfsync always, are listed but do not count)
  80  degraded but usable: some nodes are unreachable, a quorum is fine
  69  too few nodes reachable for a quorum: locks cannot be acquired
      (EX_UNAVAILABLE)
  78  a node is misconfigured (a replica, refused credentials, eviction,
      ACL, TLS, Redis Cluster, the same server twice), even if a quorum is
      fine; or bad configuration or nodes file (EX_CONFIG)
  64  bad usage (EX_USAGE)";

/// After `status --help`.
pub const INIT: &str = "\
The restart guard (--restart-guard MAX_TTL, Config::with_restart_guard)
keeps a node that restarted, lost its data or is new from voting until
every lock it may have granted has expired. On a new cluster, or one whose
every client has been stopped for longer than the longest TTL, init lets
the nodes vote at once. Never run it because no lock key is to be found: a
redeploy of every node looks exactly like that while a holder elsewhere
still believes it holds its lock. Give --restart-guard with your clients'
MAX_TTL: each node then keeps that quarantine, and refuses a client that
announces another.

Example:
  redquorum --restart-guard 60s init --no-lock-is-live

Exit codes:
  0   every node marked trusted
  80  some nodes not marked (listed); they wait out their quarantine
  69  no node marked (EX_UNAVAILABLE)
  78  a node refused (an ACL without +info, say), or bad configuration
      or nodes file (EX_CONFIG)
  64  bad usage, or --no-lock-is-live missing (EX_USAGE)";

/// After `set-quarantine --help`.
pub const SET_QUARANTINE: &str = "\
With the restart guard, every client of the nodes must announce the same
quarantine (--restart-guard MAX_TTL plus drift): a node keeps the one of
the client that began its trust period and refuses the others. A client
with another MAX_TTL leaves nodes that refuse the fleet (check lists them)
and, while it is the longer one, quarantines that long. Once every client
uses one MAX_TTL, and none with a longer one has held a lock for longer
than that, set-quarantine makes every node keep this one: a node still in
quarantine then waits this one from the start of its trust period. A node
that restarted while a longer lock was live can then grant it again: when
in doubt, wait the longer quarantine out.

Example:
  redquorum --restart-guard 60s set-quarantine --no-longer-lock-is-live

Exit codes:
  0   every node keeps the quarantine
  80  some nodes not set (listed)
  69  no node set (EX_UNAVAILABLE)
  78  a node refused (an ACL without +info, say), or bad configuration
      or nodes file (EX_CONFIG)
  64  bad usage: --restart-guard or --no-longer-lock-is-live missing
      (EX_USAGE)";

/// After `vouch-counters --help`.
pub const VOUCH_COUNTERS: &str = "\
With the restart guard and fencing, a node counts in the fenced read only
if the resource's counter was written back to it since its last restart
(or init). When more nodes than a quorum can spare restarted since the
resource's last fenced lock, even cleanly with AOF, no token can be issued:
run fails with 78 and names this command. If the counters survived
(appendonly yes, appendfsync always, no FLUSHALL, no eviction, no failover
to a lagging replica), vouch-counters records them as known intact on every
node; nothing else changes (no quarantine ends sooner). A node that lost a
counter and is vouched for can let a token go backwards.

--all-resources vouches for every counter of the nodes, including those of
resources never fenced (a restart may have lost those too, so they do not
count either until vouched for or written back).

Example:
  redquorum --restart-guard 60s vouch-counters --resource ledger --counters-are-intact

Exit codes:
  0   every node vouched for
  80  some nodes not vouched for (listed)
  69  no node vouched for (EX_UNAVAILABLE)
  78  a node refused (an ACL without +info, say), or bad configuration
      or nodes file (EX_CONFIG)
  64  bad usage: --restart-guard or --counters-are-intact missing
      (EX_USAGE)";

pub const STATUS: &str = "\
The holder is shown by its label (run --label; host:pid and the command by
default) and the first 8 characters of its lock value, never the value; a
reentrant lock by its owner and number of holds.

--json prints one JSON object instead of the table (fields in README.md,
section \"Command line\"); the exit code is the same.

Exit codes:
  0   a quorum of nodes answered, whether the lock is held or free
  69  too few nodes answered to tell (EX_UNAVAILABLE)
  78  misconfigured nodes (credentials, ACL, TLS) leave too few answers to
      tell; or bad configuration or nodes file (EX_CONFIG)
  64  bad usage (EX_USAGE)";
