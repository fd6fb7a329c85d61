#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""idle_probe.py - write after idling, read back, compare (tests/bats/idle_writes.bats).

  idle_probe.py DISK ROUNDS IDLE_SECONDS [LONG_IDLE_SECONDS]

Each round dirties many of the daemon's transfer buffers at once (16
concurrent 64 KiB O_DIRECT writes), idles IDLE_SECONDS (the daemon's idle
timers fire about then), then writes a stream of probes of several sizes,
each with its own pattern, back to back for 150 ms, so that some arrive
while the daemon is busy giving memory back; then reads every probe back
with O_DIRECT and compares it byte for byte. A last round idles
LONG_IDLE_SECONDS first (longer than every timer of the daemon).
Prints one line per mismatch and a summary; exits 1 on any mismatch.
"""
import mmap
import os
import sys
import threading
import time

SIZES = [4096, 16384, 32768, 65536, 1 << 20]
REGION = 2 << 20  # one probe per 2 MiB region


def pattern(n, size):
    buf = mmap.mmap(-1, size)
    stamp = ("probe %08d " % n).encode()
    buf.write((stamp * (size // len(stamp) + 1))[:size])
    return buf


def main():
    disk, rounds, idle = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    long_idle = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    fd = os.open(disk, os.O_RDWR | os.O_DIRECT)
    size = os.fstat(fd).st_size
    regions = size // REGION - 8  # the last 16 MiB take the bursts
    burst_at = (size // REGION - 8) * REGION
    filler = pattern(0, 65536)
    probes, bad, n = [], 0, 1

    def burst(i):
        os.pwrite(fd, filler, burst_at + i * 65536)

    for r in range(rounds + (1 if long_idle else 0)):
        threads = [threading.Thread(target=burst, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(long_idle if r == rounds else idle)
        end = time.monotonic() + 0.15
        while time.monotonic() < end and n < regions:
            psize = SIZES[n % len(SIZES)]
            buf = pattern(n, psize)
            off = n * REGION
            if os.pwrite(fd, buf, off) != psize:
                print("probe %d: short write" % n)
                return 1
            probes.append((r, n, off, psize, buf))
            n += 1
            time.sleep(0.002)
    for r, k, off, psize, buf in probes:
        back = mmap.mmap(-1, psize)
        if os.preadv(fd, [back], off) != psize or back[:] != buf[:]:
            bad += 1
            print("round %d probe %d (%d bytes at %d): read back differs (%d zero bytes)"
                  % (r, k, psize, off, back[:].count(0)))
    print("%d of %d probes read back wrong, %d rounds" % (bad, len(probes), rounds))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
