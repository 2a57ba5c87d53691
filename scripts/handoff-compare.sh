#!/usr/bin/env bash
# The contended hand-off (examples/handoff) of an earlier commit and of the
# working tree in the same run: both are built with this tree's
# examples/handoff.rs, so they run the same harness, then they alternate,
# ROUNDS rounds (default 2) of SECS seconds each (default 8).
#
#   bash scripts/handoff-compare.sh bc6c6e2
#   ROUNDS=3 SECS=10 HOLD=tokio bash scripts/handoff-compare.sh bc6c6e2
#
# The earlier commit is checked out in a temporary worktree and built in
# target/handoff-compare (kept, so that a second run does not rebuild it).
# Environment variables of the example (HOLD, HOLD_US, RETRY_MS, ...) pass
# through to both.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: scripts/handoff-compare.sh REV}
rounds=${ROUNDS:-2}
secs=${SECS:-8}
bash scripts/ensure-redis.sh
root=$(pwd)
old=$(mktemp -d)
cleanup() {
  git worktree remove --force "$old" >/dev/null 2>&1 || true
  rm -rf "$old"
}
trap cleanup EXIT
git worktree add --detach "$old" "$rev" >/dev/null 2>&1
cp examples/handoff.rs "$old/examples/handoff.rs"
(cd "$old" && CARGO_TARGET_DIR="$root/target/handoff-compare" \
  cargo build --release --features testkit --example handoff -q)
cargo build --release --features testkit --example handoff -q
declare -A bin=(
  [old]="$root/target/handoff-compare/release/examples/handoff"
  [new]="$root/target/release/examples/handoff"
)
label() { if [ "$1" = old ]; then echo "$rev"; else echo "working tree"; fi; }
for ((r = 0; r < rounds; r++)); do
  if ((r % 2 == 0)); then order="old new"; else order="new old"; fi
  for which in $order; do
    echo "== round $((r + 1)): $(label "$which")"
    SECS=$secs "${bin[$which]}" | grep -E '^(acquisitions|gap)'
  done
done
