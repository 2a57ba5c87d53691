//! The restart guard's operator commands: `redquorum set-quarantine`
//! makes every node keep this client's quarantine
//! ([`Redlock::set_node_quarantine`]), `redquorum vouch-counters` vouches
//! for fence counters ([`Redlock::vouch_fence_counters`]). Exit codes as
//! `init`'s: 0 every node done, 80 some not, 69 none, 78 an ACL or other
//! misconfiguration refused it, 64 without `--restart-guard` or the flag
//! that confirms.

use redquorum::{NodeReport, Redlock};

use crate::args::VouchCountersArgs;
use crate::{DEGRADED, EX_CONFIG, EX_UNAVAILABLE, EX_USAGE, Exit};

/// Sets the nodes' quarantine, printing one line per node.
pub async fn set(redlock: &Redlock, confirmed: bool) -> Exit {
    let Some(quarantine) = redlock.config().quarantine() else {
        return Exit::error(
            EX_USAGE,
            "set-quarantine gives the nodes this client's quarantine: pass --restart-guard \
             MAX_TTL, the value every client of the nodes uses"
                .to_owned(),
        );
    };
    if !confirmed {
        return Exit::error(
            EX_USAGE,
            "set-quarantine may shorten the quarantine of nodes that restarted: pass \
             --no-longer-lock-is-live to confirm that no lock with a TTL above \
             --restart-guard's MAX_TTL can still be held (every client uses this MAX_TTL, and \
             those with a longer one stopped longer ago than that)"
                .to_owned(),
        );
    }
    let reports = match redlock.set_node_quarantine().await {
        Ok(reports) => reports,
        Err(e) => return Exit::error(EX_USAGE, e.to_string()),
    };
    let done = format!("keeps {quarantine:?}");
    tell(&reports, &done, "set")
}

/// Vouches for the fence counters of `resources`, one line per node.
pub async fn vouch(redlock: &Redlock, args: &VouchCountersArgs) -> Exit {
    if redlock.config().quarantine().is_none() {
        return Exit::error(
            EX_USAGE,
            "vouch-counters is for the restart guard's fenced read: pass --restart-guard \
             MAX_TTL, the value every client of the nodes uses"
                .to_owned(),
        );
    }
    if !args.counters_are_intact {
        return Exit::error(
            EX_USAGE,
            "vouch-counters declares the nodes' fence counters intact: pass \
             --counters-are-intact to confirm that they survived (appendfsync always, no \
             FLUSHALL, no eviction, no failover to a lagging replica); a lost counter vouched \
             for can let a token go backwards"
                .to_owned(),
        );
    }
    let names: Vec<&str> = args.resource.iter().map(String::as_str).collect();
    let counters = if args.all_resources {
        redquorum::FenceCounters::All
    } else {
        redquorum::FenceCounters::Of(&names)
    };
    let reports = redlock.vouch_fence_counters(counters).await;
    let reports = match reports {
        Ok(reports) => reports,
        Err(e) => return Exit::error(EX_USAGE, e.to_string()),
    };
    tell(&reports, "vouched for", "vouched for")
}

/// Prints one line per node (`done` where it worked) and picks the exit
/// code; `what` says what was done, for the summary.
fn tell(reports: &[NodeReport], done: &str, what: &str) -> Exit {
    let mut ok = 0;
    let mut misconfigured = 0;
    for report in reports {
        let outcome = report.outcome();
        if *outcome == redquorum::NodeOutcome::Granted {
            ok += 1;
            println!("{}: {done}", report.node());
        } else {
            misconfigured += usize::from(outcome.is_misconfigured());
            println!("{}: not {what} ({outcome})", report.node());
        }
    }
    let total = reports.len();
    if ok == total {
        Exit::code(0)
    } else if misconfigured > 0 {
        Exit::error(
            EX_CONFIG,
            format!("{ok} of {total} nodes {what}; fix the misconfigured ones"),
        )
    } else if ok == 0 {
        Exit::error(EX_UNAVAILABLE, format!("no node of {total} {what}"))
    } else {
        Exit::error(DEGRADED, format!("{ok} of {total} nodes {what}"))
    }
}
