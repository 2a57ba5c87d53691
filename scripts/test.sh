#!/usr/bin/env bash
# Runs every test (unit, integration against local redis-server nodes, doc tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
cargo test --all-features "$@"
