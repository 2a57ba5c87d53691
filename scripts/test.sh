#!/usr/bin/env bash
# Runs every test (unit, integration against local redis-server nodes, doc tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
bash scripts/ensure-build-deps.sh
# --show-output prints the per-scenario figures of the fault tests.
cargo test --all-features "$@" -- --show-output
# With both TLS features on, redis uses rustls: the TLS tests run once more
# with each backend alone (native-tls; rustls without tls-rustls-insecure).
if [ "$#" -eq 0 ]; then
  # The demo's own unit tests (its SVG timeline).
  cargo test -p redquorum-demo
  cargo test --features testkit,tls-native-tls --test tls
  cargo test --features testkit,tls-rustls --test tls
fi
