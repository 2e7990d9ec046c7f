#!/bin/sh
# Instructions per committed TPC-C transaction under cachegrind (NewOrder+Payment, 1 warehouse,
# 1 thread, logical clock): (Ir(3 s) - Ir(1 s)) / (committed(3 s) - committed(1 s)), whole
# process (the difference cancels loading; the consistency check's share of the extra orders
# stays in). Wall-clock A/B on this VM moves by a few per cent with code layout alone; this
# count does not. Usage: docs/results/2026-11-25-s13-tpcc-cg.sh BASE_BIN NEW_BIN REPS
set -eu
base=$1 new=$2 reps=$3
run() { # binary duration -> "Ir committed"
    out=$(mktemp)
    c=$(valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$out" "$1" bench tpcc \
        --mix no-pay --warehouses 1 --threads 1 --duration "$2" --repetitions 1 --clock logical \
        --json 2>/dev/null | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["result"]["committed"])')
    ir=$(grep -E '^summary:' "$out" | awk '{print $2}')
    rm -f "$out"
    echo "$ir $c"
}
i=1
while [ "$i" -le "$reps" ]; do
    for ab in base new; do
        if [ "$ab" = base ]; then bin=$base; else bin=$new; fi
        set -- $(run "$bin" 1s); ir1=$1 c1=$2
        set -- $(run "$bin" 3s); ir3=$1 c3=$2
        echo "$ab rep $i: $(( (ir3 - ir1) / (c3 - c1) )) instructions/commit ($c1 / $c3 commits)"
    done
    i=$((i + 1))
done
