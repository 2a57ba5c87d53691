#!/usr/bin/env bash
# The servers' instructions per extended lock while many locks are held
# and auto-extended: examples/holders.rs with its five redis-server nodes
# run under `valgrind --tool=callgrind` (exact counts, where the CPU
# exposes no counters). Everything else is as the example says; under
# callgrind the servers are about fifty times slower, so keep the rate of
# extensions (HOLDERS / TTL) within what they can answer.
#
#   HOLDERS=100000 TTL_MS=300000 SECS=60 bash scripts/holders-instructions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
real=${REDIS_SERVER_BIN:-$(command -v redis-server)}
cat > "$out/redis-server" <<WRAP
#!/bin/sh
exec valgrind --tool=callgrind -q --callgrind-out-file=$out/cg.%p "$real" "\$@" --hz 1
WRAP
chmod +x "$out/redis-server"
export NODE_TIMEOUT_MS=${NODE_TIMEOUT_MS:-2000} HOLDERS=${HOLDERS:-10000} TTL_MS=${TTL_MS:-30000} SECS=${SECS:-30} PROBE_SECS=${PROBE_SECS:-2}
REDIS_SERVER_BIN=$out/redis-server CALLGRIND_DIR=$out \
  cargo run --release --features testkit --example holders
