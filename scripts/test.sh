#!/usr/bin/env bash
# Runs every test (unit, integration against local redis-server nodes, doc tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
# --show-output prints the per-scenario figures of the fault tests.
cargo test --all-features "$@" -- --show-output
