#!/bin/bash
# Session 15 A/B of two ordo builds on STAMP kernels (--size $SIZE, default large), 1 and 2 threads,
# the clocks in $CLOCKS (default logical), the order alternated per round (A B, then B A), then summarised per kernel,
# thread count and clock: median [min-max] client-phase seconds of each build, the median of
# the per-round ratios BASE/NEW (> 1: NEW is faster) and each build's speedup over the
# sequential version measured in the same invocation.
# usage: [SIZE=large] [CLOCKS=logical] docs/results/2026-11-28-s15-stamp-ab.sh BASE_BIN NEW_BIN ROUNDS [APPS] > OUT.txt
BASE=$1; NEW=$2; R=$3; APPS=${4:-"kmeans vacation ssca2 labyrinth intruder genome"}
run() { # $1 = label, $2 = binary, $3 = app
  "$2" bench stamp --app "$3" --size "${SIZE:-large}" --threads 1,2 --repetitions 1 --clock "${CLOCKS:-logical}" 2>&1 |
    awk -v b="$1" -v a="$3" '/sequential/ { for (i = 1; i <= NF; i++) if ($i == "sequential") seq = $(i + 1) }
      /^ +[12] / { printf "%-4s %-9s %s %-7s %s %s\n", b, a, $1, $2, $3, seq }'
}
echo "# $(date -u +%FT%TZ) base $BASE new $NEW rounds $R size ${SIZE:-large} clocks ${CLOCKS:-logical}; load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq 1 "$R"); do
  for app in $APPS; do
    if [ $((i % 2)) = 1 ]; then run base "$BASE" "$app"; run new "$NEW" "$app"; else run new "$NEW" "$app"; run base "$BASE" "$app"; fi
  done
done | tee /dev/stderr | python3 -c '
import sys, statistics as st
from collections import defaultdict
runs = defaultdict(list)
for line in sys.stdin:
    v, app, thr, clock, t, seq = line.split()
    runs[(app, int(thr), clock, v)].append((float(t), float(seq)))
print("\n%-9s %3s %-7s %24s %24s %18s %13s" % ("app", "thr", "clock", "base s [min-max]", "new s [min-max]", "base/new med", "speedup b/n"))
for app, thr, clock in sorted({k[:3] for k in runs}):
    b, n = runs[(app, thr, clock, "base")], runs[(app, thr, clock, "new")]
    f = lambda xs: "%.4f [%.4f-%.4f]" % (st.median(x[0] for x in xs), min(x[0] for x in xs), max(x[0] for x in xs))
    r = [x[0] / y[0] for x, y in zip(b, n)]
    sp = lambda xs: st.median(x[1] / x[0] for x in xs)
    print("%-9s %3d %-7s %24s %24s %6.3f [%.2f-%.2f] %6.2f / %.2f" % (app, thr, clock, f(b), f(n), st.median(r), min(r), max(r), sp(b), sp(n)))
'
