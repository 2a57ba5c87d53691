#!/usr/bin/env bash
# The server matrix: runs the integration tests that need only servers
# (not the command line, TLS, the watchdog timing, the fault scenarios,
# the model or soak runs) on every server of scripts/ensure-servers.sh (Redis 6.2.5,
# Valkey 8.0.1, Valkey 9.1.2), each selected with REDIS_SERVER_BIN. The
# whole suite runs on Debian's redis-server with scripts/test.sh.
#
#   bash scripts/test-servers.sh                  # every server, the default test binaries
#   TESTS="acl check" bash scripts/test-servers.sh
#   SERVERS="valkey-9.1.2" bash scripts/test-servers.sh
#
# The README's "Compatibility" section lists the same binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-build-deps.sh
TESTS=${TESTS:-acl acquire bad_input batched_extensions cancel check contention faults_client fencing inspect lock_many managed noscript options ownership reentrant release_notifications restart_guard runtimes shutdown testkit}
# The fault scenario of fencing (a thousand acquisitions under crashes, 35 s
# of the 45 s of tests/fencing.rs) tests the client, not the server: it
# runs on Debian's redis-server with the whole suite.
SKIP=${SKIP:-tokens_strictly_increase_over_hundreds_of_acquisitions}
args=()
for t in $TESTS; do args+=(--test "$t"); done
skips=()
for s in $SKIP; do skips+=(--skip "$s"); done
mapfile -t servers < <(bash scripts/ensure-servers.sh)
failed=()
for line in "${servers[@]}"; do
  label=${line%% *}
  bin=${line#* }
  if [ -n "${SERVERS:-}" ] && [[ " $SERVERS " != *" $label "* ]]; then
    continue
  fi
  echo "== $label ($bin)"
  if ! REDIS_SERVER_BIN=$bin cargo test --all-features --no-fail-fast "${args[@]}" -- "${skips[@]}"; then
    failed+=("$label")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "the server tests failed on: ${failed[*]}" >&2
  exit 1
fi
