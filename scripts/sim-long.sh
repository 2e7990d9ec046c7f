#!/usr/bin/env bash
# The long run of the cluster simulation (issue 17, `ordo_cluster::sim`): many more seeds than
# the test suite's 1,000, every history checked for strict serializability.
#
#   scripts/sim-long.sh [SEEDS] [ORDO_SEED]
#
# SEEDS defaults to 100,000 (about a minute per 30,000 on two cores in the test profile).
# The seeds are derived from ORDO_SEED (fresh and printed when not given), so a run is
# replayed by giving the same ORDO_SEED; each failing seed is printed with the command that
# replays it alone (ORDO_SIM_SEED=... replay_one_seed). Build profile: the test profile;
# set PROFILE=release for an optimised build.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
seeds=${1:-100000}
if [ -n "${2:-}" ]; then export ORDO_SEED="$2"; fi
profile=()
if [ "${PROFILE:-}" = release ]; then profile=(--release); fi
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD): $seeds seeds"
ORDO_SIM_SEEDS="$seeds" cargo test "${profile[@]}" -p ordo-cluster --lib \
  sim::tests::many_seeds_pass_the_checker -- --ignored --nocapture
