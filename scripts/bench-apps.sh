#!/usr/bin/env bash
# ORDO's applications side by side on the logical and the ORDO clock, in one run (issue #7,
# ORDO Fig. 11 and 15 and §6.4): the Fig. 11 hash table on RLU and on transactions at 2 % and
# 40 % updates, Oplog's reverse map, and the six STAMP kernels' speedups over their sequential
# versions. Every record goes to one JSON-lines file; the throughput and ratio figures are
# drawn from it with `ordo plot`.
#
#   scripts/bench-apps.sh [OUT_PREFIX] [THREADS] [REPETITIONS] [STAMP_SIZE]
#
# Defaults: docs/results/DATE-apps, threads 1,2, 3 repetitions, small STAMP inputs. Run it on a
# quiet machine: the clocks are interleaved inside each entry, entries run one after another.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
out=${1:-docs/results/$(date -u +%F)-apps}
threads=${2:-1,2}
reps=${3:-3}
size=${4:-small}
cargo build --release --quiet -p ordo-cli
ordo=${CARGO_TARGET_DIR:-target}/release/ordo
mkdir -p "$(dirname "$out")"
: >"$out.jsonl"
{
  echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) load: $(cut -d' ' -f1-3 /proc/loadavg)"
  $ordo bench suite --only hashtable,oplog --threads "$threads" --duration 1s \
    --repetitions "$reps" --out "$out.jsonl"
  for app in kmeans ssca2 labyrinth vacation intruder genome; do
    echo
    echo "## stamp $app ($size)"
    $ordo bench stamp --app "$app" --size "$size" --threads "$threads" \
      --repetitions "$reps" --out "$out.jsonl"
  done
} | tee "$out.txt"
$ordo plot "$out.jsonl" -o "$out-throughput.svg" --kind throughput
$ordo plot "$out.jsonl" -o "$out-ratio.svg" --kind ratio
