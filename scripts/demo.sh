#!/usr/bin/env bash
# Runs the demo: five local redis-server nodes, contending workers, two nodes
# killed and restarted midway. Set REDLOCK_NODES to use your own nodes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
cargo run --release --features testkit --example demo -- "$@"
