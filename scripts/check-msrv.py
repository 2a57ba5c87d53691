#!/usr/bin/env python3
"""Checks that Cargo.toml's rust-version is honest: no lower than the
rust-version any dependency the library links (normal and build
dependencies, every feature on) declares. Only one toolchain can be
installed here, so this is the check CI can make; clippy's
incompatible_msrv lint checks our own code against the same number."""
import json
import subprocess
import sys


def version(text):
    # "1.88" and "1.88.0" are the same version: compare three parts.
    parts = [int(part) for part in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


meta = json.loads(
    subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--all-features", "--locked"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
)
packages = {p["id"]: p for p in meta["packages"]}
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
root = meta["resolve"]["root"]
ours = packages[root].get("rust_version")
if not ours:
    sys.exit("Cargo.toml declares no rust-version")


def links(node_id):
    for dep in nodes[node_id]["deps"]:
        if any(kind["kind"] in (None, "build") for kind in dep["dep_kinds"]):
            yield dep["pkg"]


seen, todo = set(), list(links(root))
while todo:
    pkg = todo.pop()
    if pkg not in seen:
        seen.add(pkg)
        todo.extend(links(pkg))
needs = max(
    (version(packages[p]["rust_version"]), packages[p]["name"])
    for p in seen
    if packages[p].get("rust_version")
)
if version(ours) < needs[0]:
    sys.exit(
        f"rust-version {ours} is lower than {'.'.join(map(str, needs[0]))}, "
        f"which {needs[1]} declares: raise rust-version in Cargo.toml"
    )
print(f"rust-version {ours}: no dependency declares more (highest: {needs[1]})")
