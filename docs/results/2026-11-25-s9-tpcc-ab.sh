#!/bin/bash
# usage: ab.sh A_BIN B_BIN REPS WH THR DUR  -> lines "X tx/s abort% cpu_us"
A=$1; B=$2; R=$3; WH=$4; T=$5; D=$6
for i in $(seq 1 $R); do
  for X in A B; do
    BIN=$A; [ $X = B ] && BIN=$B
    $BIN bench tpcc --mix no-pay --warehouses $WH --threads $T --duration $D --clock logical --repetitions 1 --json 2>/dev/null | python3 -c "
import json,sys
r=json.loads(sys.stdin.readline())['result']
m=dict(r['metrics'])
print('$X %.0f %.2f %.3f'%(r['tx_per_s'],100*r['abort_rate'],m['cpu_us_per_tx']))"
  done
done
