#!/bin/sh
# Instructions per committed transaction under cachegrind (1 thread, 5r5w, process mode):
# (Ir(4 s) - Ir(1 s)) / (committed(4 s) - committed(1 s)), whole process, which includes
# recovering each transaction's record at the end of the run. Usage: ... BASE NEW REPS
set -eu
base=$1 new=$2 reps=$3
run() { # binary duration -> "Ir committed"
    out=$(mktemp)
    c=$(valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$out" "$1" bench durable \
        --modes "$3" --workloads 5r5w --threads 1 --duration "$2" --repetitions 1 --json --dir /tmp \
        2>/dev/null | grep '"workload":"durable"' | head -1 |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["stats"]["committed"])')
    ir=$(grep -E '^summary:' "$out" | awk '{print $2}')
    rm -f "$out"
    echo "$ir $c"
}
for mode in process sync; do
    i=1
    while [ "$i" -le "$reps" ]; do
        for ab in base new; do
            if [ "$ab" = base ]; then bin=$base; else bin=$new; fi
            set -- $(run "$bin" 1s "$mode") ; ir1=$1 c1=$2
            set -- $(run "$bin" 4s "$mode") ; ir4=$1 c4=$2
            echo "$mode $ab rep $i: $(( (ir4 - ir1) / (c4 - c1) )) instructions/commit ($c1 / $c4 commits)"
        done
        i=$((i + 1))
    done
done
