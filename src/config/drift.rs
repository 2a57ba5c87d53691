//! The clock-drift allowance: how much of a TTL is set aside for the
//! nodes' clocks running at other rates than ours.

use std::time::Duration;

use super::Config;

/// The clock-drift allowance for `ttl`: `ttl * factor + padding`.
///
/// `factor` is validated to `[0, 1)` at construction; should it be anything
/// else the whole TTL is taken as drift, which makes every acquisition fail
/// safe rather than succeed unsafe.
fn drift(ttl: Duration, factor: f64, padding: Duration) -> Duration {
    let proportional = Duration::try_from_secs_f64(ttl.as_secs_f64() * factor).unwrap_or(ttl);
    proportional.saturating_add(padding)
}

impl Config {
    /// The drift allowance for `ttl`:
    /// `ttl * drift_factor + drift_padding`.
    pub(crate) fn drift_for(&self, ttl: Duration) -> Duration {
        drift(ttl, self.drift_factor, self.drift_padding)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn drift_is_factor_times_ttl_plus_padding() {
        assert_eq!(drift(10_000 * MS, 0.01, 2 * MS), 102 * MS);
        assert_eq!(drift(10_000 * MS, 0.0, Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn drift_with_an_unvalidated_factor_takes_the_whole_ttl() {
        assert_eq!(drift(100 * MS, f64::NAN, Duration::ZERO), 100 * MS);
        assert_eq!(drift(100 * MS, -1.0, Duration::ZERO), 100 * MS);
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn drift_grows_with_the_ttl_and_never_overflows(
                ttl in any::<u64>(), factor in 0.0f64..1.0, padding in any::<u64>(),
            ) {
                let (ttl, padding) = (Duration::from_millis(ttl), Duration::from_millis(padding));
                let d = drift(ttl, factor, padding);
                prop_assert!(d >= padding);
                prop_assert!(d >= drift(ttl / 2, factor, padding));
            }
        }
    }
}
