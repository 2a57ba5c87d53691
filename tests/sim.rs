//! The deterministic simulation: the real coordinator under seeded
//! schedules on virtual time, against simulated nodes.
//!
//! - `SIM_SEED=N`: replay one seed (prints its history file and faults);
//!   with `SIM_NOTIFICATIONS=off`, every client without release
//!   notifications (the regression seeds recorded before they were
//!   simulated run so); the same variable turns them off in the batch.
//! - `SIM_SECONDS=S`: how long the random batch runs (default 10).
//! - `SIM_FIRST_SEED=N`: where the random batch starts (default: drawn
//!   from the clock, printed).
//! - `SIM_SCHEDULES=N`: the batch runs at most N seeds (a fixed amount of
//!   work, to compare the simulator's cost by instruction counts).
//! - `SIM_CHECK_DETERMINISM=1`: the batch runs each seed twice and
//!   compares the histories.
//! - `SIM_FAIL_FAST=1`: the regression seeds and the batch stop at their
//!   first failing seed and do not shrink it (`scripts/mutants.sh`, which
//!   only asks whether a mutant fails).
#![cfg(feature = "sim")]

use std::time::Duration;

use redquorum::testkit::sim::faults::{Fault, FaultKind};
use redquorum::testkit::sim::{Control, Plan, Report, batch, run, shrink};

/// Every command, script value and reply allocates: a faster allocator
/// runs more schedules a minute.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Seeds that once found a defect, each with what it found: they must pass.
const REGRESSION_SEEDS: &str = include_str!("sim-seeds.txt");

/// The line of `sim-seeds.txt` after which seeds run with release
/// notifications drawn; those above it run without.
const NOTIFICATIONS_FROM_HERE: &str = "# release notifications simulated from here on";

/// The seeds of `text`, each with whether it runs without notifications.
fn seeds_from(text: &str) -> Vec<(u64, bool)> {
    let mut off = true;
    let mut seeds = Vec::new();
    for line in text.lines() {
        if line.trim() == NOTIFICATIONS_FROM_HERE {
            off = false;
        }
        if let Some(Ok(seed)) = line.split('#').next().map(|s| s.trim().parse()) {
            seeds.push((seed, off));
        }
    }
    seeds
}

/// `SIM_NOTIFICATIONS=off`: replay without release notifications.
fn notifications_off() -> bool {
    std::env::var("SIM_NOTIFICATIONS").is_ok_and(|v| v.trim() == "off")
}

/// Violations of known open defects (the reliability issue's), by the
/// text the checker writes: a batch lists them and does not fail on them.
/// Each fix empties its line, and its seed goes into `sim-seeds.txt`.
const KNOWN_OPEN: &[&str] = &[];

fn known_open(violation: &str) -> bool {
    KNOWN_OPEN.iter().any(|known| violation.contains(known))
}

/// `SIM_FAIL_FAST=1`: stop at the first failing seed, unshrunk.
fn fail_fast() -> bool {
    std::env::var("SIM_FAIL_FAST").is_ok_and(|v| v.trim() == "1")
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// Writes a failing report's history and says how to replay it.
fn explain(report: &Report) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("sim");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("seed-{}.jsonl", report.seed));
    let _ = std::fs::write(&path, report.history.join("\n") + "\n");
    let mut text = format!(
        "seed {} failed:\n  {}\nreplay: {}SIM_SEED={} cargo test --features sim --test sim -- \
         --nocapture replay\nfaults ({}):\n",
        report.seed,
        report.violations.join("\n  "),
        if report.notifications_off {
            "SIM_NOTIFICATIONS=off "
        } else {
            ""
        },
        report.seed,
        report.faults.len()
    );
    for fault in &report.faults {
        text.push_str(&format!("  {fault}\n"));
    }
    text.push_str(&format!("history: {}\n", path.display()));
    text
}

