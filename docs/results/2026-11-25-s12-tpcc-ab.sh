#!/bin/bash
# Session 12 A/B of the TPC-C changes, interleaved per repetition.
#   base   = 0cfb752 (before this session)
#   new    = the YTD split, Payment's YTD updates last, read-timestamp extension and the locked-read
#            wait, with --pretouch-mb 0 (the background prefaulter only, as the base)
#   new+pt = the same with --pretouch-mb 2048
# usage: docs/results/2026-11-25-s12-tpcc-ab.sh BASE_BIN NEW_BIN REPS DURATION > OUT.txt
# With PRETOUCH=1 the variants are base+pt (0cfb752 with the pretouch commit cherry-picked) and
# new+pt, both --pretouch-mb 2048, in the order A B on odd repetitions and B A on even ones:
# without pretouching, a run's speed depends on whether the run before it freed memory the host
# still backs, which biases a fixed order.
# Every line: variant cell clock tx/s conflict-abort% cpu_us_per_tx
BASE=$1; NEW=$2; R=$3; D=$4
run() { # $1 = label, $2 = binary, $3.. = extra flags; WH, T from the loop
  local label=$1 bin=$2; shift 2
  "$bin" bench tpcc --mix no-pay --warehouses "$WH" --threads "$T" --duration "$D" \
    --clock logical,ordo --repetitions 1 --json "$@" 2>/dev/null | python3 -c "
import json, sys
for line in sys.stdin:
    v = json.loads(line); r = v['result']; m = dict(r['metrics'])
    conflicts = sum(n for k, n in r['aborts'] if k != 'requested')
    print('%-7s %dWH/%dthr %-7s %7.0f %5.2f %.3f' % ('$label', $WH, $T, v['clock']['kind'], r['tx_per_s'],
          100 * conflicts / max(r['committed'] + conflicts, 1), m['cpu_us_per_tx']))"
}
for i in $(seq 1 "$R"); do
  for cell in 2:1 2:2 1:2; do
    WH=${cell%:*}; T=${cell#*:}
    if [ -n "${PRETOUCH:-}" ]; then
      if [ $((i % 2)) = 1 ]; then
        run base+pt "$BASE" --pretouch-mb 2048; run new+pt "$NEW" --pretouch-mb 2048
      else
        run new+pt "$NEW" --pretouch-mb 2048; run base+pt "$BASE" --pretouch-mb 2048
      fi
      continue
    fi
    run base "$BASE"
    run new "$NEW" --pretouch-mb 0
    run new+pt "$NEW" --pretouch-mb 2048
  done
done
