#!/usr/bin/env bash
# Server-side instructions per acquire+release pair, summed over the five
# redis-server nodes, for redquorum (release notifications on, nobody
# waiting), redquorum with notifications off, and rslock.
#
#   bash scripts/server-instructions.sh                  # TASKS=64, K1/K2 per method
#   K1=6400 K2=25600 TASKS=1 bash scripts/server-instructions.sh
#   METHOD=callgrind bash scripts/server-instructions.sh
#   METHOD=perf EVENT=task-clock bash scripts/server-instructions.sh   # server CPU ms instead
#   LIBS="ours rslock" bash scripts/server-instructions.sh
#
# For each library, benches/peers' `pairs` driver starts five local
# redis-server processes, warms up and prints their pids (`--serve`); the
# script then measures the servers around two batches of K1 and K2 pairs:
#   METHOD=perf       `perf stat -e $EVENT -p <the five pids>` (default
#                     EVENT=instructions:u; needs hardware counters);
#   METHOD=callgrind  the servers run under `valgrind --tool=callgrind`
#                     (REDIS_SERVER_BIN points at a wrapper; `--hz 1` to
#                     keep the timer work of the slowed-down servers
#                     small), counters zeroed before and dumped after each
#                     batch with callgrind_control; slower, but exact and
#                     available where the CPU exposes no counters (VMs);
#   METHOD=auto       (default) perf if `instructions:u` is supported here,
#                     else callgrind.
# Per pair = ((S(K2) - r T(K2)) - (S(K1) - r T(K1))) / (K2 - K1), where S is
# the count over a batch's window, T the window's length and r the count
# per second of the same servers idle (IDLE_SECS, default 3, measured
# first): the fixed part of each window (perf attaching, control
# commands) cancels out, and so does the servers' timer work, which under
# callgrind would otherwise be charged to the pairs. `uncorrected` is
# (S(K2) - S(K1)) / (K2 - K1).
# Only processes this script starts are signalled (perf, by its pid); the
# servers belong to the driver, which kills them when it exits.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
METHOD=${METHOD:-auto}
EVENT=${EVENT:-instructions:u}
TASKS=${TASKS:-64}
LIBS=${LIBS:-ours ours-quiet rslock}
IDLE_SECS=${IDLE_SECS:-3}
if [ "$METHOD" = auto ]; then
  if command -v perf >/dev/null &&
    perf stat -e instructions:u -x, true 2>&1 >/dev/null | grep -q '^[0-9]'; then
    METHOD=perf
  else
    METHOD=callgrind
  fi
fi
case "$METHOD" in
  perf) K1=${K1:-5120} K2=${K2:-20480} ;;
  callgrind)
    command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }
    K1=${K1:-640} K2=${K2:-2560}
    EVENT=Ir
    ;;
  *) echo "METHOD must be auto, perf or callgrind, not $METHOD" >&2; exit 2 ;;
esac

if [ $((K1 % TASKS)) != 0 ] || [ $((K2 % TASKS)) != 0 ] || [ "$K2" -le "$K1" ]; then
  echo "K1 < K2 must be multiples of TASKS=$TASKS (K1=$K1, K2=$K2)" >&2
  exit 2
fi
(cd benches/peers && cargo build --release --bin pairs -q)
bin=$PWD/benches/peers/target/release/pairs
out=$(mktemp -d)
perf_pid=
cleanup() {
  if [ -n "$perf_pid" ]; then kill -INT "$perf_pid" 2>/dev/null || true; fi
  if [ -n "${DRV_PID:-}" ]; then
    # End of input: the driver stops and kills its servers.
    eval "exec ${DRV[1]}>&-" 2>/dev/null || true
    wait "$DRV_PID" 2>/dev/null || true
  fi
  rm -rf "$out"
}
trap cleanup EXIT

if [ "$METHOD" = callgrind ]; then
  real=${REDIS_SERVER_BIN:-$(command -v redis-server)}
  cat > "$out/redis-server" <<EOF
#!/bin/sh
exec valgrind --tool=callgrind -q --callgrind-out-file=$out/cg.%p "$real" "\$@" --hz 1
EOF
  chmod +x "$out/redis-server"
  export REDIS_SERVER_BIN=$out/redis-server
fi

# measure PIDS K DUMP: sets `total` to the event's sum over the servers
# during a batch of K pairs, or IDLE_SECS of no traffic for K = 0, and
# `secs` to the window's length (DUMP: the callgrind dump number, 1, 2, ..).
total=
secs=
measure() {
  local pids=$1 k=$2 dump=$3 line start
  start=$(date +%s%N)
  case "$METHOD" in
    perf)
      perf stat -e "$EVENT" -x, -p "$pids" -o "$out/perf" &
      perf_pid=$!
      sleep 0.5
      ;;
    callgrind)
      for p in ${pids//,/ }; do callgrind_control -z "$p" >>"$out/control.log" 2>&1; done
      ;;
  esac
  if [ "$k" = 0 ]; then
    sleep "$IDLE_SECS"
  else
    echo "run $k" >&"${DRV[1]}"
    read -r -t 900 -u "${DRV[0]}" line || { echo "driver did not answer" >&2; exit 1; }
    case "$line" in done*) ;; *) echo "driver said: $line" >&2; exit 1 ;; esac
  fi
  case "$METHOD" in
    perf)
      kill -INT "$perf_pid"
      wait "$perf_pid" || true
      perf_pid=
      total=$(awk -F, -v ev="$EVENT" '$3 == ev { print $1 }' "$out/perf")
      ;;
    callgrind)
      total=0
      for p in ${pids//,/ }; do
        callgrind_control -d "$p" >>"$out/control.log" 2>&1
        total=$((total + $(awk '/^summary:/ { print $2 }' "$out/cg.$p.$dump")))
      done
      ;;
  esac
  secs=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { print (b - a) / 1e9 }')
  case "$total" in [0-9]*) ;; *) echo "no count for $EVENT: ${total:-nothing}" >&2; exit 1 ;; esac
}

echo "server $EVENT per acquire+release pair, sum over 5 nodes ($METHOD, TASKS=$TASKS, K1=$K1, K2=$K2)"
printf '%-11s %6s %16s %14s %14s %12s %10s\n' lib tasks per_pair per_node uncorrected idle_per_s K2_secs
for lib in $LIBS; do
  coproc DRV { exec "$bin" --lib "$lib" --tasks "$TASKS" --serve 2>"$out/driver.err"; }
  read -r -t 300 -u "${DRV[0]}" line || { cat "$out/driver.err" >&2; exit 1; }
  pids=${line#ready pids=}
  measure "$pids" 0 1
  s0=$total t0=$secs
  measure "$pids" "$K1" 2
  s1=$total t1=$secs
  measure "$pids" "$K2" 3
  s2=$total t2=$secs
  echo exit >&"${DRV[1]}"
  wait "$DRV_PID" || true
  unset DRV_PID
  awk -v lib="$lib" -v t="$TASKS" -v k1="$K1" -v k2="$K2" \
    -v s0="$s0" -v t0="$t0" -v s1="$s1" -v t1="$t1" -v s2="$s2" -v t2="$t2" 'BEGIN {
      idle = s0 / t0
      p = ((s2 - idle * t2) - (s1 - idle * t1)) / (k2 - k1)
      raw = (s2 - s1) / (k2 - k1)
      printf "%-11s %6d %16.6g %14.6g %14.6g %12.6g %10.3g\n", lib, t, p, p / 5, raw, idle, t2
    }'
done
