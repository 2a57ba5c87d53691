//! `redquorum run`: acquire, run the command while keeping the lock alive,
//! release, and exit with the command's status.

use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use redquorum::{Config, Error, LockGuard, Redlock};
use tokio::process::{Child, Command};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::args::RunArgs;
use crate::group::{self, Group};
use crate::{
    EX_CONFIG, EX_SOFTWARE, EX_TEMPFAIL, EX_USAGE, Exit, LOCK_LOST, NOT_EXECUTABLE, NOT_FOUND,
};

/// Pause between two attempts while waiting, and its random spread (+/-).
const RETRY_DELAY: Duration = Duration::from_millis(200);
const RETRY_JITTER: Duration = Duration::from_millis(100);

/// The signals `run` handles: those passed on to the command, and SIGTSTP.
struct Signals {
    forwarded: Vec<(i32, Signal)>,
    /// SIGTSTP (Ctrl-Z at the terminal, or `kill -TSTP`): `run` stops
    /// itself, and the command's process group first.
    ///
    /// SIGTTIN and SIGTTOU keep their default action: `run` never reads
    /// the terminal and writes to it only after the command has ended, so
    /// the terminal cannot stop it while the command runs. A handler, which
    /// cannot be removed again, would make a background `run` spin on its
    /// last message under `stty tostop` (the write is retried after every
    /// SIGTTOU the handler swallows).
    stop: Signal,
}

fn handle(signo: i32) -> Result<Signal, Exit> {
    signal(SignalKind::from_raw(signo))
        .map_err(|e| Exit::error(EX_SOFTWARE, format!("cannot handle signal {signo}: {e}")))
}

impl Signals {
    fn new() -> Result<Self, Exit> {
        let kinds = [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGUSR2,
        ];
        let mut forwarded = Vec::with_capacity(kinds.len());
        for signo in kinds {
            forwarded.push((signo, handle(signo)?));
        }
        let stop = handle(libc::SIGTSTP)?;
        Ok(Signals { forwarded, stop })
    }

    /// The next signal received.
    async fn recv(&mut self) -> Received {
        let waits = self.forwarded.iter_mut().map(|(signo, stream)| {
            let signo = *signo;
            Box::pin(async move {
                stream.recv().await;
                signo
            })
        });
        tokio::select! {
            (signo, _, _) = futures_util::future::select_all(waits) => Received::Forward(signo),
            Some(()) = self.stop.recv() => Received::Stop,
        }
    }
}

/// A signal received by `run`.
enum Received {
    /// To be passed on to the command.
    Forward(i32),
    /// SIGTSTP.
    Stop,
}

/// Stops this process, as SIGTSTP would without a handler, and returns
/// once it is continued (SIGCONT: `fg`, `bg`, `kill -CONT`).
fn stop_self() {
    // SAFETY: raise(3) has no memory-safety preconditions. SIGSTOP stops
    // the whole process; the call returns after SIGCONT.
    unsafe {
        libc::raise(libc::SIGSTOP);
    }
}

/// The status a shell would report: the exit code, or 128 + the signal.
fn status_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(EX_SOFTWARE)
}

/// Why the lock was not had, in one line.
fn not_acquired(e: Error) -> Exit {
    match e {
        Error::NotAcquired(a) if a.is_unavailable() => {
            Exit::error(EX_TEMPFAIL, format!("nodes unavailable: {a}"))
        }
        Error::NotAcquired(a) if a.is_contended() => {
            Exit::error(EX_TEMPFAIL, format!("held by another owner: {a}"))
        }
        Error::InvalidArgument(why) => Exit::error(EX_USAGE, why),
        Error::Config(why) => Exit::error(EX_CONFIG, why),
        other => Exit::error(EX_TEMPFAIL, format!("not acquired: {other}")),
    }
}

/// Takes the lock: one attempt with `--no-wait`, else the library's
/// `lock()` (retries, release notifications) bounded by `--wait`. A signal
/// stops the wait at once; the attempt under way is dropped, and its keys
/// are released in the background (`run` awaits that before exiting).
async fn acquire(
    redlock: &Redlock,
    args: &RunArgs,
    signals: &mut Signals,
) -> Result<LockGuard, Exit> {
    let attempt = async {
        match args.wait() {
            Some(_) => redlock.lock(&args.resource, args.ttl).await,
            None => redlock.try_lock(&args.resource, args.ttl).await,
        }
    };
    tokio::pin!(attempt);
    loop {
        tokio::select! {
            result = &mut attempt => return result.map_err(not_acquired),
            received = signals.recv() => match received {
                // No command runs yet: only this process stops.
                Received::Stop => stop_self(),
                Received::Forward(signo) => return Err(interrupted(signo)),
            },
        }
    }
}

fn interrupted(signo: i32) -> Exit {
    Exit::error(
        128 + signo,
        format!("interrupted by signal {signo} while waiting for the lock"),
    )
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

/// `host:pid`, what `status` shows as the holder without `--label`.
fn default_label() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}

/// Runs `redquorum run`.
pub async fn run(nodes: &[String], config: Config, args: &RunArgs) -> Exit {
    let mut config = config
        .with_fencing(args.fencing)
        .with_retry_delay(RETRY_DELAY)
        .with_retry_jitter(RETRY_JITTER)
        .with_retry_count(u32::MAX)
        .with_holder_label(args.label.clone().unwrap_or_else(default_label));
    if let Some(wait) = args.wait() {
        config = config.with_acquire_timeout(wait);
    }
    let redlock = match Redlock::with_config(nodes.iter().map(String::as_str), config) {
        Ok(redlock) => redlock,
        Err(e) => return not_acquired(e),
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
                    if guard.is_expired() {
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
