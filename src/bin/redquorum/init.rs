//! `redquorum init`: marks every node trusted at once by the restart guard
//! ([`Redlock::init_nodes`]), for a cluster on which no lock can be live.
//! Exit code: 0 every node marked, 80 some not, 69 none, 78 an ACL or
//! other misconfiguration refused it, 64 without `--no-lock-is-live`.

use redquorum::Redlock;

use crate::{DEGRADED, EX_CONFIG, EX_UNAVAILABLE, EX_USAGE, Exit};

/// Marks the nodes, printing one line per node.
pub async fn init(redlock: &Redlock, confirmed: bool) -> Exit {
    if !confirmed {
        return Exit::error(
            EX_USAGE,
            "init lets restarted nodes vote at once: pass --no-lock-is-live to confirm that no \
             lock taken through these nodes can still be held (a new cluster, or every client \
             stopped for longer than the longest TTL); never conclude it from finding no lock \
             keys"
                .to_owned(),
        );
    }
    let reports = redlock.init_nodes().await;
    let mut marked = 0;
    let mut misconfigured = 0;
    for report in &reports {
        let outcome = report.outcome();
        if *outcome == redquorum::NodeOutcome::Granted {
            marked += 1;
            println!("{}: marked trusted", report.node());
        } else {
            misconfigured += usize::from(outcome.is_misconfigured());
            println!(
                "{}: not marked ({outcome}); it waits out its quarantine",
                report.node()
            );
        }
    }
    let total = reports.len();
    if marked == total {
        Exit::code(0)
    } else if misconfigured > 0 {
        Exit::error(
            EX_CONFIG,
            format!("{marked} of {total} nodes marked trusted; fix the misconfigured ones"),
        )
    } else if marked == 0 {
        Exit::error(EX_UNAVAILABLE, format!("no node of {total} marked trusted"))
    } else {
        Exit::error(
            DEGRADED,
            format!("{marked} of {total} nodes marked trusted"),
        )
    }
}
