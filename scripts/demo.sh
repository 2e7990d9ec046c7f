#!/usr/bin/env bash
# The main job: calibrate the ORDO clock on this machine, then run the clock benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --quiet -p ordo-cli
./target/release/ordo calibrate
./target/release/ordo bench clock --duration-ms 300
