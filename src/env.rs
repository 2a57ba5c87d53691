//! The environment's node list: `REDQUORUM_NODES`, comma-separated URLs
//! (the old name `REDLOCK_NODES` is still read, with a deprecation
//! warning). Read by [`Redlock::from_env`](crate::Redlock::from_env), the
//! command line and the testkit.

use crate::error::{Error, Result};

/// The environment variable holding the node URLs, comma-separated:
/// `REDQUORUM_NODES=redis://10.0.0.1:6379,redis://10.0.0.2:6379,...`.
pub const NODES_ENV: &str = "REDQUORUM_NODES";

/// The old name of [`NODES_ENV`], still read when `REDQUORUM_NODES` is
/// unset, with a deprecation warning.
pub const DEPRECATED_NODES_ENV: &str = "REDLOCK_NODES";

/// The URLs of a node list: separated by commas or white space, each
/// trimmed, empty entries skipped.
///
/// ```
/// let urls = redquorum::split_node_list(" redis://a:6379, redis://b:6379 ,,redis://c:6379 ");
/// assert_eq!(urls, ["redis://a:6379", "redis://b:6379", "redis://c:6379"]);
/// ```
pub fn split_node_list(list: &str) -> Vec<String> {
    list.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The value of `REDQUORUM_NODES`, else of `REDLOCK_NODES` (with a
/// deprecation warning through `warn`), and the name it came from; `None`
/// when neither is set to something other than blanks.
pub(crate) fn nodes_var(
    get: impl Fn(&str) -> Option<String>,
    warn: impl FnOnce(String),
) -> Option<(String, &'static str)> {
    let set = |name: &str| get(name).filter(|v| !v.trim().is_empty());
    if let Some(list) = set(NODES_ENV) {
        return Some((list, NODES_ENV));
    }
    let list = set(DEPRECATED_NODES_ENV)?;
    warn(format!(
        "{DEPRECATED_NODES_ENV} is deprecated: rename it to {NODES_ENV} (it is read only while \
         {NODES_ENV} is unset)"
    ));
    Some((list, DEPRECATED_NODES_ENV))
}

/// The node URLs of the process's environment, as [`nodes_var`] finds
/// them; the deprecation warning goes to `tracing`.
///
/// # Errors
///
/// [`Error::Config`] when neither variable is set or the list is empty.
pub(crate) fn nodes_from_env() -> Result<Vec<String>> {
    let found = nodes_var(
        |name| std::env::var(name).ok(),
        |warning| tracing::warn!(%warning, "redquorum environment"),
    );
    let Some((list, name)) = found else {
        return Err(Error::Config(format!(
            "{NODES_ENV} is not set: set it to the node URLs, comma-separated \
             (redis://10.0.0.1:6379,redis://10.0.0.2:6379,...)"
        )));
    };
    let urls = split_node_list(&list);
    if urls.is_empty() {
        return Err(Error::Config(format!("{name} lists no node URL")));
    }
    Ok(urls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_new_name_wins_and_the_old_one_is_read_with_a_warning() {
        let both = |name: &str| Some(format!("{name}-value"));
        let mut warned = None;
        let found = nodes_var(both, |w| warned = Some(w));
        assert_eq!(found, Some(("REDQUORUM_NODES-value".into(), NODES_ENV)));
        assert_eq!(warned, None);

        let old_only = |name: &str| (name == DEPRECATED_NODES_ENV).then(|| "redis://a".to_owned());
        let found = nodes_var(old_only, |w| warned = Some(w));
        assert_eq!(found, Some(("redis://a".into(), DEPRECATED_NODES_ENV)));
        let warning = warned.unwrap_or_default();
        assert!(
            warning.contains("deprecated") && warning.contains("REDQUORUM_NODES"),
            "{warning}"
        );

        let blank = |_: &str| Some("  ".to_owned());
        assert_eq!(nodes_var(blank, |_| {}), None);
    }
}
