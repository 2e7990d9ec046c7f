#!/bin/bash
# Session 13: STAMP kmeans --size large, c727f69 (base) against 917c1bb (new: the commit's wait
# times itself, no clock reading before it without a durable log), alternated base/new and
# new/base, 1 and 2 threads, both clocks. usage: ... BASE_BIN NEW_BIN ROUNDS > OUT.txt
BASE=$1; NEW=$2; R=$3
run() { "$2" bench stamp --app kmeans --size large --threads 1,2 --repetitions 1 --clock ordo,logical 2>&1 |
  awk -v b="$1" '/^ +[12] /{printf "%-4s threads %s %-7s %s s (speedup %s)\n", b, $1, $2, $3, $5}'; }
echo "# $(date -u +%FT%TZ) base $BASE new $NEW; load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq 1 "$R"); do
  if [ $((i % 2)) = 1 ]; then run base "$BASE"; run new "$NEW"; else run new "$NEW"; run base "$BASE"; fi
done
