"""Summarises 2026-11-25-storage-seam-ab.sh output: per cell, medians (min-max) of base and new,
the ratio of the medians, and the median of the per-round ratios new/base (paired)."""
import json
import statistics as st
import sys

cells = {}
loads = []
for line in open(sys.argv[1]):
    w = json.loads(line)
    if w["load"] is not None:
        loads.append(w["load"])
    j = w["record"]
    if j.get("workload") == "durable":
        vals = {(j["mix"], j["result"]["mode"], "tx/s"): j["result"]["stats"]["tx_per_s"]}
    elif j.get("workload") == "durable-recovery":
        vals = {("recovery", f, ""): j["result"][f] for f in ("scan_mb_per_s", "recover_mb_per_s")}
    else:
        continue
    for k, v in vals.items():
        cells.setdefault(k, {}).setdefault(w["ab"], {})[w["round"]] = v


def fmt(xs):
    return f"{st.median(xs):,.0f} ({min(xs):,.0f}–{max(xs):,.0f})"


if loads:
    print(f"load average at run starts: {min(loads)}–{max(loads)} (median {st.median(loads)})")
print("| cell | base median (min–max) | new median (min–max) | runs | new/base (medians) "
      "| new/base (paired, median; min–max) |")
print("|---|---|---|---|---|---|")
for k, d in cells.items():
    a, b = d["base"], d["new"]
    paired = [b[r] / a[r] for r in a if r in b]
    print(f"| {' '.join(x for x in k if x)} | {fmt(list(a.values()))} | {fmt(list(b.values()))} "
          f"| {len(a)}+{len(b)} | {st.median(b.values()) / st.median(a.values()):.2f} "
          f"| {st.median(paired):.2f}; {min(paired):.2f}–{max(paired):.2f} |")
