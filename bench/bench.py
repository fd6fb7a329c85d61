#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""make bench: tagdisk next to the raw image and a bare FUSE pass-through, in one run.

Targets, all on images of the same size, prefilled with data (holes read too fast):
  raw          the image file itself
  passthrough  bench/passthrough.c: tagdiskd's FUSE transport (session loop, threads,
               buffer pool, open flags) with its own operations instead of the engine's:
               every request is served by pread/pwrite in the FUSE thread (the ceiling)
  bio          tagdiskd, mode = bio (make_request straight to the drive)
  rq-noop      tagdiskd, mode = rq, noop, depth 32
  rq-deadline  tagdiskd, mode = rq, deadline, depth 32
  loop         losetup --direct-io=on on rq-deadline's disk file
  mq-none      tagdiskd, mode = mq, scheduler none, depth 32 (one hardware context per CPU)
  loop-mq      losetup --direct-io=on on mq-none's disk file

Rounds are interleaved (every job on every target, then again), so drift on a noisy
machine spreads over all targets, and each round starts the targets at a different place
in their order, so no target always runs right after the same one; each figure is the
median of the rounds. Ratios are
to the raw file and to the pass-through. The daemon's CPU seconds per GB come from
/proc/<pid>/stat around each job; its peak RSS from VmHWM.

Then: fio psync numjobs=4 random writes with and without FOPEN_PARALLEL_DIRECT_WRITES,
the trace row (4k randrw QD32 for 10 s with and without `tagdiskctl trace --blktrace`:
IOPS ratio and dropped events), and the HDD model experiment (TCQ depth 1 vs 32; noop vs deadline on a mixed load).

Usage: bench/bench.py [--build DIR] [--on-disk] [--runtime S] [--rounds N] [--size SIZE]
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

JOBS = [
    # name, rw, bs, iodepth, extra
    ("4k randread QD1", "randread", "4k", 1, []),
    ("4k randread QD32", "randread", "4k", 32, []),
    ("4k randwrite QD32", "randwrite", "4k", 32, []),
    ("64k randrw 70/30 QD16", "randrw", "64k", 16, ["--rwmixread=70"]),
    ("1M seqread QD8", "read", "1M", 8, []),
    ("1M seqwrite QD8", "write", "1M", 8, []),
]

TARGETS = ["raw", "passthrough", "bio", "rq-noop", "rq-deadline", "loop", "mq-none", "loop-mq"]


def sh(*args, **kw):
    return subprocess.run(args, check=True, **kw)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def admin(sock, line):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(sock)
    s.sendall(line.encode() + b"\n")
    reply = s.makefile("rb").readline()
    s.close()
    return json.loads(reply)


class Daemon:
    """A tagdiskd (or the pass-through) serving one image, in the foreground."""

    def __init__(self, binary, image, workdir, name, args):
        self.mnt = os.path.join(workdir, name + ".mnt")
        self.sock = os.path.join(workdir, name + ".sock")
        os.makedirs(self.mnt, exist_ok=True)
        self.disk = os.path.join(self.mnt, "disk")
        self.log = open(os.path.join(workdir, name + ".log"), "w")
        cmd = [binary, "-f", "--image", image, "--mount", self.mnt, "--socket", self.sock] + args
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(200):
            if os.path.exists(self.disk) and os.path.ismount(self.mnt):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"{name} did not start; see {self.log.name}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def fio(filename, rw, bs, iodepth, runtime, size, extra, engine="libaio", numjobs=1):
    cmd = ["fio", "--name=bench", f"--filename={filename}", f"--rw={rw}", f"--bs={bs}",
           f"--iodepth={iodepth}", f"--ioengine={engine}", "--direct=1", "--time_based",
           f"--runtime={runtime}", "--ramp_time=1", f"--size={size}", f"--numjobs={numjobs}",
           "--group_reporting", "--output-format=json", "--randrepeat=0", "--norandommap"]
    cmd += extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    iops = job["read"]["iops"] + job["write"]["iops"]
    bw = (job["read"]["bw_bytes"] + job["write"]["bw_bytes"])
    p99 = []
    for d in ("read", "write"):
        if job[d]["iops"] > 0:
            p99.append(job[d]["clat_ns"]["percentile"].get("99.000000", 0) / 1000.0)
    moved = job["read"]["io_bytes"] + job["write"]["io_bytes"]
    return {"iops": iops, "bw": bw, "p99": max(p99) if p99 else 0.0, "bytes": moved}


