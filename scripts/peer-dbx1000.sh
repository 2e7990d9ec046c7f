#!/usr/bin/env bash
# TPC-C (NewOrder 50 % + Payment 50 %) on DBx1000 (Silo and TicToc) side by side with Ordo (the
# logical and the ORDO clock), interleaved A B C D per repetition, for issue #15 §1.
#
#   scripts/peer-dbx1000.sh [--peer-dir DIR] [--cells "WH:THREADS ..."] [--reps N]
#                           [--txns N] [--duration T] [--pretouch-mb M] [--out PREFIX]
#
# DBx1000 (github.com/yxymit/DBx1000) is built OUTSIDE the repository, in --peer-dir (default
# ~/.cache/ordo-peers/DBx1000; cloned there when missing), once per concurrency control, with:
# WORKLOAD TPCC, the machine's TSC frequency as CPU_FREQ, MAX_TXN_PER_PART --txns (per thread),
# and the system's jemalloc (libjemalloc-dev) instead of the bundled one. It runs from its own
# source directory (it reads ./benchmarks/*.txt). Its throughput is txn_cnt / (run_time /
# threads) from the `[summary]` line; its abort rate abort_cnt / (txn_cnt + abort_cnt).
# Ordo runs `ordo bench tpcc --mix no-pay` for --duration per cell and clock.
#
# Differences that favour DBx1000 (issue #15): its TPC-C inserts no rows and never rolls back a
# NewOrder; Ordo inserts ORDER, NEW-ORDER, ORDER-LINE and HISTORY rows and rolls back 1 % of
# NewOrders, as the specification says.
#
# Ordo runs with `--pretouch-mb M` (default 2048; 0: off): it faults in M MiB of heap before
# loading, as DBx1000 has all its memory before its timed phase. On a VM whose host backs guest
# memory lazily the first touch of a page costs far more than zeroing it (measured here: 470 MB/s
# against 20 GB/s once backed, and pages a process frees go back to the host), so without it a
# run that allocates as it goes (Ordo inserts rows; DBx1000 does not) pays the host's cost,
# which bare metal does not have.
#
# Output: PREFIX.txt (the table: medians [min-max] and ratios to the best DBx1000 engine) and
# PREFIX.jsonl (every run). Run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"

