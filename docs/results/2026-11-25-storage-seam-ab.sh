#!/bin/sh
# A/B of the storage seam: `ordo bench durable` for two release binaries, back to back, the
# order swapped every round. Usage: 2026-11-25-storage-seam-ab.sh BASE NEW OUT ROUNDS
set -eu
base=$1 new=$2 out=$3 rounds=$4
: > "$out"
r=1
while [ "$r" -le "$rounds" ]; do
    if [ $((r % 2)) -eq 1 ]; then order="base new"; else order="new base"; fi
    for ab in $order; do
        if [ "$ab" = base ]; then bin=$base; else bin=$new; fi
        load=$(cut -d' ' -f1 /proc/loadavg)
        "$bin" bench durable --threads 2 --duration 2s --repetitions 1 --json --dir /tmp 2>/dev/null |
            grep '^{' | while read -r line; do
                printf '{"ab":"%s","round":%d,"load":%s,"record":%s}\n' "$ab" "$r" "$load" "$line"
            done >> "$out"
    done
    r=$((r + 1))
done
