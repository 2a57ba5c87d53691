//! Validation of call arguments: resource names and TTLs.

use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, MAX_TTL};
use crate::error::{Error, Result};
use crate::quorum;

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
        let millis = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if millis == 0 {
            return Err(Error::InvalidArgument(format!(
                "TTL {ttl:?} is below 1 ms, the smallest TTL Redis can apply"
            )));
        }
        let ttl = Duration::from_millis(millis);
        let drift = quorum::drift(ttl, config.drift_factor(), config.drift_padding());
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
}

/// `resources` without repeats, in the order of their first appearance.
/// Linear: a hash set of the names seen.
pub(crate) fn unique_names(resources: &[&str]) -> Vec<String> {
    let mut seen = std::collections::HashSet::with_capacity(resources.len());
    resources
        .iter()
        .filter(|r| seen.insert(**r))
        .map(|r| (*r).to_owned())
        .collect()
}

/// Checks resource names: at least one, none empty.
pub(crate) fn check_resources(resources: &[&str]) -> Result<()> {
    if resources.is_empty() {
        return Err(Error::InvalidArgument(
            "no resource given: name at least one resource to lock".to_owned(),
        ));
    }
    if resources.iter().any(|r| r.is_empty()) {
        return Err(Error::InvalidArgument(
            "resource name is empty: name the thing the lock protects".to_owned(),
        ));
    }
    Ok(())
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
    fn repeated_names_count_once_in_the_order_first_given() {
        assert_eq!(unique_names(&["b", "a", "b", "c", "a"]), ["b", "a", "c"]);
        assert!(unique_names(&[]).is_empty());
    }

    #[test]
    fn empty_resource_or_no_resource_is_rejected() {
        assert!(check_resources(&[]).is_err());
        assert!(check_resources(&["a", ""]).is_err());
        assert!(check_resources(&["a"]).is_ok());
    }
}
