//! `redquorum run`: acquire, run the command while keeping the lock alive,
//! release, and exit with the command's status.

use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use redquorum::{Config, LockGuard, Redlock};
use tokio::process::{Child, Command};

use crate::acquire::{self, acquire};
use crate::args::RunArgs;
use crate::group::{self, Group};
use crate::nodes::PASSWORD_VAR;
use crate::signals::{Received, Signals, stop_self};
use crate::{EX_SOFTWARE, EX_USAGE, Exit, LOCK_LOST, NOT_EXECUTABLE, NOT_FOUND};

/// The status a shell would report: the exit code, or 128 + the signal.
fn status_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(EX_SOFTWARE)
}

/// Starts the command in its own process group, with the lock in its environment.
fn spawn(args: &RunArgs, guard: &LockGuard) -> Result<Child, Exit> {
    let Some((program, rest)) = args.command.split_first() else {
        return Err(Exit::error(
            EX_USAGE,
            "no command given after --".to_owned(),
        ));
    };
    let mut command = Command::new(program);
    command
        .args(rest)
        .env_remove(PASSWORD_VAR)
        .env("REDQUORUM_RESOURCE", &args.resource)
        .env("REDQUORUM_LOCK_VALUE", guard.value())
        .env(
            "REDQUORUM_VALID_MS",
            guard.remaining().as_millis().to_string(),
        )
        .process_group(0);
    if let Some(token) = guard.fencing_token() {
        command.env("REDQUORUM_FENCING_TOKEN", token.to_string());
    }
    command.spawn().map_err(|e| {
        let name = program.to_string_lossy();
        match e.kind() {
            ErrorKind::NotFound => Exit::error(NOT_FOUND, format!("{name}: command not found")),
            ErrorKind::PermissionDenied => {
                Exit::error(NOT_EXECUTABLE, format!("{name}: permission denied"))
            }
            _ => Exit::error(NOT_EXECUTABLE, format!("{name}: cannot run: {e}")),
        }
    })
}

/// How the command's run ended.
enum End {
    Exited(std::io::Result<ExitStatus>),
    /// The watchdog could not keep the lock.
    Lost,
    /// The lock lapsed while `run` (and the command with it) was stopped.
    LapsedWhileStopped,
}

/// Runs `redquorum run`.
pub async fn run(nodes: &[String], config: Config, args: &RunArgs) -> Exit {
    let label = args
        .label
        .clone()
        .unwrap_or_else(|| acquire::default_label(args));
    let config = config.with_holder_label(label);
    let redlock = match Redlock::with_config(nodes.iter().map(String::as_str), config) {
        Ok(redlock) => redlock,
        Err(e) => return acquire::not_acquired(e),
    };
    let exit = match run_inner(&redlock, args).await {
        Ok(exit) | Err(exit) => exit,
    };
    // A release returns at quorum; the slower nodes' deletes (and the
    // clean-up of a cancelled attempt) finish before the process exits,
    // or their keys would block the next run until the TTL.
    redlock.shutdown().await;
    exit
}

async fn run_inner(redlock: &Redlock, args: &RunArgs) -> Result<Exit, Exit> {
    let mut signals = Signals::new()?;
    let mut guard = acquire(redlock, args, &mut signals).await?;
    let mut child = match spawn(args, &guard) {
        Ok(child) => child,
        Err(exit) => {
            let _ = guard.release().await;
            return Err(exit);
        }
    };
    let group = Group::led_by(&child);
    // The library's watchdog extends the lock when a third of the TTL is
    // left and retries failed extensions while validity remains.
    guard.auto_extend();
    let end = loop {
        tokio::select! {
            status = child.wait() => break End::Exited(status),
            () = guard.lost() => break End::Lost,
            received = signals.recv() => match received {
                Received::Forward(signo) => {
                    if let Some(group) = group {
                        group.signal(signo);
                    }
                }
                Received::Stop => {
                    // Nothing extends the lock while this process is
                    // stopped, so the command must not run either: SIGSTOP,
                    // which it cannot catch or ignore, goes to its group first.
                    if let Some(group) = group {
                        group.signal(libc::SIGSTOP);
                    }
                    stop_self();
                    if guard.remaining().is_zero() {
                        break End::LapsedWhileStopped;
                    }
                    if let Some(group) = group {
                        group.signal(libc::SIGCONT);
                    }
                }
            },
        }
    };
    match end {
        End::Exited(status) => {
            let released = guard.release().await;
            let status = status
                .map_err(|e| Exit::error(EX_SOFTWARE, format!("waiting for the command: {e}")))?;
            if released.is_err() {
                eprintln!(
                    "redquorum: warning: the lock on {:?} had expired or could not be released \
                     on a quorum when the command ended",
                    args.resource
                );
            }
            Ok(Exit::code(status_code(status)))
        }
        End::LapsedWhileStopped => {
            // Continuing the command, even to deliver SIGTERM, would let it
            // act without the lock: it is killed while still stopped.
            if let Some(group) = group {
                group.signal(libc::SIGKILL);
            }
            let ended = group::describe(&child.wait().await);
            let left = group::after_kill(group).await;
            drop(guard.release().await);
            Err(Exit::error(
                LOCK_LOST,
                format!(
                    "lost the lock on {:?} while redquorum was stopped: nothing could extend \
                     it meanwhile; the command, stopped too, was killed with SIGKILL without \
                     being continued (it {ended}){left}",
                    args.resource
                ),
            ))
        }
        End::Lost => {
            let how = group::end_after_loss(&mut child, group, args.grace).await;
            drop(guard.release().await);
            Err(Exit::error(
                LOCK_LOST,
                format!(
                    "lost the lock on {:?} while the command ran: it could not be kept on a \
                     quorum of nodes before its validity ran out; {how}",
                    args.resource
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_death_is_reported_as_128_plus_the_signal() {
        assert_eq!(status_code(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(status_code(ExitStatus::from_raw(libc::SIGTERM)), 128 + 15);
    }
}
