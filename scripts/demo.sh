#!/usr/bin/env bash
# Runs the demo: five local redis-server nodes, contending workers, two nodes
# killed and restarted midway. Set REDQUORUM_NODES to use your own nodes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
# demo/ is a workspace member of its own: its first build compiles the
# library and what the demo needs (93 crates), not the test and bench
# dependencies (238 in all). The `demo` profile (dev without debug info)
# is enough for a demo of correctness: the same acquisitions as
# --release for less than half the compile time.
cargo run --profile demo -p redquorum-demo -- "$@"
