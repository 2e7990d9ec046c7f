#!/usr/bin/env bash
# The many-core rows of issue #15 in one call of the device machine (16 cores; DEVELOPERS.md):
#   §4  `ordo bench clock --crossover`: logical against ORDO, an engine transaction's clock
#       draws plus work per transaction, and the crossover work per thread count;
#   §3  `ordo bench oplog`: updates per second at each thread count on both clocks, interleaved;
#   §2  `ordo bench stamp` at STAMP's standard inputs for kmeans, ssca2, labyrinth and vacation
#       (the kernels the issue wants at >= 4x sequential on 16 threads): each invocation runs the
#       sequential version too, so its speedups are measured in the same run.
# Each step has its own time limit, so one slow step cannot take the others' time, and every
# step writes its own file under OUT (at most 8 files come back from the device).
#
# Here (build, pack, then one device call with carry ["devbin"]):
#   cargo build --release -p ordo-cli && ../shared/tools/device-pack.sh
# There:
#   LD_LIBRARY_PATH=devbin/lib scripts/device-scaling.sh devbin/ordo "$OUT"
# A dry run on this machine, small and quick (checks the script, not the figures):
#   THREADS=1,2 SIZE=medium REPS=1 scripts/device-scaling.sh target/release/ordo /tmp/scaling
set -uo pipefail
BIN=${1:?usage: device-scaling.sh ORDO_BIN OUT_DIR}
OUT=${2:?usage: device-scaling.sh ORDO_BIN OUT_DIR}
THREADS=${THREADS:-1,4,8,16}
SIZE=${SIZE:-large}
REPS=${REPS:-3}
APPS=${APPS:-"kmeans ssca2 labyrinth vacation"}
mkdir -p "$OUT"
# One calibration of the ORDO clock for every step (it is measured per core pair: on 16 cores,
# 120 pairs), kept in a scratch cache that the steps share.
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
common=(--cache-dir "$cache" --calibration-runs 20000)

step() { # NAME LIMIT_S COMMAND...: runs it with a limit, output to OUT/NAME.txt
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  echo "# $(date -u +%FT%TZ) $*" >"$OUT/$name.txt"
  timeout "$limit" "$@" >>"$OUT/$name.txt" 2>&1
  local rc=$?
  echo "# rc $rc after $((SECONDS - start)) s" >>"$OUT/$name.txt"
  echo "$name: rc $rc, $((SECONDS - start)) s"
}

{
  echo "# $(date -u +%FT%TZ) $("$BIN" --version 2>&1 | head -1)" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo '(no git)'); threads $THREADS, size $SIZE"
  nproc
  lscpu 2>/dev/null | grep -E 'Model name|^CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|L3'
  cut -d' ' -f1-3 /proc/loadavg
} >"$OUT/machine.txt"

step crossover 150 "$BIN" bench clock --crossover --threads "$THREADS" --repetitions "$REPS" \
  "${common[@]}"
step oplog 120 "$BIN" bench oplog --threads "$THREADS" --clock logical,ordo \
  --repetitions "$REPS" --duration 1s "${common[@]}"
for app in $APPS; do
  step "stamp-$app" 150 "$BIN" bench stamp --app "$app" --size "$SIZE" --threads "$THREADS" \
    --repetitions 1 --clock logical "${common[@]}"
done