def fmt_ratio(x, y):
    return f"{x / y:5.2f}" if y else "  -  "


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--on-disk", action="store_true", help="images on disk, not tmpfs")
    ap.add_argument("--runtime", type=int, default=3, help="seconds per fio job")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", default="1G")
    ap.add_argument("--skip-hdd", action="store_true")
    ap.add_argument("--only-hdd", action="store_true", help="run only the HDD model experiment")
    ap.add_argument("--only-trace", action="store_true", help="run only the trace row")
    ap.add_argument("--trace-runtime", type=int, default=10, help="seconds per trace-row run")
    ap.add_argument("--workers", type=int, default=None,
                    help="[drive] workers for the tagdiskd targets (default: the daemon's)")
    a = ap.parse_args()

    build = os.path.abspath(a.build)
    tagdiskd = os.path.join(build, "tagdiskd")
    passthrough = os.path.join(build, "bench", "tagdisk-passthrough")
    if a.only_trace:
        trace_experiment(build, a)
        return
    for b in (tagdiskd, passthrough):
        if not os.access(b, os.X_OK):
            sys.exit(f"bench: {b} is missing (make all bench-tools)")
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        sys.exit("bench: needs root and /dev/fuse")

    if a.only_hdd:
        hdd_experiment(tagdiskd, a)
        return
    work = tempfile.mkdtemp(prefix="tagdisk-bench.", dir="/var/tmp" if a.on_disk else None)
    tmpfs = None
    if not a.on_disk:
        tmpfs = os.path.join(work, "tmpfs")
        os.makedirs(tmpfs)
        sh("mount", "-t", "tmpfs", "-o", "size=90%", "tmpfs", tmpfs)
    store = tmpfs or work
    daemons = {}
    loopdev = None
    loopdev_mq = None
    try:
        # One prefilled image, copied per target so nobody shares a file.
        first = os.path.join(store, "raw.img")
        sh("fio", "--name=fill", f"--filename={first}", "--rw=write", "--bs=1M",
           f"--size={a.size}", "--ioengine=psync", "--output=/dev/null")
        images = {"raw": first}
        for t in ("passthrough", "bio", "rq-noop", "rq-deadline", "mq-none"):
            images[t] = os.path.join(store, t + ".img")
            shutil.copyfile(first, images[t])

        common = ["--workers", str(a.workers)] if a.workers is not None else []
        daemons["passthrough"] = Daemon(passthrough, images["passthrough"], work, "passthrough", [])
        daemons["bio"] = Daemon(tagdiskd, images["bio"], work, "bio", ["--mode", "bio"] + common)
        daemons["rq-noop"] = Daemon(tagdiskd, images["rq-noop"], work, "rq-noop",
                                    ["--mode", "rq", "--elevator", "noop", "--depth", "32"] + common)
        daemons["rq-deadline"] = Daemon(tagdiskd, images["rq-deadline"], work, "rq-deadline",
                                        ["--mode", "rq", "--elevator", "deadline", "--depth", "32"]
                                        + common)
        daemons["mq-none"] = Daemon(tagdiskd, images["mq-none"], work, "mq-none",
                                    ["--mode", "mq", "--elevator", "none", "--depth", "32"] + common)
        loopdev_mq = subprocess.run(["losetup", "-f", "--show", "--direct-io=on",
                                     daemons["mq-none"].disk], check=True, capture_output=True,
                                    text=True).stdout.strip()
        loopdev = subprocess.run(["losetup", "-f", "--show", "--direct-io=on",
                                  daemons["rq-deadline"].disk], check=True, capture_output=True,
                                 text=True).stdout.strip()
        files = {"raw": images["raw"], "loop": loopdev, "loop-mq": loopdev_mq}
        for t in ("passthrough", "bio", "rq-noop", "rq-deadline", "mq-none"):
            files[t] = daemons[t].disk
        owner = {t: daemons[t] for t in daemons}
        owner["loop"] = daemons["rq-deadline"]
        owner["loop-mq"] = daemons["mq-none"]

        results = {(t, j[0]): [] for t in TARGETS for j in JOBS}
        cpu = {(t, j[0]): [] for t in TARGETS for j in JOBS}
        print(f"tagdisk bench: {len(JOBS)} jobs x {len(TARGETS)} targets x {a.rounds} rounds, "
              f"{a.runtime}s each, images {a.size} on {'disk' if a.on_disk else 'tmpfs'}",
              flush=True)
        for rnd in range(a.rounds):
            for job in JOBS:
                order = TARGETS[rnd % len(TARGETS):] + TARGETS[:rnd % len(TARGETS)]
                for t in order:
                    d = owner.get(t)
                    c0 = cpu_seconds(d.proc.pid) if d else 0
                    r = fio(files[t], job[1], job[2], job[3], a.runtime, a.size, job[4])
                    c1 = cpu_seconds(d.proc.pid) if d else 0
                    results[(t, job[0])].append(r)
                    if d and r["bytes"]:
                        cpu[(t, job[0])].append((c1 - c0) / (r["bytes"] / 1e9))
            print(f"  round {rnd + 1}/{a.rounds} done", flush=True)

        def med(t, j, k):
            return statistics.median(x[k] for x in results[(t, j)])

        print()
        hdr = (f"{'job':<22} {'target':<12} {'IOPS':>10} {'MB/s':>9} {'p99 us':>9} "
               f"{'CPU s/GB':>9} {'xraw':>6} {'xpass':>6} {'cpu xpass':>9}")
        print(hdr)
        print("-" * len(hdr))
        worst = {"bio": 9.0, "rq-deadline": 9.0, "rq-noop": 9.0, "mq-none": 9.0}
        loop_ratio = []  # mq vs rq through the loop device, per job
        worst_cpu = 0.0
        for job in JOBS:
            j = job[0]
            raw_iops = med("raw", j, "iops")
            pass_iops = med("passthrough", j, "iops")
            pass_cpu = statistics.median(cpu[("passthrough", j)]) if cpu[("passthrough", j)] else 0
            for t in TARGETS:
                iops = med(t, j, "iops")
                mbs = med(t, j, "bw") / 1e6
                p99 = med(t, j, "p99")
                c = statistics.median(cpu[(t, j)]) if cpu[(t, j)] else None
                cs = f"{c:9.2f}" if c is not None else f"{'-':>9}"
                cx = fmt_ratio(c, pass_cpu) if c is not None and t != "loop" else "  -  "
                print(f"{j:<22} {t:<12} {iops:10.0f} {mbs:9.1f} {p99:9.0f} {cs} "
                      f"{fmt_ratio(iops, raw_iops):>6} {fmt_ratio(iops, pass_iops):>6} {cx:>9}")
                if t in worst:
                    worst[t] = min(worst[t], iops / pass_iops)
                if t == "loop-mq" and med("loop", j, "iops"):
                    loop_ratio.append((j, iops / med("loop", j, "iops")))
                if t == "rq-deadline" and c is not None and pass_cpu:
                    worst_cpu = max(worst_cpu, c / pass_cpu)
            print()

        rss = {t: peak_rss_kib(d.proc.pid) for t, d in daemons.items()}
        # psync: parallel direct writes on and off, on a fresh rq-deadline daemon each.
        print("fio psync randwrite 4k numjobs=4 on the disk file (rq, deadline, depth 32):")
        for label, opt in (("with FOPEN_PARALLEL_DIRECT_WRITES", []),
                           ("without (-o no_parallel_direct_writes)",
                            ["-o", "no_parallel_direct_writes"])):
            img = os.path.join(store, "psync.img")
            shutil.copyfile(first, img)
            d = Daemon(tagdiskd, img, work, "psync", ["--depth", "32"] + common + opt)
            r = fio(d.disk, "randwrite", "4k", 1, a.runtime, a.size, [], engine="psync",
                    numjobs=4)
            d.stop()
            os.unlink(img)
            print(f"  {label:<40} {r['iops']:10.0f} IOPS  p99 {r['p99']:8.0f} us")
        print()

        trace_row = trace_experiment(build, a, store, first)
        print()

        print("targets (ratios from this run):")
        print(f"  bio >= 0.95 x pass-through on every job: worst {worst['bio']:.2f} "
              f"-> {'met' if worst['bio'] >= 0.95 else 'NOT met'}")
        print(f"  rq (deadline, depth 32) >= 0.90 x pass-through: worst {worst['rq-deadline']:.2f} "
              f"-> {'met' if worst['rq-deadline'] >= 0.90 else 'NOT met'}")
        print(f"  rq (noop, depth 32), for reference: worst {worst['rq-noop']:.2f}")
        print(f"  mq (none, depth 32) >= 0.90 x pass-through: worst {worst['mq-none']:.2f} "
              f"-> {'met' if worst['mq-none'] >= 0.90 else 'NOT met'}")
        for j, r in loop_ratio:
            print(f"  loop device, mq / rq (deadline) on {j}: {r:.2f}")
        print(f"  trace --blktrace: 0 dropped and >= 0.90 x untraced IOPS: {trace_row[1]} dropped, "
              f"{trace_row[0]:.2f} -> "
              f"{'met' if trace_row[1] == 0 and trace_row[0] >= 0.90 else 'NOT met'}")
        print(f"  CPU per GB in rq mode <= 1.2 x pass-through: worst {worst_cpu:.2f} "
              f"-> {'met' if worst_cpu <= 1.2 else 'NOT met'}")
        bound = 32 * 1024 + 128 * 1024
        for t, k in sorted(rss.items()):
            print(f"  peak RSS {t:<12} {k / 1024:7.1f} MiB (bound 32 MiB + nr_requests 128 x 1 MiB "
                  f"= {bound / 1024:.0f} MiB) -> {'met' if k <= bound else 'NOT met'}")
        print()
    finally:
        for dev in (loopdev, loopdev_mq):
            if dev:
                subprocess.run(["losetup", "-d", dev])
        for d in daemons.values():
            d.stop()
        if tmpfs:
            subprocess.run(["umount", tmpfs])
        shutil.rmtree(work, ignore_errors=True)

    if not a.skip_hdd:
        hdd_experiment(tagdiskd, a)


