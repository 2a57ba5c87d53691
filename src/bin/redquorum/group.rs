//! The command's process group: signalling it, telling whether any of its
//! processes is left, and ending all of them once the lock is lost.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::process::Child;
use tokio::time::Instant;

/// How often the group is looked at while waiting for it to empty.
const POLL: Duration = Duration::from_millis(20);

/// How long processes get to disappear after SIGKILL before `run` says
/// some are still there (a process in uninterruptible sleep dies late).
const AFTER_KILL: Duration = Duration::from_secs(2);

/// The process group that the command leads (it is started with
/// `setpgid(0, 0)`, so the group id is its pid).
#[derive(Clone, Copy, Debug)]
pub struct Group(libc::pid_t);

impl Group {
    /// The group of a command just started in its own process group.
    pub fn led_by(child: &Child) -> Option<Group> {
        child
            .id()
            .and_then(|pid| libc::pid_t::try_from(pid).ok())
            .filter(|pid| *pid > 0)
            .map(Group)
    }

    /// Sends `signo` to every process of the group.
    pub fn signal(self, signo: i32) {
        // SAFETY: kill(2) has no memory-safety preconditions; a negative pid
        // names the process group, and the group id is positive.
        unsafe {
            libc::kill(-self.0, signo);
        }
    }

    /// True while any process of the group is left that has not ended
    /// (zombies, which only wait for their parent to collect their status,
    /// do not count).
    pub fn has_members(self) -> bool {
        // SAFETY: as in `signal`; signal 0 only checks that the group exists.
        let exists = unsafe { libc::kill(-self.0, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        exists && live_member(self.0).unwrap_or(true)
    }

    /// Waits until the group has no member left, or `deadline`; true when
    /// it emptied.
    pub async fn emptied_by(self, deadline: Instant) -> bool {
        loop {
            if !self.has_members() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep_until((Instant::now() + POLL).min(deadline)).await;
        }
    }
}

/// Linux: whether some process of group `pgid` has not ended, from
/// `/proc/<pid>/stat`; `None` when `/proc` cannot be read.
#[cfg(target_os = "linux")]
fn live_member(pgid: libc::pid_t) -> Option<bool> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let wanted = pgid.to_string();
    let live = entries.flatten().any(|entry| {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // "pid (comm) state ppid pgrp ...": comm may hold anything, so
        // split after its closing parenthesis.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let mut fields = rest.split_ascii_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1);
        pgrp == Some(wanted.as_str()) && state != Some("Z") && state != Some("X")
    });
    Some(live)
}

/// Elsewhere only kill(2) can tell, and it counts zombies as members.
#[cfg(not(target_os = "linux"))]
fn live_member(_pgid: libc::pid_t) -> Option<bool> {
    None
}

/// The name of a signal as people write it.
pub fn signal_name(signo: i32) -> String {
    match signo {
        libc::SIGHUP => "SIGHUP".to_owned(),
        libc::SIGINT => "SIGINT".to_owned(),
        libc::SIGQUIT => "SIGQUIT".to_owned(),
        libc::SIGKILL => "SIGKILL".to_owned(),
        libc::SIGTERM => "SIGTERM".to_owned(),
        libc::SIGUSR1 => "SIGUSR1".to_owned(),
        libc::SIGUSR2 => "SIGUSR2".to_owned(),
        libc::SIGPIPE => "SIGPIPE".to_owned(),
        other => format!("signal {other}"),
    }
}

/// How the command ended: "exited with status 3", "was killed by SIGTERM".
pub fn describe(status: &std::io::Result<ExitStatus>) -> String {
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(signo)) => format!("was killed by {}", signal_name(signo)),
            (None, None) => format!("ended ({status})"),
        },
        Err(e) => format!("could not be waited for ({e})"),
    }
}

/// Ends the command and every other process of its group once the lock is
/// lost: SIGTERM to the group; when `grace` is over, SIGKILL to the group
/// if any process of it is left, whether or not the command itself has
/// exited. Returns what happened, for the error message.
pub async fn end_after_loss(child: &mut Child, group: Option<Group>, grace: Duration) -> String {
    if let Some(group) = group {
        group.signal(libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    let within_grace = tokio::time::timeout_at(deadline, child.wait()).await.ok();
    let rest_gone = match group {
        Some(group) => group.emptied_by(deadline).await,
        None => true,
    };
    if let (Some(status), true) = (&within_grace, rest_gone) {
        return format!("it got SIGTERM and {}", describe(status));
    }
    if let Some(group) = group {
        group.signal(libc::SIGKILL);
    }
    let how = match within_grace {
        Some(status) => format!(
            "it got SIGTERM and {}, but other processes of its group still ran {grace:?} \
             later and were killed with SIGKILL",
            describe(&status)
        ),
        None => format!(
            "it got SIGTERM, still ran {grace:?} later, and its process group was killed \
             with SIGKILL (the command {})",
            describe(&child.wait().await)
        ),
    };
    how + &after_kill(group).await
}

/// Waits for a killed group to disappear; says so if some process is left.
pub async fn after_kill(group: Option<Group>) -> String {
    match group {
        Some(group) if !group.emptied_by(Instant::now() + AFTER_KILL).await => {
            format!("; some processes of the group were still there {AFTER_KILL:?} after SIGKILL")
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_is_described_by_its_exit_status_or_its_signal() {
        assert_eq!(
            describe(&Ok(ExitStatus::from_raw(3 << 8))),
            "exited with status 3"
        );
        assert_eq!(
            describe(&Ok(ExitStatus::from_raw(libc::SIGKILL))),
            "was killed by SIGKILL"
        );
        assert_eq!(
            describe(&Ok(ExitStatus::from_raw(libc::SIGALRM))),
            format!("was killed by signal {}", libc::SIGALRM)
        );
    }
}
