//! The examples the getters of [`Config`] had when they were public, as
//! unit tests: each setter sets what its getter reads, and the defaults
//! are the documented ones.

#[test]
fn with_connect_timeout_sets_what_its_getter_reads() {
    use std::time::Duration;
    let config = crate::Config::default().with_connect_timeout(Duration::from_secs(3));
    assert_eq!(config.connect_timeout(), Duration::from_secs(3));
}

#[test]
fn connect_timeout_reads_the_documented_default() {
    use std::time::Duration;
    assert_eq!(
        crate::Config::default().connect_timeout(),
        Duration::from_secs(1)
    );
}

#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
#[test]
fn tls_certificates_reads_the_documented_default() {
    assert!(crate::Config::default().tls_certificates().is_none());
}

#[test]
fn with_metrics_resource_label_sets_what_its_getter_reads() {
    let config = crate::Config::default().with_metrics_resource_label(true);
    assert!(config.metrics_resource_label());
}

#[test]
fn metrics_resource_label_reads_the_documented_default() {
    assert!(!crate::Config::default().metrics_resource_label());
}

#[test]
fn with_quorum_sets_what_its_getter_reads() {
    let config = crate::Config::default().with_quorum(4);
    assert_eq!(config.quorum(), Some(4));
}

#[test]
fn quorum_reads_the_documented_default() {
    assert_eq!(crate::Config::default().quorum(), None);
}

#[test]
fn with_drift_sets_what_its_getters_read() {
    use std::time::Duration;
    let config = crate::Config::default().with_drift(0.02, Duration::from_millis(5));
    assert_eq!(config.drift_factor(), 0.02);
    assert_eq!(config.drift_padding(), Duration::from_millis(5));
}

#[test]
fn drift_factor_reads_the_documented_default() {
    assert_eq!(crate::Config::default().drift_factor(), 0.01);
}

#[test]
fn drift_padding_reads_the_documented_default() {
    use std::time::Duration;
    assert_eq!(
        crate::Config::default().drift_padding(),
        Duration::from_millis(2)
    );
}

#[test]
fn with_min_validity_sets_what_its_getter_reads() {
    use std::time::Duration;
    let config = crate::Config::default().with_min_validity(Duration::from_millis(100));
    assert_eq!(config.min_validity(), Duration::from_millis(100));
}

#[test]
fn min_validity_reads_the_documented_default() {
    assert!(crate::Config::default().min_validity().is_zero());
}

#[test]
fn with_node_timeout_sets_what_its_getter_reads() {
    use std::time::Duration;
    let config = crate::Config::default().with_node_timeout(Duration::from_millis(50));
    assert_eq!(config.node_timeout(), Duration::from_millis(50));
}

#[test]
fn node_timeout_reads_the_documented_default() {
    use std::time::Duration;
    assert_eq!(
        crate::Config::default().node_timeout(),
        Duration::from_millis(100)
    );
}

#[test]
fn with_key_prefix_sets_what_its_getter_reads() {
    let config = crate::Config::default().with_key_prefix("billing:");
    assert_eq!(config.key_prefix(), "billing:");
}

#[test]
fn key_prefix_reads_the_documented_default() {
    assert_eq!(crate::Config::default().key_prefix(), "redquorum:");
}

#[test]
fn with_fencing_sets_what_its_getter_reads() {
    let config = crate::Config::default().with_fencing(true);
    assert!(config.fencing());
}

#[test]
fn fencing_reads_the_documented_default() {
    assert!(!crate::Config::default().fencing());
}

#[test]
fn with_release_notifications_sets_what_its_getter_reads() {
    let config = crate::Config::default().with_release_notifications(false);
    assert!(!config.release_notifications());
}

#[test]
fn release_notifications_reads_the_documented_default() {
    assert!(crate::Config::default().release_notifications());
}

#[test]
fn with_strict_checks_sets_what_its_getter_reads() {
    let config = crate::Config::default().with_strict_checks(true);
    assert!(config.strict_checks());
}

#[test]
fn strict_checks_reads_the_documented_default() {
    assert!(!crate::Config::default().strict_checks());
}

