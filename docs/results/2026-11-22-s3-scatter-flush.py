#!/usr/bin/env python3
"""Why a group-commit round at 8 threads costs ~3 raw flushes (issue #6, session 3).

A round of Ordo's sync mode writes one record (~260 B) per committing slot, each into that
slot's own 1 MiB chunk of a shared preallocated segment, then one fdatasync. This times
rounds of 1 record, 8 contiguous records, and 8 records 1 MiB apart, on a preallocated 64 MiB
file on the same disk. Usage: python3 2026-11-22-s3-scatter-flush.py DIR
"""
import os, sys, time

path = os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "scatter.seg")
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
zeros = b"\0" * (1 << 20)
for i in range(64):
    os.pwrite(fd, zeros, i << 20)
os.fsync(fd)
rec = b"x" * 260


def rounds_per_s(pages, contiguous, n=1500):
    start = time.perf_counter()
    for k in range(n):
        for p in range(pages):
            base = p * 260 if contiguous else p << 20
            os.pwrite(fd, rec, base + (k * 260 * (pages if contiguous else 1)) % (1 << 19))
        os.fdatasync(fd)
    return n / (time.perf_counter() - start)


for rep in range(3):
    for pages, contiguous in [(1, True), (8, True), (8, False)]:
        layout = "contiguous" if contiguous else "1 MiB apart"
        print(rep, pages, layout, "%.0f rounds/s" % rounds_per_s(pages, contiguous), flush=True)
os.close(fd)
os.unlink(path)
