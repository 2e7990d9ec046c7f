#!/bin/bash
# usage: 2026-12-07-s29-tpcc-cg.sh BIN TAG [WH] [TXNS]
# Instructions per committed transaction inside Terminal::one, under callgrind, for exactly TXNS
# transactions of one terminal (`--txns`, default 20000) of TPC-C NewOrder+Payment on WH
# warehouses (default 2): with one thread and the default seed, two builds run the same
# transactions on the same data, so their counts compare exactly (the s9 script's timed run
# gave each build a different number of transactions, and so different tables).
# Prints: TAG committed Ir Ir/committed. Files cg-TAG.out/.json go to ${TMPDIR:-/tmp}.
set -euo pipefail
BIN=$(realpath "$1"); TAG=$2; WH=${3:-2}; TXNS=${4:-20000}
cd "${TMPDIR:-/tmp}"
valgrind --tool=callgrind --callgrind-out-file=cg-$TAG.out --toggle-collect='*Terminal*one*' \
  "$BIN" bench tpcc --mix no-pay --warehouses "$WH" --threads 1 --txns "$TXNS" --duration 60m \
  --clock logical --repetitions 1 --json 2>/dev/null > cg-$TAG.json
IR=$(grep -E '^(summary|totals):' cg-$TAG.out | head -1 | awk '{print $2}')
python3 -c "
import json
r=json.loads(open('cg-$TAG.json').readline())['result']
print('$TAG', r['committed'], $IR, '%.0f'%($IR/r['committed']))"
