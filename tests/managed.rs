#![cfg(feature = "testkit")]
//! Managed services refuse commands the checks use (Aiven disables `ROLE`,
//! ElastiCache and Azure block `CONFIG`): `check()` degrades, reporting
//! each refused probe as a warning, and runs the others. ACL users that
//! lack `+role`, `+config` or `+info` stand in for the providers.

mod common;

use common::acl::{locker_urls, setuser, user};
use redquorum::NodeProblem;

/// The refused probe `command` among `problems`, if reported: a warning
/// that says what could not be checked and what to allow.
fn unchecked<'a>(problems: &'a [NodeProblem], command: &str) -> Option<&'a NodeProblem> {
    problems.iter().find(|p| {
        let text = p.to_string();
        p.is_warning() && text.contains("could not check") && text.contains(&format!("+{command})"))
    })
}

#[tokio::test]
async fn each_refused_probe_is_reported_and_the_other_probes_still_run() {
    let cluster = common::cluster(3);
    user(&cluster, &["core", "checks"]);
    setuser(&cluster, &[0], &["locker".to_owned(), "-role".to_owned()]);
    setuser(&cluster, &[1], &["locker".to_owned(), "-config".to_owned()]);
    setuser(&cluster, &[2], &["locker".to_owned(), "-info".to_owned()]);
    let redlock = common::redlock(&locker_urls(&cluster), common::fast_config());
    let rows = redlock.check_report().await;

    // No ROLE (Aiven): the role is unknown, the rest was read.
    let no_role = &rows[0];
    let problem = unchecked(no_role.problems(), "role")
        .unwrap_or_else(|| panic!("ROLE refusal not reported: {:?}", no_role.problems()));
    assert!(problem.is_warning(), "{problem}");
    let text = problem.to_string();
    assert!(
        text.contains("could not check") && text.contains("refused by ACL or the provider"),
        "{text}"
    );
    assert!(no_role.reachable(), "a refusal is an answer");
    assert_eq!(no_role.role(), None);
    assert_eq!(no_role.eviction_policy(), Some("noeviction"));
    assert!(no_role.run_id().is_some(), "INFO was not read after ROLE");
    assert!(no_role.latency().is_some());

    // No CONFIG (ElastiCache, Azure): one warning for the settings.
    let no_config = &rows[1];
    assert!(
        unchecked(no_config.problems(), "config|get").is_some(),
        "{:?}",
        no_config.problems()
    );
    assert_eq!(no_config.role(), Some("master"));
    assert!(no_config.run_id().is_some());
    assert_eq!(no_config.eviction_policy(), None);
    assert_eq!(no_config.persistence(), None);

    // No INFO: duplicates and cluster mode go unchecked, the rest not.
    let no_info = &rows[2];
    assert!(
        unchecked(no_info.problems(), "info").is_some(),
        "{:?}",
        no_info.problems()
    );
    assert_eq!(no_info.role(), Some("master"));
    assert_eq!(no_info.eviction_policy(), Some("noeviction"));
    assert_eq!(no_info.run_id(), None);

    // Each node has one refused probe and nothing else wrong.
    for row in &rows {
        let refused = row
            .problems()
            .iter()
            .filter(|p| p.to_string().contains("could not check"))
            .count();
        assert_eq!(refused, 1, "{:?}", row.problems());
    }
    redlock
        .check()
        .await
        .expect("refused probes are warnings: the checks degrade, they do not fail");
}

#[tokio::test]
async fn a_node_that_refuses_every_probe_still_locks_and_checks_say_what_they_could_not() {
    let cluster = common::cluster(3);
    // The core user alone: no ROLE, INFO or CONFIG anywhere.
    user(&cluster, &["core"]);
    let redlock = common::redlock(&locker_urls(&cluster), common::fast_config());
    let rows = redlock.check_report().await;
    for row in &rows {
        for command in ["role", "info", "config|get"] {
            assert!(
                unchecked(row.problems(), command).is_some(),
                "{command} not reported: {:?}",
                row.problems()
            );
        }
        assert!(row.reachable());
    }
    redlock.check().await.expect("degraded checks pass");
    let guard = redlock
        .lock(
            &common::unique("managed"),
            std::time::Duration::from_secs(5),
        )
        .await
        .expect("the core user locks");
    guard.release().await.expect("release");
}