#[test]
fn the_regression_seeds_pass() {
    let mut failed = Vec::new();
    for (seed, notifications_off) in seeds_from(REGRESSION_SEEDS) {
        let report = run(&Plan {
            seed,
            notifications_off,
            ..Plan::default()
        });
        if !report.violations.is_empty() && fail_fast() {
            panic!("{}", explain(&report));
        }
        if !report.violations.is_empty() {
            failed.push(explain(&shrink(&report)));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn replay_one_seed() {
    let Some(seed) = env_u64("SIM_SEED") else {
        return;
    };
    let report = run(&Plan {
        seed,
        notifications_off: notifications_off(),
        ..Plan::default()
    });
    println!(
        "seed {seed}: {} ops, {} commands, hash {:016x}",
        report.ops, report.commands, report.hash
    );
    for client in &report.clients {
        println!("  client: {:?}", client);
    }
    if !report.violations.is_empty() {
        panic!("{}", explain(&shrink(&report)));
    }
    println!("{}", explain(&report).replace("failed", "passed"));
}

#[test]
fn a_random_batch_finds_no_violation() {
    let seconds = env_u64("SIM_SECONDS").unwrap_or(10);
    let first = env_u64("SIM_FIRST_SEED").unwrap_or_else(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        (now % 1_000_000) * 1_000
    });
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let limit = env_u64("SIM_SCHEDULES").unwrap_or(u64::MAX);
    let summary = batch(
        first,
        Duration::from_secs(seconds),
        threads,
        limit,
        known_open,
        notifications_off(),
        fail_fast(),
    );
    for report in &summary.known {
        println!(
            "seed {} shows a known open defect: {}",
            report.seed,
            report.violations.first().map_or("", String::as_str)
        );
    }
    let mut text = String::new();
    for report in &summary.failures {
        text.push_str(&explain(report));
    }
    if std::env::var_os("SIM_CHECK_DETERMINISM").is_some() {
        let (low, high) = summary.seeds;
        for seed in low..=high.min(low + 99) {
            let plan = Plan {
                seed,
                notifications_off: notifications_off(),
                ..Plan::default()
            };
            let (a, b) = (run(&plan), run(&plan));
            if a.hash != b.hash {
                text.push_str(&format!("seed {seed}: two runs gave different histories\n"));
            }
        }
    }
    println!(
        "ops_per_schedule={:.0} commands_per_schedule={:.0}",
        summary.ops as f64 / summary.schedules.max(1) as f64,
        summary.commands as f64 / summary.schedules.max(1) as f64
    );
    println!("{}", summary.line());
    assert!(text.is_empty(), "{text}");
}

/// Runs `seed` twice in this process; the two histories must be equal.
fn run_twice(seed: u64) -> Report {
    let plan = Plan {
        seed,
        ..Plan::default()
    };
    let (a, b) = (run(&plan), run(&plan));
    assert_eq!(
        a.history, b.history,
        "seed {seed}: the same seed gave two histories"
    );
    a
}

#[test]
fn one_seed_replays_the_same_history() {
    for seed in 0..5 {
        let report = run_twice(seed);
        assert!(report.ops > 0, "seed {seed} ran no operation");
    }
}

#[test]
fn a_seed_with_release_notifications_replays_the_same_history() {
    // Seeds where two branches of a `tokio::select!` (a release heard, a
    // pause ended) were ready at once: the runtime's random draw chose.
    for seed in [7032, 7063, 7082, 7084, 7086] {
        run_twice(seed);
    }
}

#[test]
fn a_client_paused_past_the_span_is_asked_for_liveness_once_its_pause_is_over() {
    // As seed 42783 of a long batch was (client 2 paused from 9.388 s for
    // 2.859 s): its commands still waited in its links when the final
    // phase asked every client for a lock on healed nodes.
    let mut failed = Vec::new();
    for seed in [42783, 1, 2, 3] {
        let report = run(&Plan {
            seed,
            faults: Some(vec![Fault {
                at: Duration::from_millis(9_388),
                lasts: Duration::from_secs(5),
                kind: FaultKind::PauseClient { client: 2 },
            }]),
            ..Plan::default()
        });
        failed.extend(
            report
                .violations
                .iter()
                .map(|v| format!("seed {seed}: {v}")),
        );
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// A control must be seen, as two holders at once or a guard claiming
/// more than the nodes hold, in at least one of its first 30 seeds.
fn fires(control: Control, kinds: &[&str]) -> Option<String> {
    (0..30).find_map(|seed| {
        let report = run(&Plan {
            seed,
            control: Some(control),
            ..Plan::default()
        });
        let seen = report
            .violations
            .iter()
            .find(|v| kinds.iter().any(|kind| v.starts_with(kind)))?;
        println!("{control:?} fired on seed {seed}: {seen}");
        Some(seen.clone())
    })
}

#[test]
fn the_checkers_see_an_empty_restart_of_a_majority_without_the_restart_guard() {
    let report = fires(Control::UnguardedEmptyRestart, &["overlap"]);
    assert!(report.is_some(), "no overlap seen in 30 seeds");
    let report = fires(Control::UnguardedEmptyRestart, &["oracle"]);
    assert!(report.is_some(), "no oracle violation seen in 30 seeds");
}

#[test]
fn the_checkers_see_a_clock_jump_on_a_majority() {
    let report = fires(Control::MajorityClockJump, &["overlap", "oracle"]);
    assert!(report.is_some(), "no violation seen in 30 seeds");
}

#[test]
fn the_checkers_see_a_release_that_deletes_without_comparing() {
    let report = fires(Control::ReleaseWithoutCompare, &["overlap", "oracle"]);
    assert!(report.is_some(), "no violation seen in 30 seeds");
}

#[test]
fn the_checkers_see_extension_rounds_that_race() {
    let report = fires(Control::RacingExtensions, &["oracle"]);
    assert!(report.is_some(), "no violation seen in 30 seeds");
}

#[test]
fn the_checkers_see_a_batch_of_extensions_that_crosses_its_results() {
    let report = fires(Control::CrossedBatch, &["probe", "oracle"]);
    assert!(report.is_some(), "no violation seen in 30 seeds");
}

#[test]
fn the_checkers_see_a_watchdog_that_outlives_its_guard() {
    let report = fires(Control::LeakedWatchdog, &["growth"]);
    assert!(report.is_some(), "no growth seen in 30 seeds");
}

#[test]
fn the_checkers_see_a_release_that_hands_its_lock_to_no_waiter_of_its_own_redlock() {
    let report = fires(Control::NoHandOver, &["probe"]);
    assert!(report.is_some(), "no violation seen in 30 seeds");
}
