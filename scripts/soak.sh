#!/usr/bin/env bash
# Soak test of durability (not run in CI: the default takes hours). Runs, N trials each:
#   * the kill -9 loop (crates/ordo/tests/durable_crash.rs) in process and sync mode: a child
#     commits bank transfers, is SIGKILLed at a random moment, the directory is recovered and
#     every acknowledged transfer checked;
#   * the power-loss loop (crates/ordo/tests/durable/durable_power.rs) in sync mode (nothing
#     acknowledged may be lost, with the device keeping any subset of unsynced writes, or
#     tearing them at sector granularity) and in process mode (a consistent prefix: the bank
#     total holds, nothing beyond an ack + 1).
# The test binaries take the trial count from ORDO_TRIALS and print one `soak ...` line each;
# ORDO_SEED, if set, replays a run's random choices (see README, "Reproducing a randomized
# failure"). Ends with `N passed, F failed` and the acknowledged transactions checked.
#
# --parallel runs the five loops at once (each trial mostly sleeps while its child commits, so
# on two cores this takes about a third of the time; the loops share no files).
#
# usage: scripts/soak.sh [--trials N] [--parallel]       (default 10000, one loop at a time)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"

trials=10000
parallel=0
while [ $# -gt 0 ]; do
  case "$1" in
    --trials) trials="${2:-}"; shift 2 || { echo "error: --trials needs a number" >&2; exit 2; } ;;
    --trials=*) trials="${1#*=}"; shift ;;
    --parallel) parallel=1; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown argument $1 (usage: scripts/soak.sh [--trials N] [--parallel])" >&2; exit 2 ;;
  esac
done
if ! [[ "$trials" =~ ^[1-9][0-9]*$ ]]; then
  echo "error: --trials must be a positive number, not '$trials'" >&2
  exit 2
fi

mkdir -p target
log="target/soak-$(date -u +%Y%m%dT%H%M%SZ).log"
export ORDO_TRIALS="$trials"
echo "soak: $trials trials per loop; full output in $log"
# The same features as scripts/test.sh, so its build is reused.
cargo test --all-features -p ordo --test durable_crash --test durable --no-run >>"$log" 2>&1

# name | cargo test arguments
loops=(
  "kill -9, process mode|--test durable_crash -- --exact sigkill_process_mode"
  "kill -9, sync mode|--test durable_crash -- --exact sigkill_sync_mode"
  "power loss, sync mode|--test durable -- --exact durable_power::sync_mode_survives_devices_that_wrote_some_unsynced_data --nocapture"
  "power loss, torn, sync|--test durable -- --exact durable_power::sync_mode_survives_torn_unsynced_writes --nocapture"
  "power loss, process mode|--test durable -- --exact durable_power::process_mode_documents_power_loss --nocapture"
)
# Runs loop $1 ("name|args"), writing its output to $2 and "rc seconds" to $2.rc.
run_loop() {
  local args started rc
  read -r -a args <<<"${1#*|}"
  started=$SECONDS
  cargo test --all-features -q -p ordo "${args[@]}" >"$2" 2>&1 && rc=0 || rc=$?
  echo "$rc $((SECONDS - started))" >"$2.rc"
}
outs=()
for i in "${!loops[@]}"; do
  out="$log.loop$i"
  outs+=("$out")
  if [ "$parallel" -eq 1 ]; then
    run_loop "${loops[$i]}" "$out" &
  else
    run_loop "${loops[$i]}" "$out"
  fi
done
wait
passed=0 failed=0 acknowledged=0
for i in "${!loops[@]}"; do
  name="${loops[$i]%%|*}"
  out="${outs[$i]}"
  read -r rc secs <"$out.rc"
  cat "$out" >>"$log"
  line="$(grep '^soak ' "$out" | tail -1 || true)"
  if [ "$rc" -eq 0 ] && [ -n "$line" ]; then
    p="$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")"
    a="$(sed -E 's/.*; ([0-9]+) acknowledged transactions.*/\1/' <<<"$line")"
    passed=$((passed + p)); acknowledged=$((acknowledged + a))
    printf '%-26s %s passed, 0 failed; %s acknowledged transactions checked (%ds)\n' \
      "$name" "$p" "$a" "$secs"
  else
    failed=$((failed + 1))
    printf '%-26s FAILED (exit %s); its output:\n' "$name" "$rc"
    grep -E 'ORDO_SEED|panicked|trial|acknowledged|error' "$out" | tail -20 || true
  fi
  rm -f "$out" "$out.rc"
done
echo
echo "$passed passed, $failed failed; $acknowledged acknowledged transactions checked ($trials trials x ${#loops[@]} loops)"
[ "$failed" -eq 0 ]
