#!/usr/bin/env bash
# Session 4 quiet-machine measurements of the sync-mode log stream (nothing else running).
# Binaries: base = fa78250 (per-slot chunks), stream = 90f70cd (one stream, one pwrite per
# round), head = stream + background segment preallocation.
set -uo pipefail
R=/work/bench-s4
D=/work/tmp-dur
log() { echo "### $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) :: $*"; }
{
log "A/B/C sync mode, alternated: base stream head, 5 times"
for i in 1 2 3 4 5; do
  for b in base stream head; do
    /work/ordo-s4-$b bench durable --modes sync --workloads 5r5w,ycsb-a --threads 1,8 --duration 2s --repetitions 1 --dir $D --json \
      | sed "s/^/{\"ab\":\"$b\",\"iter\":$i,\"rec\":/; s/\$/}/" >> $R/abc.jsonl
  done
done
log "durable, all modes (head)"
/work/ordo-s4-head bench durable --modes none,process,sync,process+flush --workloads 5r5w,45r5w,9r1w,ycsb-a --threads 1,2,8 --repetitions 3 --duration 1s --dir $D --json > $R/durable.jsonl 2>$R/durable.err
/work/ordo-s4-head bench durable --modes none,process,sync --workloads 5r5w,ycsb-a --threads 1,8 --repetitions 3 --duration 1s --dir $D > $R/durable.txt 2>>$R/durable.err
log "recovery (head)"
/work/ordo-s4-head bench recovery --log-dir $D/rec1g --log-mb 1024 --repetitions 3 > $R/recovery.txt 2>$R/recovery.err
log "done"
} > $R/progress.log 2>&1
