//! `redquorum set-quarantine`: makes every node keep this client's
//! restart-guard quarantine ([`Redlock::set_node_quarantine`]). Exit code
//! as `init`'s: 0 every node set, 80 some not, 69 none, 78 an ACL or other
//! misconfiguration refused it, 64 without `--restart-guard` or
//! `--no-longer-lock-is-live`.

use redquorum::Redlock;

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
    let mut set = 0;
    let mut misconfigured = 0;
    for report in &reports {
        let outcome = report.outcome();
        if outcome.is_success() {
            set += 1;
            println!("{}: keeps {quarantine:?}", report.node());
        } else {
            misconfigured += usize::from(outcome.is_misconfigured());
            println!("{}: not set ({outcome})", report.node());
        }
    }
    let total = reports.len();
    if set == total {
        Exit::code(0)
    } else if misconfigured > 0 {
        Exit::error(
            EX_CONFIG,
            format!("{set} of {total} nodes set; fix the misconfigured ones"),
        )
    } else if set == 0 {
        Exit::error(EX_UNAVAILABLE, format!("no node of {total} set"))
    } else {
        Exit::error(DEGRADED, format!("{set} of {total} nodes set"))
    }
}
