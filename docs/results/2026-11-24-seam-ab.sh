#!/usr/bin/env bash
# A/B of the participant seam (multi-owner Participants, fallible steps, lock tokens) against the
# commit it started from. Binaries, each built from a clean `git worktree` (the shared checkout
# carries other engineers' uncommitted edits to ordo-clock and ordo-cli):
#   base = ceaf1aa  CARGO_TARGET_DIR=/work/main/target-base cargo build --release -p ordo-cli
#   new  = the seam, CARGO_TARGET_DIR=/work/main/target-h3 cargo build --release -p ordo-cli
# Usage: 2026-11-24-seam-ab.sh BASE_BIN NEW_BIN OUT_JSONL [ROUNDS]
# Per round and workload, base and new run back to back (order swapped every round: this machine
# drifts by ±10 % over seconds, so only adjacent runs compare), one 1 s run per thread count.
# Every JSON line is tagged with the binary, the round and the 1-minute load average.
set -uo pipefail
BASE=$1 NEW=$2 OUT=$3 ROUNDS=${4:-9}
run() { # tag binary args...
  local tag=$1 bin=$2; shift 2
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  "$bin" bench "$@" --threads 1,2 --duration 1s --clock ordo --repetitions 1 --json 2>/dev/null \
    | sed "s/^/{\"ab\":\"$tag\",\"round\":$i,\"load1\":$load,\"rec\":/; s/\$/}/" >> "$OUT"
}
for i in $(seq 1 "$ROUNDS"); do
  if (( i % 2 )); then order="base new"; else order="new base"; fi
  for workload in "ycsb --mix ro2" "ycsb --mix a" "tpcc --mix no-pay"; do
    for tag in $order; do
      bin=$BASE; [[ $tag == new ]] && bin=$NEW
      # shellcheck disable=SC2086
      run "$tag" "$bin" $workload
    done
  done
  echo "round $i done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
