#!/usr/bin/env bash
# Client instructions and allocations per acquire+release pair, for
# redquorum, rslock, a hand-written five-node floor on redis-rs connections
# and the same bytes on raw sockets (no client library), sequential and
# with 64 tasks: the noise-free figure of the performance work.
#
#   bash scripts/instructions.sh            # K = 256 and 1024
#   K1=128 K2=512 bash scripts/instructions.sh   # K: multiples of 64
#   LIBS="ours raw" bash scripts/instructions.sh  # some of them
#
# Each run of benches/peers' `pairs` driver starts five local
# redis-server processes (callgrind does not follow children, so only the
# client is counted); subtracting the two K values cancels start-up and
# warm-up: per pair = (I(K2) - I(K1)) / (K2 - K1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }
K1=${K1:-256}
K2=${K2:-1024}
(cd benches/peers && cargo build --release --bin pairs -q)
bin=benches/peers/target/release/pairs
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

instructions() { # lib tasks pairs -> total Ir of the client
  local file="$out/cg.$1.$2.$3"
  valgrind --tool=callgrind --callgrind-out-file="$file" -q \
    "$bin" --lib "$1" --tasks "$2" --pairs "$3" > "$out/stdout" 2>/dev/null
  # The file's summary line holds the total instructions (Ir).
  awk '/^summary:/ { print $2 }' "$file"
}

printf '%-8s %-6s %14s %14s\n' lib tasks instr/pair allocs/pair
for tasks in 1 64; do
  for lib in ${LIBS:-ours rslock floor raw}; do
    i1=$(instructions "$lib" "$tasks" "$K1")
    i2=$(instructions "$lib" "$tasks" "$K2")
    allocs=$("$bin" --lib "$lib" --tasks "$tasks" --pairs "$K2" | sed -n 's/.*allocs_per_pair=\([0-9.]*\).*/\1/p')
    printf '%-8s %-6s %14d %14s\n' "$lib" "$tasks" $(( (i2 - i1) / (K2 - K1) )) "$allocs"
  done
done
