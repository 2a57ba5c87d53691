#!/usr/bin/env python3
"""Draws docs/bench.svg from the bench results (python3 standard library only).

Inputs:
  - criterion's estimates: <target>/criterion/<group>/<bench>/new/estimates.json
    (median point estimates, from `cargo bench --features testkit --bench redlock`)
  - optionally the peers table as JSON (from
    `cd benches/peers && cargo run --release -- --json peers.json`)

Regenerate:
  cargo bench --features testkit --bench redlock
  (cd benches/peers && cargo run --release -- --json /tmp/peers.json)
  python3 scripts/bench-chart.py --criterion "${CARGO_TARGET_DIR:-target}/criterion" \
      --peers /tmp/peers.json --out docs/bench.svg
"""

import argparse
import html
import json
import os
import sys

# (criterion id, label, role): role "floor" is the single-node baseline,
# "ours" a redquorum scenario.
SCENARIOS = [
    ("floor/set_nx_px+del", "1 node SET NX PX + del (floor)", "floor"),
    ("floor/5-nodes-raw", "5 nodes raw SET + del, join_all (floor)", "floor"),
    ("uncontended/acquire+release", "acquire+release, 5 nodes", "ours"),
    ("uncontended/acquire", "acquire, 5 nodes", "ours"),
    ("uncontended/extend", "extend, 5 nodes", "ours"),
    ("throughput/64-tasks", "per pair, 64 tasks", "ours"),
    ("proxy/acquire-healthy", "acquire via proxy, healthy", "ours"),
    ("proxy/acquire-one-delayed-20ms", "acquire via proxy, 1 node +20 ms", "ours"),
    ("paused/acquire-one-paused", "acquire, 1 node paused", "ours"),
    ("contended/16-tasks", "hand-off, 16 tasks on 1 resource", "ours"),
]

# Peer rows (scenario name in the peers JSON): both bars of such a row come
# from the peers run, so that ours and rslock's are measured alike.
PEER_ROWS = {
    "acquire+release latency (1 task)": "uncontended/acquire+release",
    "extend latency": "uncontended/extend",
}

COLOURS = {"floor": "#888888", "ours": "#2b6cb0", "peer": "#c05621"}


def median_ns(root, bench_id):
    path = os.path.join(root, *bench_id.split("/"), "new", "estimates.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)["median"]["point_estimate"]
    except (OSError, KeyError, ValueError):
        return None


def load_peers(path):
    if not path:
        return {}
    with open(path, encoding="utf-8") as f:
        rows = json.load(f)
    out = {}
    for row in rows:
        bench_id = PEER_ROWS.get(row["scenario"])
        if bench_id and row["unit"] == "us":
            out[bench_id] = (row["ours"] * 1000.0, row["peer"] * 1000.0)
    return out


def fmt(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.0f} µs"


def svg(bars, title):
    """bars: list of (label, [(series, ns)])."""
    width, left, right, row_h, bar_h, top = 900, 290, 110, 14, 12, 60
    rows = sum(len(series) for _, series in bars)
    height = top + rows * row_h + len(bars) * 10 + 50
    longest = max(ns for _, series in bars for _, ns in series)
    scale = (width - left - right) / longest
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="20" font-size="14" font-weight="bold">{html.escape(title)}</text>',
        '<text x="10" y="38">median latency per operation (lower is better); '
        "log-free linear scale</text>",
    ]
    x = left
    for i, (series, colour) in enumerate(COLOURS.items()):
        name = {"floor": "single-node floor", "ours": "redquorum", "peer": "rslock"}[series]
        out.append(f'<rect x="{x + i * 150}" y="44" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{x + i * 150 + 14}" y="53">{name}</text>')
    y = top
    for label, series in bars:
        out.append(
            f'<text x="{left - 6}" y="{y + bar_h - 2}" text-anchor="end">{html.escape(label)}</text>'
        )
        for kind, ns in series:
            w = max(1.0, ns * scale)
            out.append(
                f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{COLOURS[kind]}"/>'
            )
            out.append(f'<text x="{left + w + 4:.1f}" y="{y + bar_h - 2}">{fmt(ns)}</text>')
            y += row_h
        y += 10
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_target = os.environ.get("CARGO_TARGET_DIR", "target")
    parser.add_argument("--criterion", default=os.path.join(default_target, "criterion"))
    parser.add_argument("--peers", help="JSON written by the peers crate (--json)")
    parser.add_argument("--out", default="docs/bench.svg")
    parser.add_argument("--title", default="redquorum benches (5 local redis-server nodes)")
    args = parser.parse_args()

    peers = load_peers(args.peers)
    floor = median_ns(args.criterion, "floor/set_nx_px+del")
    bars = []
    for bench_id, label, role in SCENARIOS:
        ns = median_ns(args.criterion, bench_id)
        if ns is None:
            print(f"skipping {bench_id}: no estimates.json", file=sys.stderr)
            continue
        series = [(role, ns)]
        if bench_id in peers:
            ours, peer = peers[bench_id]
            series = [(role, ours), ("peer", peer)]
        bars.append((label, series))
        print(f"{bench_id:34} {fmt(ns):>10}"
              + (f"  ({ns / floor:.2f}x floor)" if floor and role != "floor" else ""))
    if not bars:
        sys.exit(f"no criterion results under {args.criterion}: run cargo bench first")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(svg(bars, args.title))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
