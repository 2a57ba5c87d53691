#!/usr/bin/env python3
"""What a batched extension costs one server, per lock, and where it goes.

Starts one redis-server under `valgrind --tool=callgrind` per variant,
sets LOCKS lock keys (default 12,800), then extends them all with one
variant, PER locks a call (default 128; the library's batches carry at
most 128), and prints the server's instructions per lock: its whole count
minus that of a run that sets the keys and extends nothing.

Variants:
  single   the one-lock EXTEND script (src/node/scripts.rs), PER calls
           pipelined at a time
  batched  the batched EXTEND (src/node/batch.rs), as the library sends it
  empty    a script that only builds its result (the call's parsing,
           KEYS and ARGV)
  read     `empty` plus the MGET of every value and the comparisons
  raise    `empty` plus one `PEXPIRE .. GT` a lock, no reading

The scripts of `single` and `batched` are read from the sources, so the
figures are those of the scripts the library sends.

  python3 scripts/batch-floor.py            # every variant
  LOCKS=1280 PER=10 python3 scripts/batch-floor.py batched
"""

import os
import re
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCKS = int(os.environ.get("LOCKS", "12800"))
PER = int(os.environ.get("PER", "128"))
TTL = 30000


def rust_str(path, name):
    """The text of `const NAME: &str = r"..."` (or a plain "...") in path."""
    text = open(os.path.join(ROOT, path)).read()
    raw = re.search(r'const %s: &str = r"(.*?)";' % name, text, re.S)
    if raw:
        return raw.group(1)
    plain = re.search(r'const %s: &str = "(.*?)";' % name, text, re.S)
    return plain.group(1).encode().decode("unicode_escape")


SCRIPTS = {
    "single": rust_str("src/node/scripts.rs", "OURS") + rust_str("src/node/scripts.rs", "EXTEND_LUA"),
    "batched": rust_str("src/node/batch.rs", "NOT_OURS") + rust_str("src/node/batch.rs", "BATCH_LUA"),
    "empty": """
local results = {}
for i = 1, #KEYS do results[i] = 1 end
return results
""",
    "read": """
local unpack = table.unpack or unpack
local found = redis.call('mget', unpack(KEYS))
local results = {}
for i = 1, #KEYS do
  if found[i] == ARGV[i + 1] then results[i] = 1 else results[i] = 0 end
end
return results
""",
    "raise": """
local results = {}
for i = 1, #KEYS do
  redis.call('pexpire', KEYS[i], ARGV[1], 'gt')
  results[i] = 1
end
return results
""",
}


def enc(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def read(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind in b"+:":
        return rest
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        return [read(f) for _ in range(int(rest))]
    raise RuntimeError("unexpected reply %r" % line)


def value(i):
    # The library's value grammar: an uppercase letter, 39 hex digits.
    return ("A%039x" % (i * 2654435761)).encode()


def drive(port, variant):
    s = socket.create_connection(("127.0.0.1", port))
    f = s.makefile("rb")
    s.sendall(b"".join(enc("SET", "lock:%d" % i, value(i), "PX", 600000) for i in range(LOCKS)))
    for _ in range(LOCKS):
        read(f)
    if variant is None:
        return
    s.sendall(enc("SCRIPT", "LOAD", SCRIPTS[variant]))
    sha = read(f).decode()
    for start in range(0, LOCKS, PER):
        ids = range(start, min(start + PER, LOCKS))
        if variant == "single":
            s.sendall(b"".join(enc("EVALSHA", sha, 1, "lock:%d" % i, value(i), TTL) for i in ids))
            replies = [read(f) for _ in ids]
        else:
            keys = ["lock:%d" % i for i in ids]
            s.sendall(enc("EVALSHA", sha, len(keys), *keys, TTL, *[value(i) for i in ids]))
            replies = read(f)
        if any(r != b"1" for r in replies):
            raise RuntimeError("%s: a lock was not extended: %r" % (variant, replies[:4]))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def instructions(variant):
    """The server's whole instruction count for a run of `variant`."""
    out = tempfile.mktemp(prefix="batch-floor.", suffix=".cg")
    port = free_port()
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "-q", "--callgrind-out-file=" + out,
         os.environ.get("REDIS_SERVER_BIN", "redis-server"), "--port", str(port),
         "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.1)
        drive(port, variant)
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(enc("SHUTDOWN", "NOSAVE"))
            time.sleep(0.2)
        server.wait(timeout=120)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    totals = subprocess.run(["callgrind_annotate", out], capture_output=True, text=True).stdout
    os.unlink(out)
    line = next(l for l in totals.splitlines() if "PROGRAM TOTALS" in l)
    return int(line.split()[0].replace(",", ""))


def main():
    variants = sys.argv[1:] or ["single", "batched", "empty", "read", "raise"]
    base = instructions(None)
    print("%d locks, %d a call; instructions per lock on one server:" % (LOCKS, PER))
    for variant in variants:
        per_lock = (instructions(variant) - base) / LOCKS
        print("  %-8s %8.0f" % (variant, per_lock))


if __name__ == "__main__":
    main()
