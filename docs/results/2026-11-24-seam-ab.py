#!/usr/bin/env python3
"""Summarises 2026-11-24-seam-ab.sh output: per (workload, threads) the median and min-max of
committed tx/s for base and new, the ratio of the medians new/base, the median of the per-round
paired ratios (base and new ran back to back), and the load averages seen."""
import json, statistics, sys
from collections import defaultdict
cells = defaultdict(lambda: defaultdict(dict))
loads = []
for line in open(sys.argv[1]):
    d = json.loads(line)
    r = d["rec"]
    key = (r["workload"], r["variant"], r["threads"])
    cells[key][d["ab"]][d["round"]] = r["result"]["tx_per_s"]
    loads.append(d["load1"])
print("| workload | threads | base median (min–max) tx/s | new median (min–max) tx/s | runs | new/base (medians) | new/base (paired, median; min–max) |")
print("|---|---|---|---|---|---|---|")
for key in sorted(cells):
    b, n = cells[key]["base"], cells[key]["new"]
    bv, nv = list(b.values()), list(n.values())
    fmt = lambda v: f"{statistics.median(v)/1e3:,.0f} k ({min(v)/1e3:,.0f}–{max(v)/1e3:,.0f})"
    paired = [n[r] / b[r] for r in b if r in n]
    print(f"| {key[0]} {key[1]} | {key[2]} | {fmt(bv)} | {fmt(nv)} | {len(bv)}+{len(nv)} | "
          f"{statistics.median(nv)/statistics.median(bv):.3f} | "
          f"{statistics.median(paired):.3f} ({min(paired):.2f}–{max(paired):.2f}) |")
print(f"\n1-min load average at run start (it includes the benchmark itself): "
      f"min {min(loads)}, median {statistics.median(loads)}, max {max(loads)}")
