//! Time arithmetic: TTLs checked against the config with their drift
//! allowance, the validity left after a round, and retry pauses.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::{Config, MAX_TTL};
use crate::error::{Error, Result};

/// A TTL checked against the config: whole milliseconds (what `PX` takes)
/// and its drift allowance.
#[derive(Clone, Debug)]
pub(crate) struct Ttl {
    /// The TTL the nodes apply: the requested one, truncated to whole ms.
    pub(crate) ttl: Duration,
    /// `ttl` in ms as the nodes read it.
    pub(crate) millis: Arc<str>,
    /// Clock-drift allowance for this TTL.
    pub(crate) drift: Duration,
}

impl Ttl {
    pub(crate) fn new(ttl: Duration, config: &Config) -> Result<Self> {
        if ttl > MAX_TTL {
            return Err(Error::InvalidArgument(format!(
                "TTL {ttl:?} is longer than the {} days accepted; use a shorter TTL and extend",
                MAX_TTL.as_secs() / 86_400
            )));
        }
        if let Some(max_ttl) = config.restart_guard()
            && ttl > max_ttl
        {
            return Err(Error::InvalidArgument(format!(
                "TTL {ttl:?} is longer than the restart guard's max_ttl ({max_ttl:?}): a \
                 restarted node waits only max_ttl (plus drift) before it votes again; use a \
                 TTL up to max_ttl and extend for longer work, or raise max_ttl in \
                 Config::with_restart_guard"
            )));
        }
        let millis = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if millis == 0 {
            return Err(Error::InvalidArgument(format!(
                "TTL {ttl:?} is below 1 ms, the smallest TTL Redis can apply"
            )));
        }
        let ttl = Duration::from_millis(millis);
        let drift = config.drift_for(ttl);
        let floor = drift.saturating_add(config.min_validity());
        if ttl <= floor {
            return Err(Error::InvalidArgument(format!(
                "TTL {ttl:?} leaves no validity: it must exceed the clock-drift allowance \
                 ({drift:?}) plus min_validity ({:?}); use a longer TTL",
                config.min_validity()
            )));
        }
        Ok(Ttl {
            ttl,
            millis: millis.to_string().into(),
            drift,
        })
    }

    /// What is left of this TTL `elapsed` after the round began, less the
    /// drift allowance; `None` when nothing is.
    pub(crate) fn validity(&self, elapsed: Duration) -> Option<Duration> {
        validity(self.ttl, elapsed, self.drift)
    }

    /// When a hold of this TTL, whose round began at `start`, stops being
    /// valid: the TTL less the drift allowance after `start`.
    pub(crate) fn deadline(&self, start: Instant) -> Instant {
        start + self.ttl - self.drift
    }
}

/// What is left of `ttl` after `elapsed` and `drift`, or `None` when nothing is.
fn validity(ttl: Duration, elapsed: Duration, drift: Duration) -> Option<Duration> {
    ttl.checked_sub(elapsed)?
        .checked_sub(drift)
        .filter(|left| !left.is_zero())
}

