//! The signals `run` handles while it waits for the lock and while the
//! command runs: those passed on to the command, and SIGTSTP.

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::{EX_SOFTWARE, Exit};

/// The signals `run` handles: those passed on to the command, and SIGTSTP.
pub struct Signals {
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
    pub fn new() -> Result<Self, Exit> {
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
    pub async fn recv(&mut self) -> Received {
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
pub enum Received {
    /// To be passed on to the command.
    Forward(i32),
    /// SIGTSTP.
    Stop,
}

/// Stops this process, as SIGTSTP would without a handler, and returns
/// once it is continued (SIGCONT: `fg`, `bg`, `kill -CONT`).
pub fn stop_self() {
    // SAFETY: raise(3) has no memory-safety preconditions. SIGSTOP stops
    // the whole process; the call returns after SIGCONT.
    unsafe {
        libc::raise(libc::SIGSTOP);
    }
}
