#!/usr/bin/env bash
# The long runs of the cluster simulations (issue 17): many more seeds than the test suite's
# 1,000 each, every history checked for strict serializability.
#
#   scripts/sim-long.sh [SEEDS] [ORDO_SEED]          the clock-and-failover layer (`ordo_cluster::sim`)
#   scripts/sim-long.sh data [SEEDS] [ORDO_SEED]     the data path (`ordo_cluster::sim::data`)
#
# SEEDS defaults to 100,000 for the clock layer (about a minute per 30,000 on two cores in the
# test profile) and 20,000 for the data path (about 2.5 minutes). The seeds are derived from
# ORDO_SEED (fresh and printed when not given), so a run is replayed by giving the same
# ORDO_SEED; each failing seed is printed with the command that replays it alone
# (ORDO_SIM_SEED=... replay_one_seed). Build profile: the test profile; set PROFILE=release
# for an optimised build.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
test_name=sim::tests::many_seeds_pass_the_checker
default_seeds=100000
if [ "${1:-}" = data ]; then
  shift
  test_name=sim::data::tests::many_data_seeds_pass_every_check
  default_seeds=20000
fi
seeds=${1:-$default_seeds}
if [ -n "${2:-}" ]; then export ORDO_SEED="$2"; fi
profile=()
if [ "${PROFILE:-}" = release ]; then profile=(--release); fi
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD): $seeds seeds of $test_name"
ORDO_SIM_SEEDS="$seeds" cargo test "${profile[@]}" -p ordo-cluster --lib \
  "$test_name" -- --ignored --nocapture
