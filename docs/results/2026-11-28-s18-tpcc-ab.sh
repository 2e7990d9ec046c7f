#!/bin/bash
# ab3.sh ROUNDS WH THR BIN... : alternate binaries; prints name tx/s
R=$1; WH=$2; T=$3; shift 3
for i in $(seq 1 $R); do
  for b in "$@"; do
    $b bench tpcc --mix no-pay --warehouses $WH --threads $T --duration 2s --clock logical --pretouch-mb 2048 --repetitions 1 --json 2>/dev/null | python3 -c "
import json,sys
r=json.loads(sys.stdin.readline())['result']
print('$(basename $b) %.0f %.2f'%(r['tx_per_s'], 100*r['abort_rate']))"
  done
done | sort | awk '{a[$1]=a[$1]" "$2"("$3")"} END {for (k in a) print k, a[k]}'
