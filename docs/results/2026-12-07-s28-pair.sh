#!/bin/bash
# Session 28: paired A/B on this 2-vCPU guest: both builds run at once, one core each, so the host's slow and fast spells hit both alike.
# pair.sh ROUNDS BASE NEW ARGS... : runs BASE and NEW at the same time (one core each), ROUNDS times; prints tx/s of each and NEW/BASE
R=$1; A=$2; B=$3; shift 3
for i in $(seq 1 $R); do
  $A "$@" --json 2>/dev/null > ${TMPDIR:-/tmp}/pair-a.json & $B "$@" --json 2>/dev/null > ${TMPDIR:-/tmp}/pair-b.json; wait
  python3 -c "
import json
a=json.loads(open('${TMPDIR:-/tmp}/pair-a.json').readline())['result']['tx_per_s']; b=json.loads(open('${TMPDIR:-/tmp}/pair-b.json').readline())['result']['tx_per_s']
print('%d %.0f %.0f %.3f'%($i,a,b,b/a))"
done | tee /dev/stderr | python3 -c '
import sys,statistics as st
r=[float(l.split()[3]) for l in sys.stdin]
print("new/base median %.3f [%.3f-%.3f] n=%d"%(st.median(r),min(r),max(r),len(r)))'
