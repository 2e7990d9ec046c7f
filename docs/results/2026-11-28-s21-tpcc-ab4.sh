#!/bin/bash
# tpcc4.sh ROUNDS BIN... : TPC-C no-pay, cells 2:1 2:2 1:2 (or $CELLS, "WH:THREADS ..."), bins rotated per round; median [min-max] and ratio to the first bin
R=$1; shift
export CELLS=${CELLS:-"2:1 2:2 1:2"}
for i in $(seq 1 $R); do
  n=$#; bins=("$@"); off=$(( (i-1) % n ))
  for c in $CELLS; do
    WH=${c%:*}; T=${c#*:}
    for k in $(seq 0 $((n-1))); do
      b=${bins[$(( (k+off) % n ))]}
      $b bench tpcc --mix no-pay --warehouses $WH --threads $T --duration 2s --clock logical --pretouch-mb 2048 --repetitions 1 --json 2>/dev/null | python3 -c "
import json,sys
r=json.loads(sys.stdin.readline())['result']
print('$i $WH:$T $(basename $b) %.0f %.2f'%(r['tx_per_s'], 100*r['abort_rate']))"
    done
  done
  set -- "${bins[@]}"
done | tee /dev/stderr | python3 -c '
import os, sys, statistics as st
from collections import defaultdict
d=defaultdict(dict); order=[]
for l in sys.stdin:
    i,c,b,t,a=l.split(); d[(c,b)][i]=float(t)
    if b not in order: order.append(b)
base=None
for c in [c for c in os.environ["CELLS"].split() if any(k[0] == c for k in d)]:
    for b in order:
        xs=d[(c,b)]; v=list(xs.values())
        r=[xs[i]/d[(c,order[0])][i] for i in xs if i in d[(c,order[0])]]
        print("%s %-14s %8.0f [%.0f-%.0f]  ratio-to-%s %.3f [%.2f-%.2f]"%(c,b,st.median(v),min(v),max(v),order[0],st.median(r),min(r),max(r)))
'
