#!/usr/bin/env bash
# Installs redis-server from the distribution when it is missing (Debian/Ubuntu).
# Nodes from REDQUORUM_NODES need no local server, but the fault-injection
# tests always run local ones, so it is installed either way.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1 || [ -n "${REDIS_SERVER_BIN:-}" ]; then
  exit 0
fi
echo "redis-server not found; installing it with apt-get" >&2
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
command -v redis-server >/dev/null
