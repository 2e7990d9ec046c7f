#!/bin/bash
# Session 27: TPC-C NewOrder+Payment, 1 WH, 2 threads, logical clock, with and without transparent
# huge pages (--huge-pages on|off), without and with the heap faulted in ahead (--pretouch-mb),
# the four variants in rotated order per round; then median [min-max] tx/s per variant.
# usage: docs/results/2026-11-29-s27-huge-pages.sh ORDO_BIN ROUNDS [DURATION] > OUT.txt
BIN=$1; R=$2; D=${3:-3s}
variants=("on 0" "off 0" "on 2048" "off 2048")
echo "# $(date -u +%FT%TZ) $($BIN --version) rounds $R duration $D; THP $(cat /sys/kernel/mm/transparent_hugepage/enabled); load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq 1 "$R"); do
  for k in 0 1 2 3; do
    set -- ${variants[$(((k + i) % 4))]}
    tx=$("$BIN" bench tpcc --mix no-pay --warehouses 1 --threads 2 --duration "$D" --repetitions 1 \
      --clock logical --huge-pages "$1" --pretouch-mb "$2" --json 2>/dev/null |
      python3 -c 'import json,sys; r=json.loads(sys.stdin.readline())["result"]; print(round(r["tx_per_s"]))' 2>/dev/null)
    echo "huge-pages $1 pretouch-mb $2 tx/s $tx"
  done
done | tee /dev/stderr | python3 -c '
import sys, statistics as st
from collections import defaultdict
runs = defaultdict(list)
for line in sys.stdin:
    f = line.split()
    runs[(f[1], f[3])].append(float(f[5]))
for (h, p), xs in runs.items():
    print("huge-pages %-3s pretouch-mb %-4s  %8.0f [%.0f-%.0f] tx/s" % (h, p, st.median(xs), min(xs), max(xs)))
'
