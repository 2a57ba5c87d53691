//! Validation of a [`Config`] against the node count: every value in its
//! documented range, checked once, by [`Redlock::with_config`](crate::Redlock::with_config).

use std::time::Duration;

use super::{Config, MAX_TTL, MAX_WAIT};
use crate::error::{Error, Result};

impl Config {
    /// Checks every value against `nodes` nodes and returns the quorum in force.
    pub(crate) fn validate(&self, nodes: usize) -> Result<usize> {
        let quorum = match self.quorum {
            None => nodes / 2 + 1,
            Some(q) if q <= nodes / 2 => {
                return Err(Error::Config(format!(
                    "quorum {q} is too small for {nodes} nodes: it must be more than half \
                     ({} ..= {nodes}) so that two quorums always share a node",
                    nodes / 2 + 1
                )));
            }
            Some(q) if q > nodes => {
                return Err(Error::Config(format!(
                    "quorum {q} is larger than the {nodes} nodes given; use {} ..= {nodes}",
                    nodes / 2 + 1
                )));
            }
            Some(q) => q,
        };
        if !self.drift_factor.is_finite() || !(0.0..1.0).contains(&self.drift_factor) {
            return Err(Error::Config(format!(
                "drift factor {} is out of range: use a finite number in [0, 1), e.g. 0.01",
                self.drift_factor
            )));
        }
        if self.node_timeout.is_zero() {
            return Err(Error::Config(
                "node timeout is zero: every node call would time out; use e.g. 50ms".to_owned(),
            ));
        }
        self.watchdog.validate()?;
        self.validate_restart_guard()?;
        self.connect.validate()?;
        let bounded = [
            (
                "drift padding",
                Some(self.drift_padding),
                MAX_TTL,
                "MAX_TTL",
            ),
            ("min validity", Some(self.min_validity), MAX_TTL, "MAX_TTL"),
            ("retry delay", Some(self.retry_delay), MAX_WAIT, "MAX_WAIT"),
            (
                "retry jitter",
                Some(self.retry_jitter),
                MAX_WAIT,
                "MAX_WAIT",
            ),
            ("acquire timeout", self.acquire_timeout, MAX_TTL, "MAX_TTL"),
            (
                "node timeout",
                Some(self.node_timeout),
                MAX_WAIT,
                "MAX_WAIT",
            ),
            ("max hold", self.watchdog.max_hold, MAX_TTL, "MAX_TTL"),
        ];
        for (setting, value, bound, name) in bounded {
            if let Some(value) = value.filter(|v| *v > bound) {
                return Err(Error::Config(format!(
                    "{setting} {value:?} is longer than {name} ({bound:?}); use a shorter one"
                )));
            }
        }
        crate::keys::check_prefix(&self.key_prefix)?;
        if let Some(label) = &self.holder_label {
            crate::value::check_label(label)?;
        }
        if self.acquire_timeout == Some(Duration::ZERO) {
            return Err(Error::Config(
                "acquire timeout is zero: no attempt could start; use None or a positive duration"
                    .to_owned(),
            ));
        }
        Ok(quorum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_quorum_is_a_majority() {
        let config = Config::default();
        assert_eq!(config.validate(1).ok(), Some(1));
        assert_eq!(config.validate(2).ok(), Some(2));
        assert_eq!(config.validate(3).ok(), Some(2));
        assert_eq!(config.validate(5).ok(), Some(3));
        assert_eq!(config.validate(6).ok(), Some(4));
    }

    #[test]
    fn quorum_of_half_or_less_is_rejected_with_the_valid_range() {
        let err = Config::default().with_quorum(2).validate(5).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::Config(_)));
        assert!(
            text.contains("quorum 2") && text.contains("3 ..= 5"),
            "{text}"
        );
        assert!(Config::default().with_quorum(0).validate(5).is_err());
    }

    #[test]
    fn quorum_above_node_count_is_rejected() {
        let text = Config::default()
            .with_quorum(6)
            .validate(5)
            .unwrap_err()
            .to_string();
        assert!(text.contains("quorum 6"), "{text}");
    }

    #[test]
    fn quorum_of_all_nodes_is_accepted() {
        assert_eq!(Config::default().with_quorum(5).validate(5).ok(), Some(5));
    }

    #[test]
    fn drift_factor_nan_negative_or_one_is_rejected() {
        for bad in [f64::NAN, -0.1, 1.0, 2.5, f64::INFINITY] {
            let err = Config::default()
                .with_drift(bad, crate::DEFAULT_DRIFT_PADDING)
                .validate(5)
                .unwrap_err();
            assert!(err.to_string().contains("drift factor"), "{bad}: {err}");
        }
        assert!(
            Config::default()
                .with_drift(0.0, crate::DEFAULT_DRIFT_PADDING)
                .validate(5)
                .is_ok()
        );
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        /// A duration in ms around the bounds: up to 20 years.
        fn span() -> impl Strategy<Value = Duration> {
            (1u64..20 * 365 * 86_400_000).prop_map(Duration::from_millis)
        }

        proptest! {
            #[test]
            fn each_duration_setting_is_accepted_exactly_up_to_its_bound(d in span()) {
                let settings: [(Config, Duration); 7] = [
                    (Config::default().with_drift(crate::DEFAULT_DRIFT_FACTOR, d), MAX_TTL),
                    (Config::default().with_min_validity(d), MAX_TTL),
                    (Config::default().with_retry_delay(d), MAX_WAIT),
                    (Config::default().with_retry_jitter(d), MAX_WAIT),
                    (Config::default().with_wait(d), MAX_TTL),
                    (Config::default().with_node_timeout(d), MAX_WAIT),
                    (Config::default().with_max_hold(d), MAX_TTL),
                ];
                for (config, bound) in settings {
                    prop_assert_eq!(config.validate(5).is_ok(), d <= bound, "{:?}", config);
                }
            }
        }
    }

    #[test]
    fn zero_node_timeout_and_zero_acquire_timeout_are_rejected() {
        let config = Config::default().with_node_timeout(Duration::ZERO);
        assert!(
            config
                .validate(5)
                .unwrap_err()
                .to_string()
                .contains("node timeout")
        );
        let config = Config::default().with_wait(Duration::ZERO);
        assert!(
            config
                .validate(5)
                .unwrap_err()
                .to_string()
                .contains("acquire timeout")
        );
    }
}
