#!/usr/bin/env bash
# The main job: calibrate the ORDO clock on this machine, then run TPC-C (NewOrder + Payment,
# ORDO Fig. 14) on the embedded engine with the logical and the ORDO clock side by side. The
# summary gives committed tx/s and NewOrders/s per thread count and clock (median, min-max),
# aborts by reason, latency percentiles, the time spent waiting out clock uncertainty and the
# ordo/logical ratio; TPC-C consistency conditions 1-4 are checked after every run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
cargo build --release --quiet -p ordo-cli
ordo=./target/release/ordo
$ordo calibrate
echo
$ordo bench tpcc --mix no-pay --warehouses 2 --threads 1,2 --duration 1s --repetitions 3
