//! How `run` takes the lock (the library's `lock_with`, bounded by
//! `--wait`), and why it did not: contention (75, or
//! `--conflict-exit-code`; silent with `--quiet`), nodes unavailable (69),
//! misconfigured nodes (78).

use std::time::Duration;

use redquorum::{Attempts, Error, LockGuard, LockOptions, Redlock};

use crate::args::{RunArgs, Wait};
use crate::signals::{Received, Signals, stop_self};
use crate::{EX_CONFIG, EX_SOFTWARE, EX_UNAVAILABLE, EX_USAGE, Exit, status};

/// Pause between two attempts while waiting, and its random spread (+/-).
const RETRY_DELAY: Duration = Duration::from_millis(200);
const RETRY_JITTER: Duration = Duration::from_millis(100);

/// The options of the acquisition: `--wait`, `--no-wait`, `--fencing`.
pub fn options(args: &RunArgs) -> LockOptions {
    let options = LockOptions::new()
        .fencing(args.fencing)
        .retry_delay(RETRY_DELAY)
        .retry_jitter(RETRY_JITTER);
    options.wait(match args.wait() {
        Wait::Once => redquorum::Wait::No,
        Wait::For(deadline) => redquorum::Wait::For(deadline),
        Wait::Forever => redquorum::Wait::Forever,
    })
}

/// `host:pid` and the command's name (`web-3:4242 export.sh`): what
/// `status` shows as the holder without `--label`.
pub fn default_label(args: &RunArgs) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    let mut label = format!("{host}:{}", std::process::id());
    let program = args
        .command
        .first()
        .map(std::path::Path::new)
        .and_then(std::path::Path::file_name)
        .map(|name| name.to_string_lossy().replace(char::is_control, "?"));
    if let Some(program) = program {
        // A label has at most 200 bytes.
        let room = 200usize.saturating_sub(label.len() + 1);
        let mut end = program.len().min(room);
        while !program.is_char_boundary(end) {
            end -= 1;
        }
        if end > 0 {
            label.push(' ');
            label.push_str(&program[..end]);
        }
    }
    label
}

/// Takes the lock as `options` says. A signal stops the wait at once; the
/// attempt under way is dropped, and its keys are released in the
/// background (`run` awaits that before exiting).
pub async fn acquire(
    redlock: &Redlock,
    args: &RunArgs,
    signals: &mut Signals,
) -> Result<LockGuard, Exit> {
    let options = options(args);
    let attempt = redlock.lock_with(&args.resource, args.ttl, &options);
    tokio::pin!(attempt);
    let result = loop {
        tokio::select! {
            result = &mut attempt => break result,
            received = signals.recv() => match received {
                // No command runs yet: only this process stops.
                Received::Stop => stop_self(),
                Received::Forward(signo) => return Err(interrupted(signo)),
            },
        }
    };
    match result {
        Ok(guard) => Ok(guard),
        Err(Error::NotAcquired(why)) if refusal(&why) == Refusal::Contended => {
            Err(contended(redlock, args, &why).await)
        }
        Err(e) => Err(not_acquired(e)),
    }
}

/// Why a quorum said no, in the order that decides the exit code: a
/// misconfiguration (waiting does not mend it), then too few nodes
/// answering (the lock could not have been had even if free), then
/// another owner.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Misconfigured,
    Unavailable,
    Contended,
}

pub fn refusal(why: &Attempts) -> Refusal {
    if why.reason() == redquorum::Reason::Misconfigured {
        Refusal::Misconfigured
    } else if why.reason() != redquorum::Reason::Contended {
        // Neither contended nor short of nodes: the nodes answered too
        // slowly for any validity to be left, an outage all the same.
        Refusal::Unavailable
    } else {
        Refusal::Contended
    }
}

/// The exit for an error other than contention.
pub fn not_acquired(e: Error) -> Exit {
    match e {
        Error::NotAcquired(why) => match refusal(&why) {
            Refusal::Misconfigured => Exit::error(EX_CONFIG, format!("misconfigured nodes: {why}")),
            _ => Exit::error(EX_UNAVAILABLE, format!("nodes unavailable: {why}")),
        },
        Error::InvalidArgument(why) => Exit::error(EX_USAGE, why),
        Error::Config(why) => Exit::error(EX_CONFIG, why),
        e @ Error::Misconfigured(_) => Exit::error(EX_CONFIG, e.to_string()),
        other => Exit::error(EX_SOFTWARE, format!("not acquired: {other}")),
    }
}

/// The exit when another owner holds the lock: `--conflict-exit-code`,
/// and unless `--quiet` a line naming the holder (read with `inspect`).
async fn contended(redlock: &Redlock, args: &RunArgs, why: &Attempts) -> Exit {
    let code = i32::from(args.conflict_exit_code);
    if args.quiet {
        return Exit::code(code);
    }
    let by = match redlock.inspect(&args.resource).await {
        Ok(seen) => seen
            .holder()
            .map(|hold| format!(" ({})", status::holder(hold)))
            .unwrap_or_default(),
        Err(_) => String::new(),
    };
    Exit::error(code, format!("held by another owner{by}: {why}"))
}

fn interrupted(signo: i32) -> Exit {
    Exit::error(
        128 + signo,
        format!("interrupted by signal {signo} while waiting for the lock"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Cli, Command};
    use clap::Parser;

    fn run_args(flags: &[&str]) -> RunArgs {
        let mut argv = vec!["redquorum", "run", "--resource", "r"];
        argv.extend_from_slice(flags);
        argv.extend_from_slice(&["--", "/usr/bin/nightly-export", "--full"]);
        match Cli::try_parse_from(argv).map(|cli| cli.command) {
            Ok(Command::Run(run)) => run,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn each_wait_becomes_the_librarys_lock_option() {
        let base = LockOptions::new()
            .fencing(false)
            .retry_delay(RETRY_DELAY)
            .retry_jitter(RETRY_JITTER);
        assert_eq!(
            options(&run_args(&["--wait", "forever"])),
            base.clone().wait(redquorum::Wait::Forever)
        );
        assert_eq!(
            options(&run_args(&["--wait", "2m"])),
            base.clone()
                .wait(redquorum::Wait::For(Duration::from_secs(120)))
        );
        assert_eq!(
            options(&run_args(&["--no-wait"])),
            base.clone().wait(redquorum::Wait::No)
        );
        assert_eq!(
            options(&run_args(&["--wait", "0", "--fencing"])),
            base.fencing(true).wait(redquorum::Wait::No)
        );
    }

    #[test]
    fn the_default_label_is_host_pid_and_the_commands_name() {
        let label = default_label(&run_args(&[]));
        let pid = std::process::id();
        assert!(
            label.ends_with(&format!(":{pid} nightly-export")),
            "{label}"
        );
        assert!(!label.contains("--full"), "{label}");
    }
}