peer_dir="${HOME}/.cache/ordo-peers/DBx1000"
cells="2:1 2:2 1:2"
reps=3
txns=100000
duration=2s
pretouch_mb=2048
out="docs/results/$(date -u +%F)-tpcc-dbx1000"
while [ $# -gt 0 ]; do
  case "$1" in
    --peer-dir) peer_dir="$2"; shift 2 ;;
    --cells) cells="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --txns) txns="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --pretouch-mb) pretouch_mb="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$(realpath -m "$peer_dir")/" in
  "$(pwd)"/*) echo "error: --peer-dir must be outside the repository (never commit a peer's code)" >&2; exit 2 ;;
esac
if ! [ -e /usr/include/jemalloc/jemalloc.h ]; then
  echo "installing libjemalloc-dev (DBx1000 links jemalloc)" >&2
  apt-get install -y libjemalloc-dev >/dev/null
fi
if ! [ -d "$peer_dir/.git" ]; then
  mkdir -p "$(dirname "$peer_dir")"
  git clone -q https://github.com/yxymit/DBx1000 "$peer_dir"
fi

# The TSC frequency in GHz (DBx1000 converts its cycle counts with CPU_FREQ).
ghz="$(awk -F: '/^cpu MHz/ { printf "%.3f", $2 / 1000; exit }' /proc/cpuinfo)"
build() { # $1 = SILO | TICTOC
  local bin="$peer_dir/rundb-tpcc-$1-$txns"
  if [ -x "$bin" ]; then echo "$bin"; return; fi
  (
    cd "$peer_dir"
    git checkout -q -- config-std.h Makefile
    sed -e "s/^#define WORKLOAD .*/#define WORKLOAD TPCC/" \
        -e "s/^#define CC_ALG .*/#define CC_ALG $1/" \
        -e "s/^#define CPU_FREQ .*/#define CPU_FREQ $ghz/" \
        -e "s/^#define MAX_TXN_PER_PART .*/#define MAX_TXN_PER_PART $txns/" \
        config-std.h >config.h
    # The system's jemalloc, not the bundled static one.
    sed -i -e 's# -L./libs##' Makefile
    make clean >/dev/null 2>&1 || true
    make -j"$(nproc)" >"build-$1.log" 2>&1 || { tail -20 "build-$1.log" >&2; exit 1; }
    cp rundb "$bin"
    git checkout -q -- config-std.h Makefile
  ) >&2
  echo "$bin"
}
silo="$(build SILO)"
tictoc="$(build TICTOC)"
cargo build --release --quiet -p ordo-cli
target_dir="${CARGO_TARGET_DIR:-target}"
case "$target_dir" in /*) ;; *) target_dir="$(pwd)/$target_dir" ;; esac
ordo="$target_dir/release/ordo"

mkdir -p "$(dirname "$out")"
jsonl="$out.jsonl"
: >"$jsonl"
dbx() { # $1 = engine name, $2 = binary, $3 = warehouses, $4 = threads
  local line
  line="$(cd "$peer_dir" && "$2" -t"$4" -n"$3" 2>&1 | grep '^\[summary\]' | tail -1)"
  python3 - "$1" "$3" "$4" "$line" <<'EOF' >>"$jsonl"
import json, re, sys
engine, wh, threads, line = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
f = dict((k, float(v)) for k, v in re.findall(r"(\w+)=([-0-9.e+]+)", line))
txn, aborts, run = f["txn_cnt"], f.get("abort_cnt", 0.0), f["run_time"]
print(json.dumps({"system": "dbx1000-" + engine, "warehouses": wh, "threads": threads,
                  "txn_per_s": txn / (run / threads), "abort_rate": aborts / max(txn + aborts, 1),
                  "summary": line}))
EOF
}
ordo_run() { # $1 = clock, $2 = warehouses, $3 = threads
  "$ordo" bench tpcc --mix no-pay --warehouses "$2" --threads "$3" --clock "$1" \
    --duration "$duration" --pretouch-mb "$pretouch_mb" --repetitions 1 --json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    res = r["result"]
    # Conflict aborts only: the requested rollbacks of 1 % of NewOrders are not conflicts
    # (and DBx1000 has none).
    conflicts = sum(n for kind, n in res["aborts"] if kind != "requested")
    print(json.dumps({"system": "ordo-" + sys.argv[1], "warehouses": int(sys.argv[2]),
                      "threads": int(sys.argv[3]), "txn_per_s": res["tx_per_s"],
                      "abort_rate": conflicts / max(res["committed"] + conflicts, 1),
                      "aborts": res["aborts"]}))' \
    "$1" "$2" "$3" >>"$jsonl"
}
echo "# $(date -u +%FT%TZ) ordo $(git rev-parse --short HEAD), DBx1000 $(git -C "$peer_dir" rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg); CPU_FREQ $ghz; ordo --pretouch-mb $pretouch_mb" >"$out.txt"
for rep in $(seq 1 "$reps"); do
  for cell in $cells; do
    wh="${cell%%:*}" threads="${cell##*:}"
    echo "rep $rep/$reps: $wh WH, $threads threads" >&2
    dbx silo "$silo" "$wh" "$threads"
    ordo_run logical "$wh" "$threads"
    dbx tictoc "$tictoc" "$wh" "$threads"
    ordo_run ordo "$wh" "$threads"
  done
done
python3 - "$jsonl" <<'EOF' | tee -a "$out.txt"
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
cells = sorted({(r["warehouses"], r["threads"]) for r in runs}, key=lambda c: (-c[0], c[1]))
systems = ["dbx1000-silo", "dbx1000-tictoc", "ordo-logical", "ordo-ordo"]
def fmt(xs):
    return f"{statistics.median(xs)/1e3:.0f} k [{min(xs)/1e3:.0f}-{max(xs)/1e3:.0f}]"
print(f"{'cell':<12}" + "".join(f"{s:>24}" for s in systems) + f"{'ordo/best dbx':>22}")
for wh, t in cells:
    row, med, ab = f"{wh} WH, {t} thr ", {}, {}
    for s in systems:
        xs = [r["txn_per_s"] for r in runs if (r["system"], r["warehouses"], r["threads"]) == (s, wh, t)]
        a = [r["abort_rate"] for r in runs if (r["system"], r["warehouses"], r["threads"]) == (s, wh, t)]
        med[s], ab[s] = (statistics.median(xs) if xs else 0), (statistics.median(a) if a else 0)
        row += f"{fmt(xs) if xs else '-':>24}"
    best = max(med["dbx1000-silo"], med["dbx1000-tictoc"])
    if best:
        row += f"{med['ordo-logical']/best:>10.2f} / {med['ordo-ordo']/best:.2f}"
    print(row)
    print(f"{'  aborts':<12}" + "".join(f"{ab[s]*100:>23.1f}%" for s in systems))
EOF
