#!/bin/bash
# Session 13 A/B of two ordo builds on TPC-C NewOrder+Payment, both pretouched, the order
# alternated per repetition (A B, then B A: a fixed order is biased on this VM), then summarised:
# per cell and clock, the median and min-max tx/s of each build and the median of the per-
# repetition ratios NEW/BASE.
# usage: docs/results/2026-11-25-s13-tpcc-ab.sh BASE_BIN NEW_BIN REPS DURATION [CELLS] > OUT.txt
#   CELLS: "WH:THREADS ..." (default "2:1 2:2 1:2")
# Every run line: variant cell clock tx/s conflict-abort% cpu_us_per_tx
BASE=$1; NEW=$2; R=$3; D=$4; CELLS=${5:-"2:1 2:2 1:2"}
run() { # $1 = label, $2 = binary; WH, T from the loop
  "$2" bench tpcc --mix no-pay --warehouses "$WH" --threads "$T" --duration "$D" \
    --clock logical,ordo --repetitions 1 --pretouch-mb 2048 --json 2>/dev/null | python3 -c "
import json, sys
for line in sys.stdin:
    v = json.loads(line); r = v['result']; m = dict(r['metrics'])
    conflicts = sum(n for k, n in r['aborts'] if k != 'requested')
    print('%-5s %dWH/%dthr %-7s %7.0f %5.2f %.3f' % ('$1', $WH, $T, v['clock']['kind'], r['tx_per_s'],
          100 * conflicts / max(r['committed'] + conflicts, 1), m['cpu_us_per_tx']))"
}
echo "# $(date -u +%FT%TZ) base $BASE new $NEW reps $R duration $D; load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq 1 "$R"); do
  for cell in $CELLS; do
    WH=${cell%:*}; T=${cell#*:}
    if [ $((i % 2)) = 1 ]; then run base "$BASE"; run new "$NEW"; else run new "$NEW"; run base "$BASE"; fi
  done
done | tee /dev/stderr | python3 -c '
import sys, statistics as st
from collections import defaultdict
runs = defaultdict(list)
for line in sys.stdin:
    v, cell, clock, tps, ab, cpu = line.split()
    runs[(cell, clock, v)].append((float(tps), float(ab)))
print("\n%-10s %-8s %22s %22s %14s %9s" % ("cell", "clock", "base tx/s [min-max]", "new tx/s [min-max]", "new/base med", "aborts"))
for cell, clock in sorted({(c, k) for c, k, _ in runs}):
    b, n = runs[(cell, clock, "base")], runs[(cell, clock, "new")]
    f = lambda xs: "%6.0f k [%.0f-%.0f]" % (st.median(x[0] for x in xs) / 1e3, min(x[0] for x in xs) / 1e3, max(x[0] for x in xs) / 1e3)
    ratios = [y[0] / x[0] for x, y in zip(b, n)]
    print("%-10s %-8s %22s %22s %6.3f [%.2f-%.2f] %4.1f/%4.1f%%" % (cell, clock, f(b), f(n), st.median(ratios), min(ratios), max(ratios), st.median(x[1] for x in b), st.median(x[1] for x in n)))
'