def trace_experiment(build, a, store=None, image=None):
    """The trace row: fio 4k randrw QD32 on rq-deadline, untraced and traced in turn.

    Traced runs have `tagdiskctl trace --blktrace` (default buffers) writing to the same
    file system as the image from before fio starts until after it ends. Return:
    (IOPS ratio traced / untraced, events dropped), medians over a.rounds pairs.
    """
    tagdiskd = os.path.join(build, "tagdiskd")
    tagdiskctl = os.path.join(build, "tagdiskctl")
    work = tempfile.mkdtemp(prefix="tagdisk-trace.", dir=store)
    img = image
    if img is None:
        img = os.path.join(work, "trace.img")
        sh("fio", "--name=fill", f"--filename={img}", "--rw=write", "--bs=1M",
           f"--size={a.size}", "--ioengine=psync", "--output=/dev/null")
    runtime = a.trace_runtime
    plain, traced, dropped, events = [], [], 0, []
    d = Daemon(tagdiskd, img, work, "trace", ["--mode", "rq", "--elevator", "deadline",
                                              "--depth", "32"])
    try:
        for rnd in range(a.rounds):
            for with_trace in ((False, True) if rnd % 2 == 0 else (True, False)):
                if not with_trace:
                    plain.append(fio(d.disk, "randrw", "4k", 32, runtime, a.size, [])["iops"])
                    continue
                out = os.path.join(work, "t.blktrace.0")
                before = admin(d.sock, "stats").get("trace_dropped", 0)
                err = open(os.path.join(work, "tracer.err"), "w+")
                tracer = subprocess.Popen([tagdiskctl, "-s", d.sock, "trace", "--blktrace", out],
                                          stderr=err)
                for _ in range(600):
                    err.seek(0)
                    if "writing" in err.read() or tracer.poll() is not None:
                        break
                    time.sleep(0.05)
                traced.append(fio(d.disk, "randrw", "4k", 32, runtime, a.size, [])["iops"])
                tracer.send_signal(signal.SIGINT)
                tracer.wait(120)
                err.seek(0)
                summary = err.read()
                err.close()
                dropped += admin(d.sock, "stats").get("trace_dropped", 0) - before
                for line in summary.splitlines():
                    if " events (" in line:
                        events.append(int(line.split()[2]))
                os.unlink(out)
    finally:
        d.stop()
        shutil.rmtree(work, ignore_errors=True)
    p, t = statistics.median(plain), statistics.median(traced)
    ratio = t / p if p else 0
    print(f"trace: fio 4k randrw QD32, {runtime}s, rq deadline depth 32, median of {a.rounds}:")
    print(f"  untraced {p:10.0f} IOPS")
    print(f"  traced   {t:10.0f} IOPS  (tagdiskctl trace --blktrace; {max(events or [0])} events "
          f"in the largest file)")
    print(f"  traced / untraced {ratio:.2f}, dropped {dropped} -> "
          f"{'met' if dropped == 0 and ratio >= 0.90 else 'NOT met'} (target: 0 dropped, >= 0.90)")
    return ratio, dropped


