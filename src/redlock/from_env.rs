//! Building a [`Redlock`] from a node list string or the environment,
//! without the `testkit` feature.

use super::Redlock;
use crate::config::Config;
use crate::env::{nodes_from_env, split_node_list};
use crate::error::{Error, Result};

impl Redlock {
    /// A lock over the nodes of `list`, URLs separated by commas or white
    /// space (as in a config file or a command line), tuned by `config`.
    ///
    /// ```
    /// use redquorum::{Config, Redlock};
    ///
    /// let list = "redis://10.0.0.1:6379, redis://10.0.0.2:6379, redis://10.0.0.3:6379";
    /// let redlock = Redlock::from_node_list(list, Config::default())?;
    /// assert_eq!(redlock.node_count(), 3);
    /// # Ok::<(), redquorum::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an empty list, and as
    /// [`with_config`](Self::with_config).
    pub fn from_node_list(list: &str, config: Config) -> Result<Redlock> {
        let urls = split_node_list(list);
        if urls.is_empty() {
            return Err(Error::Config(
                "the node list is empty: give the URLs of independent Redis masters, \
                 comma-separated (redis://10.0.0.1:6379,redis://10.0.0.2:6379,...)"
                    .to_owned(),
            ));
        }
        Redlock::with_config(urls, config)
    }

    /// A lock over the nodes of the environment variable `REDQUORUM_NODES`
    /// ([`NODES_ENV`](crate::NODES_ENV), URLs separated by commas), tuned
    /// by `config`. The old name `REDLOCK_NODES` is still read while
    /// `REDQUORUM_NODES` is unset, with a deprecation warning (through
    /// `tracing`).
    ///
    /// ```no_run
    /// // REDQUORUM_NODES=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
    /// let redlock = redquorum::Redlock::from_env(redquorum::Config::default())?;
    /// # Ok::<(), redquorum::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Config`] when the variable is unset or lists no node, and
    /// as [`with_config`](Self::with_config).
    pub fn from_env(config: Config) -> Result<Redlock> {
        Redlock::with_config(nodes_from_env()?, config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_list_string_builds_a_lock_and_an_empty_one_says_what_to_give() {
        let redlock = Redlock::from_node_list(
            "redis://127.0.0.1:7001,redis://127.0.0.1:7002\nredis://127.0.0.1:7003",
            Config::default(),
        );
        assert_eq!(redlock.map(|r| r.node_count()).ok(), Some(3));
        match Redlock::from_node_list(" , ", Config::default()) {
            Err(Error::Config(why)) => assert!(why.contains("comma-separated"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
