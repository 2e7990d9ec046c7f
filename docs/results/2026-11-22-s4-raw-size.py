#!/usr/bin/env python3
"""Raw pwrite+fdatasync loops appending records of 128 B (the bench's floor) and of 1,200 B
(a YCSB-A redo record plus its marker) to a preallocated 64 MiB file, alternated: how much of
YCSB-A's gap to the 128-byte floor is the record size alone."""
import os, sys, time, statistics as st

path = sys.argv[1] if len(sys.argv) > 1 else "/work/tmp-dur/raw-size.bin"
size = 64 << 20
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
z = bytes(1 << 20)
for i in range(size >> 20):
    os.pwrite(fd, z, i << 20)
os.fsync(fd)

def loop(rec, secs=1.0):
    b = b"\xa5" * rec
    off, n, t0 = 0, 0, time.perf_counter()
    while time.perf_counter() - t0 < secs:
        os.pwrite(fd, b, off)
        os.fdatasync(fd)
        off = (off + rec) % (size - rec)
        n += 1
    return n / (time.perf_counter() - t0)

res = {128: [], 1200: []}
for _ in range(5):
    for rec in (128, 1200):
        res[rec].append(loop(rec))
for rec, v in res.items():
    print(f"{rec:5} B: {st.median(v):7.0f} /s [{min(v):.0f}-{max(v):.0f}]")
r = [b / a for a, b in zip(res[128], res[1200])]
print(f"1200 B / 128 B: {st.median(r):.2f} [{min(r):.2f}-{max(r):.2f}]")
os.close(fd)
os.unlink(path)
