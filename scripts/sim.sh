#!/usr/bin/env bash
# Runs the deterministic simulation: the regression seeds, the negative
# controls, the determinism check, then a random batch of SECONDS (default
# 60) on every core. Ends with one line:
#   schedules=N violations=V schedules_per_min=R seed_range=A..B
# and exits non-zero on any violation. SIM_FIRST_SEED picks the batch's
# first seed; SIM_CHECK_DETERMINISM=1 runs each of its first 100 seeds twice.
# The `sim` profile (release, fat LTO, one codegen unit): about four times
# as many schedules as a debug build, and a seventh more than plain release.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-${SIM_SECONDS:-60}}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The fixed part first (regression seeds, negative controls, replays), then
# the random batch alone, so that its rate counts only its own schedules on
# cores it does not share with the fixed part.
cargo test --profile sim --features sim --test sim -- --nocapture \
  --skip a_random_batch_finds_no_violation 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
SIM_SECONDS="$seconds" cargo test --profile sim --features sim --test sim -- --nocapture \
  --exact a_random_batch_finds_no_violation 2>&1 | tee -a "$log"
batch_status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] && status=$batch_status
summary=$(grep -E '^schedules=[0-9]+ ' "$log" | tail -n 1)
if [ -z "$summary" ]; then
  echo "schedules=0 violations=unknown schedules_per_min=0 seed_range=none"
  exit 1
fi
echo "$summary"
exit "$status"
