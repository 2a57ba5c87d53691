#!/usr/bin/env bash
# What a batched extension costs one server, per lock, and where it goes:
# scripts/batch-floor.py (its docstring says what each variant is) with
# redis-server and valgrind installed.
#
#   bash scripts/batch-floor.sh
#   LOCKS=1280 PER=10 bash scripts/batch-floor.sh batched
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }
exec python3 scripts/batch-floor.py "$@"
