#!/bin/bash
# usage: cg.sh BIN TAG [WH] -> Ir per committed tx inside Terminal::one
BIN=$1; TAG=$2; WH=${3:-1}
cd "${TMPDIR:-/tmp}"
valgrind --tool=callgrind --callgrind-out-file=cg-$TAG.out --toggle-collect='*Terminal*one*' $BIN bench tpcc --mix no-pay --warehouses $WH --threads 1 --duration 2s --clock logical --repetitions 1 --json 2>/dev/null > cg-$TAG.json
IR=$(grep -E '^(summary|totals):' cg-$TAG.out | head -1 | awk '{print $2}')
python3 -c "
import json
r=json.loads(open('cg-$TAG.json').readline())['result']
print('$TAG', r['committed'], $IR, '%.0f'%($IR/r['committed']))"
