#!/usr/bin/env bash
# The simulation's kill rate: cargo-mutants mutates the coordinator (the
# lock rounds, the quorum tally, fan-out and gates, validity arithmetic, attempt
# classification, the restart guard's client side) and runs the
# simulation against each mutant. Prints cargo-mutants' caught / missed /
# unviable counts; mutants.out/ keeps the lists (missed.txt is the work:
# an invariant that kills it, or why it is equivalent).
#
#   bash scripts/mutants.sh                 # every file below
#   bash scripts/mutants.sh src/ttl.rs      # some of them
#   SIM_SECONDS=20 bash scripts/mutants.sh  # a longer batch per mutant
#   MUTANTS_SHARD=0/10 bash scripts/mutants.sh  # every tenth mutant (a sample)
#   MUTANTS_RE='deletes_sent|trust_status' bash scripts/mutants.sh
#                                           # the mutants whose names match
#
# Mutants build with the `mutants` profile (dependencies optimised: the
# simulation runs about four times as many schedules a second as in a debug
# build), and the simulation stops at its first failing seed without
# shrinking it (SIM_FAIL_FAST). The first build compiles the dependencies
# optimised (minutes); after it, a mutant costs a rebuild of a few seconds
# and a sim run of ten to twenty. Mutants run in a random order, so a run
# stopped early is a random sample.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo mutants --version >/dev/null 2>&1; then
  echo "cargo-mutants not found; installing it with cargo install" >&2
  cargo install --locked cargo-mutants
fi
files=("$@")
if [ "${#files[@]}" -eq 0 ]; then
  files=(src/lock src/quorum src/gates.rs src/ttl.rs src/error/attempts.rs src/node/restart_guard.rs src/redlock/trust.rs)
fi
args=()
for f in "${files[@]}"; do
  # A path that moved would mutate nothing, silently.
  if [ ! -e "$f" ]; then
    echo "mutants.sh: no such file or folder: $f" >&2
    exit 2
  fi
  if [ -d "$f" ]; then
    args+=(--file "$f/*.rs")
  else
    args+=(--file "$f")
  fi
done
# Each mutant: the regression seeds, the controls and a short fixed batch.
export SIM_SECONDS="${SIM_SECONDS:-5}" SIM_FIRST_SEED="${SIM_FIRST_SEED:-1}"
export SIM_FAIL_FAST=1
if [ -n "${MUTANTS_RE:-}" ]; then
  args+=(--re "$MUTANTS_RE")
fi
if [ -n "${MUTANTS_SHARD:-}" ]; then
  args+=(--shard "$MUTANTS_SHARD" --sharding round-robin)
fi
# Only the simulation is built and run for each mutant (not every test
# target), with metrics on: the simulation checks what they count.
cargo mutants "${args[@]}" --features sim,metrics --profile mutants --timeout-multiplier 3 \
  --jobs 1 --shuffle --cargo-arg=--test --cargo-arg=sim
