#!/usr/bin/env bash
# Session 3 quiet-machine measurements, one after another (nothing else running).
set -uo pipefail
cd /work/main
R=/work/bench-s3
O=/work/ordo-s3
log() { echo "### $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) :: $*"; }
{
log "A/B optimistic rts: old=/work/ordo-old-rts (79e9b20 with bca3c34 reverted) new=/work/ordo-new-rts (79e9b20)"
for i in 1 2 3 4 5; do
  for b in old new; do
    for mix in ro2 a; do
      /work/ordo-$b-rts bench ycsb --mix $mix --rows 100000 --threads 1,2 --duration 1s --repetitions 1 --clock ordo,logical --json \
        | sed "s/^/{\"ab\":\"$b\",\"iter\":$i,\"rec\":/; s/\$/}/" >> $R/ab.jsonl
    done
  done
done
log "suite"
$O bench suite --threads 1,2 --duration 1s --repetitions 3 --out $R/suite.jsonl > $R/suite.txt 2>$R/suite.err
log "apps"
CARGO_TARGET_DIR=/work/main/target bash scripts/bench-apps.sh $R/apps 1,2 3 small > /dev/null 2>$R/apps.err
log "durable"
mkdir -p /work/tmp-dur
$O bench durable --modes none,process,sync,sync+flush --workloads 5r5w,45r5w,9r1w,ycsb-a --threads 1,2,8 --repetitions 3 --duration 1s --dir /work/tmp-dur --json > $R/durable.jsonl 2>$R/durable.err
$O bench durable --modes none,process,sync --workloads 5r5w,ycsb-a --threads 1,8 --repetitions 3 --duration 1s --dir /work/tmp-dur > $R/durable.txt 2>>$R/durable.err
log "recovery"
$O bench recovery --log-dir /work/tmp-dur/rec1g --log-mb 1024 --repetitions 3 > $R/recovery.txt 2>$R/recovery.err
log "done"
} > $R/progress.log 2>&1
