#!/usr/bin/env bash
# Session 8's measurements, one after another on a quiet machine (2-vCPU KVM guest), release
# build of the checked-out commit. Each command interleaves what it compares (A B A B):
#   * etcd-compare with Ordo's transactions at their written object's primary (`owner`) and
#     round-robin on the nodes (`nodes`), each invocation side by side with a fresh etcd
#     (issue #14's ratio at 64 clients);
#   * Oplog with one reverse map against 64 per-object maps, both clocks (issue #15 §3);
#   * the clock crossover: an engine transaction's draws plus work, logical against ORDO
#     (issue #15 §4);
#   * TPC-C side by side with DBx1000 Silo/TicToc (issue #15 §1; scripts/peer-dbx1000.sh).
# Output: docs/results/2026-11-25-s8-*.txt next to this script.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/results/2026-11-25-s8
cargo build --release --quiet -p ordo-cli
ordo=$(pwd)/${CARGO_TARGET_DIR:-target}/release/ordo
stamp() { echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) load: $(cut -d' ' -f1-3 /proc/loadavg)"; }

{
  stamp
  for placement in owner nodes; do
    echo
    echo "== --ordo-coordinators $placement"
    "$ordo" bench etcd-compare --clients 1,8,64 --duration 2s --repetitions 3 \
      --ordo-coordinators "$placement" 2>&1
  done
} | tee "$out-etcd-compare.txt"

{
  stamp
  for objects in 1 64; do
    echo
    echo "== --objects $objects"
    "$ordo" bench oplog --threads 1,2 --duration 1s --repetitions 5 --objects "$objects" 2>&1
  done
} | tee "$out-oplog.txt"

{
  stamp
  "$ordo" bench clock --crossover --threads 1,2 --duration 200ms --repetitions 5 \
    --work-ns 0,50,100,200,400,800,1600,3200,6400,12800 2>&1
} | tee "$out-clock-crossover.txt"

scripts/peer-dbx1000.sh --reps 3 --out "$out-tpcc-dbx1000" ${DBX1000_DIR:+--peer-dir "$DBX1000_DIR"}
