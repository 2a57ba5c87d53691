#!/usr/bin/env python3
"""Counts the public API: the inherent methods of each public type, as
rustdoc documents them (trait methods such as `clone` or `fmt` are not
counted). Run after `cargo doc --no-deps` (default features: what every
user gets), from the repository root:

    cargo doc --no-deps && python3 scripts/api-count.py
"""
import glob
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "target/doc/redquorum"
total = 0
rows = []
for path in sorted(glob.glob(os.path.join(root, "*.html"))):
    name = os.path.basename(path)
    if not name.startswith(("struct.", "enum.")):
        continue
    html = open(path, encoding="utf-8").read()
    start = html.find('id="implementations-list"')
    if start < 0:
        continue
    ends = [i for i in (html.find(m, start) for m in (
        'id="trait-implementations"', 'id="synthetic-implementations"',
        'id="blanket-implementations"', 'id="deref-methods')) if i > 0]
    section = html[start:min(ends) if ends else len(html)]
    methods = sorted(set(re.findall(r'id="method\.([a-z_0-9]+)"', section)))
    deprecated = len(re.findall(r'class="stab deprecated"', section))
    rows.append((len(methods), name.split(".")[1], deprecated))
    total += len(methods)
for count, ty, deprecated in sorted(rows, reverse=True):
    note = f" ({deprecated} deprecated)" if deprecated else ""
    print(f"{count:4} {ty}{note}")
print(f"{total:4} public methods in all")
