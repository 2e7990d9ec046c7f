#!/usr/bin/env bash
# The main job: calibrate the ORDO clock on this machine, run the clock benchmark (ORDO Fig. 8),
# then a short YCSB run on the embedded engine with the logical and the ORDO clock side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --quiet -p ordo-cli
ordo=./target/release/ordo
$ordo calibrate
echo
$ordo bench clock --duration-ms 200 --repetitions 3
echo
$ordo bench ycsb --mix ro2 --rows 200000 --threads 1,2 --duration-ms 500 --repetitions 2
