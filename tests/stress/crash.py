#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""tagdisk crash consistency: kill -9 at random points of a write workload, restart, check.

    tests/stress/crash.py [--cycles N] [--seed S] [--threads T]

The disk is RECORDS records of 4 KiB. In cycle c, each of T writer threads
writes its own records (a seeded random order of the records r with
r % T == t), each stamped with (c, r), and calls fsync after every
FSYNC_EVERY writes; after each fsync returns it prints how many of its
records it had written before that fsync. At a random moment (seeded) the
daemon is killed with SIGKILL, then started again on the same image.

The checker keeps, for every record, the set of stamps it may hold:
  - a record a thread wrote before its last completed fsync: exactly (c, r);
  - a record written after it, or possibly in flight: its old stamps or (c, r);
  - anything else: what it held after the previous cycle.
It reads the whole disk after every restart and fails on any record holding
something else: a lost acknowledged write, a torn or misplaced record, or an
old write (requeued after a reset, say) landing on a newer one. What it reads
becomes the expectation for the next cycle.

The queue modes rotate: rq with deadline, rq with noop, bio, and rq with the
ssd latency model (commands stay in flight long enough to be caught).
Exit status: 0 pass, 1 a violation, 77 skipped.
"""
import argparse
import hashlib
import os
import random
import struct
import subprocess
import sys
import tempfile
import shutil
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tdlib  # noqa: E402
from tdlib import Failure, log  # noqa: E402

RECORD = 4096
RECORDS = 32768  # 128 MiB: the writers rarely finish before the kill
FSYNC_EVERY = 16
MAGIC = b"TDCRASH2"
HEAD = struct.Struct("<8sQQ")


def record(run, i):
    head = HEAD.pack(MAGIC, run, i)
    seed = hashlib.sha256(head).digest()
    return head + (seed * (RECORD // len(seed) + 1))[:RECORD - len(head)]


def order(seed, cycle, t, nthreads):
    mine = list(range(t, RECORDS, nthreads))
    random.Random("%d/%d/%d" % (seed, cycle, t)).shuffle(mine)
    return mine


def writer_main(disk, seed, cycle, nthreads):
    """Subprocess: the writer threads. Prints "t n" after each completed fsync."""
    import threading
    out = threading.Lock()
    failed = []

    def run(t):
        try:
            fd = os.open(disk, os.O_RDWR)
            for n, i in enumerate(order(seed, cycle, t, nthreads), 1):
                os.pwrite(fd, record(cycle, i), i * RECORD)
                if n % FSYNC_EVERY == 0:
                    os.fsync(fd)
                    with out:
                        sys.stdout.write("%d %d\n" % (t, n))
                        sys.stdout.flush()
        except OSError as e:
            failed.append(e)

    threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in range(nthreads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    sys.exit(1 if failed else 0)


def stamp_of(data, i):
    """The run that wrote record @i, 0 for never written, or None when it is neither."""
    if data == bytes(RECORD):
        return 0
    magic, run, idx = HEAD.unpack_from(data)
    if magic != MAGIC or idx != i or data != record(run, i):
        return None
    return run


MODES = [
    ("rq deadline", ["--mode", "rq", "--elevator", "deadline"], None),
    ("rq noop", ["--mode", "rq", "--elevator", "noop"], None),
    ("bio", ["--mode", "bio"], None),
    ("rq ssd", ["--mode", "rq", "--elevator", "deadline"],
     "[drive]\nmodel = ssd\nssd_latency_us = 200\nworkers = 4\n"),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=int(os.environ.get("CRASH_CYCLES", "20")))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("CRASH_SEED", "0")) or
                    int(time.time()) % 1000000)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--tmpdir", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--writer", nargs=4, metavar=("DISK", "SEED", "CYCLE", "THREADS"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.writer:
        writer_main(args.writer[0], *map(int, args.writer[1:]))
        return
    tdlib.require("fusermount3")
    rng = random.Random(args.seed)
    log("crash: seed %d (rerun with --seed %d), %d cycles, %d writer threads, %d records of "
        "4 KiB, fsync every %d writes" % (args.seed, args.seed, args.cycles, args.threads,
                                          RECORDS, FSYNC_EVERY))
    work = tempfile.mkdtemp(prefix="tagdisk-crash.", dir=args.tmpdir)
    d = tdlib.Daemon(work, "crash")
    allowed = [{0} for _ in range(RECORDS)]
    acked_total = 0
    t0 = time.monotonic()
    try:
        for cycle in range(1, args.cycles + 1):
            name, opts, ini = MODES[(cycle - 1) % len(MODES)]
            opts = list(opts)
            if ini:
                path = os.path.join(work, "crash.ini")
                with open(path, "w") as f:
                    f.write(ini)
                opts = ["-c", path] + opts
            # The image is created (sparse) by the first start, and reused ever after.
            d.start(*(opts + (["--size", str(RECORDS * RECORD)] if cycle == 1 else [])))
            acks = os.path.join(work, "acked")
            with open(acks, "w") as out:
                w = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--writer",
                                      d.disk, str(args.seed), str(cycle), str(args.threads)],
                                     stdout=out, stderr=subprocess.DEVNULL)
            # A random moment after the writers have had some fsyncs acknowledged.
            end = time.monotonic() + 60
            while os.path.getsize(acks) == 0 and w.poll() is None and time.monotonic() < end:
                time.sleep(0.005)
            delay = rng.uniform(0.0, 1.5)
            time.sleep(delay)
            finished = w.poll() is not None
            d.kill9()
            w.wait()
            last = {}
            with open(acks) as f:
                for line in f:
                    t, n = map(int, line.split())
                    last[t] = max(last.get(t, 0), n)
            acked = sum(last.values())
            acked_total += acked
            for t in range(args.threads):
                seq = order(args.seed, cycle, t, args.threads)
                n = last.get(t, 0)
                for i in seq[:n]:
                    allowed[i] = {cycle}
                for i in seq[n:]:
                    allowed[i].add(cycle)

            d.start(*opts)
            bad = []
            with open(d.disk, "rb") as f:
                for i in range(RECORDS):
                    s = stamp_of(f.read(RECORD), i)
                    if s not in allowed[i]:
                        bad.append((i, s, sorted(allowed[i])))
                    allowed[i] = {s}
            rc = d.stop()
            log("crash: cycle %2d (%-11s): kill -9 %.2f s after the first fsync%s, %5d "
                "acknowledged records, %s" % (cycle, name, delay,
                                              " (writers had finished)" if finished else "",
                                              acked, "all intact" if not bad else
                                              "%d BAD" % len(bad)))
            if rc != 0:
                raise Failure("cycle %d: tagdiskd exited with status %d on SIGTERM:\n%s" %
                              (cycle, rc, d.log_text()))
            if bad:
                raise Failure("cycle %d (%s): %d records hold what they may not; first: %s" %
                              (cycle, name, len(bad), "; ".join(
                                  "record %d holds stamp %s, allowed %s" % b for b in bad[:5])))
    finally:
        d.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    log("crash: PASS: %d cycles, %d acknowledged records checked after kill -9, %.1f s" %
        (args.cycles, acked_total, time.monotonic() - t0))


if __name__ == "__main__":
    tdlib.main_wrapper(main)
