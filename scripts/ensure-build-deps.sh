#!/usr/bin/env bash
# Installs what the tls-native-tls feature needs to build (OpenSSL's headers
# and pkg-config, for openssl-sys) when it is missing (Debian/Ubuntu).
# `cargo clippy --all-features` and `cargo test --all-features` build it.
set -euo pipefail
if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists openssl; then
  exit 0
fi
echo "OpenSSL development files not found; installing pkg-config and libssl-dev with apt-get" >&2
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq pkg-config libssl-dev >/dev/null
pkg-config --exists openssl
