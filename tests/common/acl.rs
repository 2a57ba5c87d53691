//! ACL users on the test nodes, made from the documented lines of
//! docs/deployment.md.

use redquorum::testkit::LocalCluster;

/// The password of the documented user.
pub const PASSWORD: &str = "CHANGE-ME";

/// The `ACL SETUSER` arguments of one feature's line in docs/deployment.md.
pub fn documented(feature: &str) -> Vec<String> {
    let doc = include_str!("../../docs/deployment.md");
    let line = doc
        .lines()
        .find(|l| l.starts_with(&format!("{feature}:")))
        .unwrap_or_else(|| panic!("docs/deployment.md has no {feature}: line"));
    let args = line
        .split_once("ACL SETUSER ")
        .map(|(_, args)| args)
        .unwrap_or_else(|| panic!("{feature}: line has no ACL SETUSER"));
    args.split_whitespace().map(str::to_owned).collect()
}

/// Runs `ACL SETUSER` with `args` on nodes `on` (as the default user).
pub fn setuser(cluster: &LocalCluster, on: &[usize], args: &[String]) {
    for &i in on {
        let mut cmd = redis::cmd("ACL");
        cmd.arg("SETUSER").arg(args);
        if let Err(e) = super::query::<()>(&cluster.direct_url(i), &cmd) {
            panic!("ACL SETUSER {args:?} on node {i}: {e}");
        }
    }
}

/// Creates `locker` from the documented lines of `features` on every node.
pub fn user(cluster: &LocalCluster, features: &[&str]) {
    let all: Vec<usize> = (0..cluster.len()).collect();
    for feature in features {
        setuser(cluster, &all, &documented(feature));
    }
}

/// The cluster's URLs, logging in as `locker`.
pub fn locker_urls(cluster: &LocalCluster) -> Vec<String> {
    cluster
        .urls()
        .iter()
        .map(|u| u.replace("redis://", &format!("redis://locker:{PASSWORD}@")))
        .collect()
}