/// The pause before the next attempt: `base` moved by `jitter * (2 * unit - 1)`,
/// where `unit` is a uniform draw in `[0, 1]`; never below zero.
pub(crate) fn retry_pause(base: Duration, jitter: Duration, unit: f64) -> Duration {
    let unit = if unit.is_finite() {
        unit.clamp(0.0, 1.0)
    } else {
        0.5
    };
    let spread = jitter.as_secs_f64() * (2.0 * unit - 1.0);
    Duration::try_from_secs_f64((base.as_secs_f64() + spread).max(0.0)).unwrap_or(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn zero_ttl_is_rejected() {
        let err = Ttl::new(Duration::ZERO, &Config::default()).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }

    #[test]
    fn sub_millisecond_ttl_is_rejected() {
        assert!(Ttl::new(Duration::from_micros(900), &Config::default()).is_err());
    }

    #[test]
    fn ttl_not_above_drift_is_rejected_naming_the_drift() {
        let err = Ttl::new(2 * MS, &Config::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("drift"), "{err}");
        assert!(Ttl::new(3 * MS, &Config::default()).is_ok());
    }

    #[test]
    fn ttl_not_above_drift_plus_min_validity_is_rejected() {
        let config = Config::default().with_min_validity(100 * MS);
        assert!(Ttl::new(100 * MS, &config).is_err());
        assert!(Ttl::new(200 * MS, &config).is_ok());
    }

    #[test]
    fn with_the_restart_guard_a_ttl_above_max_ttl_is_rejected_naming_max_ttl() {
        let config = Config::default().with_restart_guard(300 * MS);
        let err = Ttl::new(301 * MS, &config).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("max_ttl")),
            "{err}"
        );
        assert!(Ttl::new(300 * MS, &config).is_ok());
    }

    #[test]
    fn ttl_beyond_ten_years_is_rejected() {
        assert!(Ttl::new(MAX_TTL + MS, &Config::default()).is_err());
        assert!(Ttl::new(Duration::MAX, &Config::default()).is_err());
        assert!(Ttl::new(MAX_TTL, &Config::default()).is_ok());
    }

    #[test]
    fn ttl_is_truncated_to_whole_milliseconds() {
        let ttl = Ttl::new(Duration::from_micros(1_500_900), &Config::default()).unwrap();
        assert_eq!(ttl.ttl, 1500 * MS);
        assert_eq!(&*ttl.millis, "1500");
        assert_eq!(ttl.drift, 17 * MS);
    }

    #[test]
    fn validity_subtracts_elapsed_and_drift() {
        assert_eq!(validity(1000 * MS, 30 * MS, 12 * MS), Some(958 * MS));
    }

    #[test]
    fn validity_is_none_when_exhausted_or_exactly_zero() {
        assert_eq!(validity(100 * MS, 98 * MS, 2 * MS), None);
        assert_eq!(validity(100 * MS, 99 * MS, 2 * MS), None);
        assert_eq!(validity(100 * MS, 200 * MS, 2 * MS), None);
    }

    #[test]
    fn retry_pause_spans_base_plus_minus_jitter() {
        assert_eq!(retry_pause(200 * MS, 100 * MS, 0.0), 100 * MS);
        assert_eq!(retry_pause(200 * MS, 100 * MS, 0.5), 200 * MS);
        assert_eq!(retry_pause(200 * MS, 100 * MS, 1.0), 300 * MS);
    }

    #[test]
    fn retry_pause_never_goes_below_zero_and_ignores_bad_draws() {
        assert_eq!(retry_pause(10 * MS, 100 * MS, 0.0), Duration::ZERO);
        assert_eq!(retry_pause(10 * MS, Duration::ZERO, f64::NAN), 10 * MS);
        assert_eq!(retry_pause(10 * MS, 4 * MS, 7.0), 14 * MS);
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn validity_is_what_is_left_and_never_more_than_the_ttl(
                ttl in 0u64..10_000_000, elapsed in 0u64..10_000_000, drift in 0u64..1_000_000,
            ) {
                let (ttl, elapsed, drift) = (Duration::from_micros(ttl), Duration::from_micros(elapsed), Duration::from_micros(drift));
                match validity(ttl, elapsed, drift) {
                    Some(left) => {
                        prop_assert!(!left.is_zero());
                        prop_assert_eq!(left + elapsed + drift, ttl);
                    }
                    None => prop_assert!(elapsed + drift >= ttl),
                }
            }

            #[test]
            fn a_retry_pause_stays_within_the_jitter_around_the_delay(
                base in 0u64..3_600_000, jitter in 0u64..3_600_000, unit in any::<f64>(),
            ) {
                let (base, jitter) = (Duration::from_millis(base), Duration::from_millis(jitter));
                let pause = retry_pause(base, jitter, unit);
                let slack = Duration::from_micros(1);
                prop_assert!(pause <= base + jitter + slack);
                prop_assert!(pause + jitter + slack >= base);
            }

        }
    }
}
