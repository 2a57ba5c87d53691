//! The integration tests need the `testkit` feature; without it they would
//! compile to nothing, so this test says how to run them instead.

#[test]
fn integration_tests_are_run_with_the_testkit_feature() {
    let enabled = std::hint::black_box(cfg!(feature = "testkit"));
    assert!(
        enabled,
        "the integration tests need local redis-server nodes: run `bash scripts/test.sh` \
         (or `cargo test --all-features`)"
    );
}