#[test]
fn with_holder_label_sets_what_its_getter_reads() {
    let config = crate::Config::default().with_holder_label("web-3:4242");
    assert_eq!(config.holder_label(), Some("web-3:4242"));
}

#[test]
fn holder_label_reads_the_documented_default() {
    assert_eq!(crate::Config::default().holder_label(), None);
}

#[test]
fn with_restart_guard_sets_what_its_getter_reads() {
    use std::time::Duration;

    let config = crate::Config::default().with_restart_guard(Duration::from_secs(60));
    assert_eq!(config.restart_guard(), Some(Duration::from_secs(60)));
    // 60 s * 1.01 + 2 ms
    assert_eq!(config.quarantine(), Some(Duration::from_millis(60_602)));
}

#[test]
fn restart_guard_reads_the_documented_default() {
    assert_eq!(crate::Config::default().restart_guard(), None);
}

#[test]
fn with_retry_count_sets_what_its_getter_reads() {
    let config = crate::Config::default().with_retries(0);
    assert_eq!(config.retry_count(), 0);
}

#[test]
fn retry_count_reads_the_documented_default() {
    assert_eq!(crate::Config::default().retry_count(), 10);
}

#[test]
fn with_retry_delay_sets_what_its_getter_reads() {
    use std::time::Duration;
    let config = crate::Config::default().with_retry_delay(Duration::from_millis(20));
    assert_eq!(config.retry_delay(), Duration::from_millis(20));
}

#[test]
fn retry_delay_reads_the_documented_default() {
    use std::time::Duration;
    assert_eq!(
        crate::Config::default().retry_delay(),
        Duration::from_millis(200)
    );
}

#[test]
fn with_retry_jitter_sets_what_its_getter_reads() {
    use std::time::Duration;
    let config = crate::Config::default().with_retry_jitter(Duration::ZERO);
    assert!(config.retry_jitter().is_zero());
}

#[test]
fn retry_jitter_reads_the_documented_default() {
    use std::time::Duration;
    assert_eq!(
        crate::Config::default().retry_jitter(),
        Duration::from_millis(100)
    );
}

#[test]
fn with_acquire_timeout_sets_what_its_getter_reads() {
    use std::time::Duration;
    let config = crate::Config::default().with_wait(Duration::from_secs(2));
    assert_eq!(config.acquire_timeout(), Some(Duration::from_secs(2)));
}

#[test]
fn acquire_timeout_reads_the_documented_default() {
    assert_eq!(crate::Config::default().acquire_timeout(), None);
}

#[test]
fn with_extend_at_sets_what_its_getter_reads() {
    let config = crate::Config::default().with_extend_at(0.5);
    assert_eq!(config.extend_at(), 0.5);
}

#[test]
fn extend_at_reads_the_documented_default() {
    assert_eq!(
        crate::Config::default().extend_at(),
        crate::DEFAULT_EXTEND_AT
    );
}

#[test]
fn with_max_extensions_sets_what_its_getter_reads() {
    let config = crate::Config::default().with_max_extensions(3);
    assert_eq!(config.max_extensions(), Some(3));
}

#[test]
fn max_extensions_reads_the_documented_default() {
    assert_eq!(crate::Config::default().max_extensions(), None);
}

#[test]
fn with_max_hold_sets_what_its_getter_reads() {
    use std::time::Duration;
    let config = crate::Config::default().with_max_hold(Duration::from_secs(600));
    assert_eq!(config.max_hold(), Some(Duration::from_secs(600)));
}

#[test]
fn max_hold_reads_the_documented_default() {
    assert_eq!(crate::Config::default().max_hold(), None);
}

#[test]
fn with_reseed_restarted_nodes_sets_what_its_getter_reads() {
    let config = crate::Config::default().with_reseed_restarted_nodes(true);
    assert!(config.reseed_restarted_nodes());
}

#[test]
fn reseed_restarted_nodes_reads_the_documented_default() {
    assert!(!crate::Config::default().reseed_restarted_nodes());
}