def hdd_experiment(tagdiskd, a):
    work = tempfile.mkdtemp(prefix="tagdisk-hdd.")
    img = os.path.join(work, "hdd.img")
    conf = os.path.join(work, "hdd.ini")
    with open(conf, "w") as f:
        f.write("[drive]\nmodel = hdd\ncommand_timeout_ms = 0\n")
    runtime = max(a.runtime * 2, 8)
    print(f"HDD model (7200 rpm, 0.5-12 ms seeks, 150 MB/s, SPTF in the drive), 4 GiB disk, "
          f"{runtime}s per run:")
    try:
        rows = {}
        # noop: the queue hands requests over in arrival order, so any reordering
        # is the drive's own (shortest positioning time first among its tags).
        for depth in (1, 32):
            d = Daemon(tagdiskd, img, work, f"hdd{depth}",
                       ["-c", conf, "--size", "4G", "--depth", str(depth), "--elevator", "noop"])
            r = fio(d.disk, "randread", "4k", 32, runtime, "4G", [])
            st = admin(d.sock, "stats")["drive"]
            d.stop()
            rows[depth] = (r["iops"], st["mean_seek_sectors"])
            print(f"  4k randread QD32, noop, tag depth {depth:>2}: {r['iops']:8.1f} IOPS, mean seek "
                  f"{st['mean_seek_sectors'] / 2048:8.1f} tracks")
        gain = rows[32][0] / rows[1][0] if rows[1][0] else 0
        print(f"  depth 32 / depth 1: {gain:.2f}x -> {'met' if gain >= 1.5 else 'NOT met'} "
              "(target >= 1.5)")
        mixed = {}
        for elv in ("noop", "deadline"):
            d = Daemon(tagdiskd, img, work, f"hdd-{elv}",
                       ["-c", conf, "--depth", "1", "--elevator", elv])
            jobfile = os.path.join(work, "mixed.fio")
            with open(jobfile, "w") as f:
                f.write(f"[global]\nfilename={d.disk}\ndirect=1\nioengine=libaio\n"
                        f"time_based\nruntime={runtime}\nsize=4G\n"
                        "[seq1]\nrw=read\nbs=64k\niodepth=4\noffset=0\nsize=2G\n"
                        "[seq2]\nrw=read\nbs=64k\niodepth=4\noffset=2G\nsize=2G\n"
                        "[rand]\nrw=randwrite\nbs=4k\niodepth=4\n")
            out = subprocess.run(["fio", "--output-format=json", jobfile], check=True,
                                 capture_output=True, text=True).stdout
            jobs = json.loads(out[out.index("{"):])["jobs"]
            st = admin(d.sock, "stats")["drive"]
            d.stop()
            mb = sum(j["read"]["bw_bytes"] + j["write"]["bw_bytes"] for j in jobs) / 1e6
            iops = sum(j["read"]["iops"] + j["write"]["iops"] for j in jobs)
            mixed[elv] = mb
            print(f"  mixed (2 sequential readers + 1 random writer), depth 1, {elv:<8}: "
                  f"{mb:7.1f} MB/s, {iops:7.1f} IOPS, mean seek "
                  f"{st['mean_seek_sectors'] / 2048:8.1f} tracks")
        print(f"  deadline / noop: {mixed['deadline'] / mixed['noop']:.2f}x -> "
              f"{'met' if mixed['deadline'] >= mixed['noop'] else 'NOT met'} (target >= 1.0)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
