#!/bin/bash
# Session 14 A/B of two ordo builds on the six STAMP kernels (--size medium), 1 and 2 threads,
# both clocks, the order alternated per round (A B, then B A), then summarised per kernel,
# thread count and clock. Since session 15 this is the session-15 script with its size and
# clocks fixed to what session 14 ran (the same commands and summary).
# usage: docs/results/2026-11-25-s14-stamp-ab.sh BASE_BIN NEW_BIN ROUNDS [APPS] > OUT.txt
SIZE=medium CLOCKS=logical,ordo exec "$(dirname "$0")/2026-11-28-s15-stamp-ab.sh" "$@"
