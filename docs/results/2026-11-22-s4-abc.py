#!/usr/bin/env python3
"""Summarises 2026-11-22-s4-abc.jsonl: sync-mode tx/s per binary (base = per-slot chunks,
stream = one stream written by the round, head = stream + segment preallocation), median
[min-max] over the alternated iterations, and each cell's tx/s over the raw fdatasync loop
measured just before it."""
import json, statistics as st, sys
from collections import defaultdict

path = sys.argv[1] if len(sys.argv) > 1 else "docs/results/2026-11-22-s4-abc.jsonl"
import re
cells = defaultdict(list)
# The ratio over the raw loop run right before each cell: the table lines print it.
cell_ratio = {}
table = re.compile(r'"ab":"(\w+)","iter":(\d+),"rec":\s*(\S+)\s+(\d+) threads\s+sync:.*sync/raw ([\d.]+)')
for line in open(path):
    m = table.search(line)
    if m:
        cell_ratio[(m[3], int(m[4]), m[1], int(m[2]))] = float(m[5])
for line in open(path):
    outer = line.split('"rec":', 1)
    if len(outer) != 2 or not outer[1].startswith("{"):
        continue
    r = json.loads(line)
    rec = r["rec"]
    res = rec["result"]
    key = (rec["mix"], res["stats"]["threads"], r["ab"])
    cells[key].append((res["stats"]["tx_per_s"], res["commits_per_fsync"],
                       cell_ratio[(rec["mix"], res["stats"]["threads"], r["ab"], r["iter"])],
                       res["stats"]["latency"]["p50_ns"] / 1e3, res["stats"]["latency"]["p99_ns"] / 1e3))

def fmt(xs, f="{:.0f}"):
    return f"{f.format(st.median(xs))} [{f.format(min(xs))}-{f.format(max(xs))}]"

print(f"{'mix':7} {'thr':>3} {'binary':7} {'tx/s':>22} {'commits/fsync':>18} {'tx/s / raw':>18} {'p50 us':>10} {'p99 us':>10}")
for (mix, thr, ab) in sorted(cells, key=lambda k: (k[0], k[1], ["base", "stream", "head"].index(k[2]))):
    v = cells[(mix, thr, ab)]
    print(f"{mix:7} {thr:>3} {ab:7} {fmt([x[0] for x in v]):>22} {fmt([x[1] for x in v], '{:.2f}'):>18} "
          f"{fmt([x[2] for x in v], '{:.2f}'):>18} {st.median([x[3] for x in v]):>10.1f} {st.median([x[4] for x in v]):>10.1f}")
