//! The integration tests need the `testkit` feature (local redis-server
//! nodes with fault injection). The package's dev-dependency on itself
//! turns it on, so that a plain `cargo test` runs every test; were it
//! lost, the other test files would compile to nothing, and this test says
//! so.

#[test]
fn a_plain_cargo_test_runs_the_integration_tests_with_the_testkit() {
    let enabled = std::hint::black_box(cfg!(feature = "testkit"));
    assert!(
        enabled,
        "the integration tests need the testkit feature: keep the dev-dependency of the \
         package on itself with features testkit and cli, or run `bash scripts/test.sh`"
    );
}

#[test]
fn a_plain_cargo_test_runs_the_redis_cluster_tests() {
    let enabled = std::hint::black_box(cfg!(feature = "cluster"));
    assert!(
        enabled,
        "tests/redis_cluster.rs needs the cluster feature: keep it in the dev-dependency of \
         the package on itself"
    );
}
