#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""make bench: tagdisk next to the raw image and a bare FUSE pass-through, in one run.

The FUSE transport is a dimension: every FUSE target runs twice, with --transport classic
(read/write on /dev/fuse) and with --transport uring (FUSE over io_uring, a ring per CPU).
Targets, all on images of the same size, prefilled with data (holes read too fast):
  raw                the image file itself
  pass-T             bench/passthrough.c: tagdiskd's FUSE transport T (session loop,
                     threads or rings, buffer pool, open flags) with its own operations
                     instead of the engine's: every request is served by pread/pwrite in
                     the FUSE thread (the ceiling of transport T)
  bio-T              tagdiskd --transport T, mode = bio (make_request straight to the drive)
  rq-T               tagdiskd --transport T, mode = rq, deadline, depth 32
  loop-T             losetup --direct-io=on on rq-T's disk file
  loop-pass-T        losetup --direct-io=on on pass-T's disk file; 4k randread QD32 only
  mq-T               tagdiskd --transport T, mode = mq (scheduler none, depth 32, one
                     hardware context per CPU); on uring each ring feeds its CPU's
                     software queue
  loop-mq-T          losetup --direct-io=on on mq-T's disk file
  qsd-classic        qemu-storage-daemon's FUSE export of the image (file driver, its
                     defaults), which serves on classic /dev/fuse: the FUSE peer users
                     compare tagdisk with
  loop-qsd-classic   losetup --direct-io=on on the export; 4k randread QD32 only
T is classic or uring. Jobs: one submitting fio job each, and "4k randread QD32 2 jobs"
(numjobs=2 at iodepth 16 each, group_reporting: IOPS and bandwidth summed over both).

Rounds are interleaved (every job on every target, then again), so drift on a noisy
machine spreads over all targets, and each round starts the targets at a different place
in their order, so no target always runs right after the same one; each figure is the
median of the rounds. Ratios are to the raw file, to the pass-through of the same
transport and, for a uring target, to its classic counterpart. The daemon's CPU time per
I/O comes from /proc/<pid>/stat around each fio run, ramp included, over that run's I/Os
(the I/Os fio measured scaled by (ramp + runtime) / runtime); its peak RSS from VmHWM.
With two transports the matrix has half as many targets again as before (without rq
noop, now out of it), so a job runs 2 s, not 3: `make bench` takes about 25 minutes on
2 cores.

Then: fio psync numjobs=4 random writes with and without FOPEN_PARALLEL_DIRECT_WRITES,
the trace row (4k randrw QD32 for 10 s with and without `tagdiskctl trace --blktrace`:
IOPS ratio and dropped events), the logging row (4k randwrite and randread QD32 with and
without the write log recording to a file beside the images, on tmpfs unless --on-disk:
IOPS ratios, and the log's size), the restart row (bench/bench_restart.py: the I/O pause
when tagdiskd is killed 20 times and taken over, and when it restarts in place), and the
HDD model experiment (TCQ depth 1 vs 32; noop vs
deadline on a mixed load); these three leave tagdiskd's transport at its default (auto)
and print the one it chose.

The report also goes to OUT/bench.txt (--out, default BUILD/bench), the table's medians to
OUT/bench.json, and the table as a chart, IOPS per job as ratios to the raw file and to the
pass-through of the same transport, to OUT/bench.svg (tools/plots/bench_chart.py, with
Debian's python3-matplotlib). --chart RESULT.json draws the chart again from a saved result
without running anything.

Usage: bench/bench.py [--build DIR] [--on-disk] [--runtime S] [--rounds N] [--size SIZE]
                      [--out DIR] | --chart RESULT.json [--out DIR]
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

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH_CHART = os.path.join(os.path.dirname(HERE), "tools", "plots", "bench_chart.py")

JOBS = [
    # name, rw, bs, iodepth (per fio job), extra, numjobs
    ("4k randread QD1", "randread", "4k", 1, [], 1),
    ("4k randread QD32", "randread", "4k", 32, [], 1),
    ("4k randread QD32 2 jobs", "randread", "4k", 16, [], 2),
    ("4k randwrite QD32", "randwrite", "4k", 32, [], 1),
    ("64k randrw 70/30 QD16", "randrw", "64k", 16, ["--rwmixread=70"], 1),
    ("1M seqread QD8", "read", "1M", 8, [], 1),
    ("1M seqwrite QD8", "write", "1M", 8, [], 1),
]

TRANSPORTS = ("classic", "uring")
KINDS = ("pass", "bio", "rq", "loop", "mq", "loop-mq")
QSD = "qsd-classic"  # qemu-storage-daemon's FUSE export: libfuse on /dev/fuse
TARGETS = ["raw"] + [f"{k}-{tr}" for k in KINDS for tr in TRANSPORTS] + [QSD]
# Loop devices on the pass-through disks (the loop ceiling) and on the export, for this job
# only.
LOOP_PASS_JOB = "4k randread QD32"
LOOP_PASS = [f"loop-pass-{tr}" for tr in TRANSPORTS] + ["loop-" + QSD]
RAMP = 1  # fio --ramp_time, seconds


def job_targets(job):
    return TARGETS + (LOOP_PASS if job == LOOP_PASS_JOB else [])


def transport_of(target):
    """classic, uring, or None for the raw file."""
    return target.rsplit("-", 1)[1] if "-" in target else None


def pass_of(target):
    """The pass-through a target is compared with: same transport (None for raw)."""
    tr = transport_of(target)
    return f"pass-{tr}" if tr else None


def classic_of(target):
    """A uring target's classic counterpart, else None."""
    if transport_of(target) != "uring":
        return None
    return target[:-len("uring")] + "classic"


def sh(*args, **kw):
    return subprocess.run(args, check=True, **kw)


def fill_image(path, size):
    """Write @path whole with fio's data, so that reads come from allocated blocks."""
    sh("fio", "--name=fill", f"--filename={path}", "--rw=write", "--bs=1M", f"--size={size}",
       "--ioengine=psync", "--output=/dev/null")


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


def fuse_transport(d):
    """The FUSE transport a tagdiskd serves with, from its status."""
    for _ in range(200):
        if os.path.exists(d.sock):
            break
        time.sleep(0.05)
    return admin(d.sock, "status").get("transport", "?")


class Daemon:
    """A tagdiskd (or the pass-through) serving one image, in the foreground."""

    def __init__(self, binary, image, workdir, name, args, transport=None):
        self.mnt = os.path.join(workdir, name + ".mnt")
        self.sock = os.path.join(workdir, name + ".sock")
        os.makedirs(self.mnt, exist_ok=True)
        self.disk = os.path.join(self.mnt, "disk")
        self.log = open(os.path.join(workdir, name + ".log"), "w")
        cmd = [binary, "-f", "--image", image, "--mount", self.mnt, "--socket", self.sock] + args
        if transport:  # None: the binary's default (tagdiskd auto, the pass-through classic)
            cmd += ["--transport", transport]
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
        # A daemon that died (a crash: its mount waits for a successor) or was killed
        # leaves its mount behind; the bench has no successor to give it.
        if os.path.ismount(self.mnt) or self.mnt in open("/proc/mounts").read():
            subprocess.run(["umount", "-l", self.mnt], stderr=subprocess.DEVNULL)
        self.log.close()


class Qsd:
    """qemu-storage-daemon exporting one image through FUSE (its export is a regular file
    that becomes the mount point), with the file driver's defaults: a thread pool, the page
    cache (tmpfs has no O_DIRECT)."""

    def __init__(self, image, workdir, name):
        self.disk = os.path.join(workdir, name + ".export")
        self.mnt = self.disk  # the export is its own mount point (Daemon.stop unmounts it)
        open(self.disk, "w").close()
        self.log = open(os.path.join(workdir, name + ".log"), "w")
        cmd = ["qemu-storage-daemon", "--blockdev",
               f"driver=file,node-name=file0,filename={image},cache.direct=off",
               "--export", f"type=fuse,id=exp0,node-name=file0,mountpoint={self.disk},"
               "writable=on"]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(200):
            if os.path.ismount(self.disk):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"{name} did not start; see {self.log.name}")

    stop = Daemon.stop


def fio(filename, rw, bs, iodepth, runtime, size, extra, engine="libaio", numjobs=1):
    """One fio run. With numjobs > 1, --group_reporting makes fio's one report the sum of
    the jobs' IOPS, bandwidth and I/Os (p99 over all their completions).

    ios_run estimates the I/Os of the whole run, ramp included, at the measured rate: what
    the daemon's CPU time around the run is divided by.
    """
    cmd = ["fio", "--name=bench", f"--filename={filename}", f"--rw={rw}", f"--bs={bs}",
           f"--iodepth={iodepth}", f"--ioengine={engine}", "--direct=1", "--time_based",
           f"--runtime={runtime}", f"--ramp_time={RAMP}", f"--size={size}",
           f"--numjobs={numjobs}", "--group_reporting", "--output-format=json",
           "--randrepeat=0", "--norandommap"]
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
    ios = job["read"]["total_ios"] + job["write"]["total_ios"]
    measured = max(job["read"]["runtime"], job["write"]["runtime"]) / 1000.0
    ios_run = ios * (measured + RAMP) / measured if measured else 0
    return {"iops": iops, "bw": bw, "p99": max(p99) if p99 else 0.0, "bytes": moved,
            "ios": ios, "ios_run": ios_run}


def qsd_version():
    out = subprocess.run(["qemu-storage-daemon", "--version"], capture_output=True,
                         text=True).stdout.split("\n")[0]
    return out.replace("qemu-storage-daemon version", "qemu-storage-daemon", 1) or "?"


def fmt_ratio(x, y):
    return f"{x / y:5.2f}" if x is not None and y else "  -  "


def verdict(ok):
    return "met" if ok else "NOT met"


class Tee:
    """stdout that also goes to a file: the report next to its chart."""

    def __init__(self, stream, path):
        self.stream = stream
        self.file = open(path, "w")

    def write(self, text):
        self.stream.write(text)
        self.file.write(text)

    def flush(self):
        self.stream.flush()
        self.file.flush()


def draw_chart(result, out_dir):
    """Draw OUT/bench.svg from a saved result. A missing matplotlib costs the chart only."""
    svg = os.path.join(out_dir, "bench.svg")
    r = subprocess.run([BENCH_CHART, result, svg], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"bench: no chart: {(r.stderr or r.stdout).strip()}", flush=True)
        return False
    print(f"chart: {svg} (from {result})", flush=True)
    return True


def save_result(path, a, jobs, job_targets_, med, cpu_us):
    """The table's medians, what bench_chart.py draws."""
    res = {}
    for job in jobs:
        j = job[0]
        res[j] = {t: {"iops": med(t, j, "iops"), "mb_s": med(t, j, "bw") / 1e6,
                      "p99_us": med(t, j, "p99"), "cpu_us_per_io": cpu_us(t, j)}
                  for t in job_targets_(j)}
    u = os.uname()
    saved = {"format": "tagdisk-bench 1",
             "date": time.strftime("%Y-%m-%d"),
             "machine": f"{os.cpu_count()} CPUs, {u.sysname} {u.release}",
             "runtime_s": a.runtime, "rounds": a.rounds, "size": a.size,
             "images": "disk" if a.on_disk else "tmpfs",
             "jobs": [job[0] for job in jobs],
             "targets": {job[0]: job_targets_(job[0]) for job in jobs},
             "references": ["raw"], "results": res}
    with open(path + ".tmp", "w") as f:
        json.dump(saved, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--on-disk", action="store_true", help="images on disk, not tmpfs")
    ap.add_argument("--runtime", type=int, default=2, help="seconds per fio job")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", default="1G")
    ap.add_argument("--rbd", action="store_true",
                    help="only the Ceph RBD matrix (bench/bench_rbd.py) on a local cluster")
    ap.add_argument("--skip-hdd", action="store_true")
    ap.add_argument("--only-hdd", action="store_true", help="run only the HDD model experiment")
    ap.add_argument("--only-trace", action="store_true", help="run only the trace row")
    ap.add_argument("--only-restart", action="store_true",
                    help="run only the restart row (bench/bench_restart.py)")
    ap.add_argument("--trace-runtime", type=int, default=10, help="seconds per trace-row run")
    ap.add_argument("--only-log", action="store_true", help="run only the logging row")
    ap.add_argument("--log-runtime", type=int, default=2, help="seconds per logging-row run")
    ap.add_argument("--log-rounds", type=int, default=9, help="pairs of logging-row runs")
    ap.add_argument("--workers", type=int, default=None,
                    help="[drive] workers for the tagdiskd targets (default: the daemon's)")
    ap.add_argument("--out", help="where bench.txt, bench.json and bench.svg go "
                    "(default: BUILD/bench)")
    ap.add_argument("--chart", metavar="RESULT.json",
                    help="only draw OUT/bench.svg from a saved result")
    a = ap.parse_args()
    out_dir = os.path.abspath(a.out or os.path.join(a.build, "bench"))
    if a.chart:
        os.makedirs(out_dir, exist_ok=True)
        return 0 if draw_chart(os.path.abspath(a.chart), out_dir) else 1
    if a.rbd:
        import bench_rbd
        return bench_rbd.main(a)

    build = os.path.abspath(a.build)
    tagdiskd = os.path.join(build, "tagdiskd")
    passthrough = os.path.join(build, "bench", "tagdisk-passthrough")
    if a.only_trace:
        trace_experiment(build, a)
        return
    if a.only_restart:
        import bench_restart
        return bench_restart.main(["--build", build])
    if a.only_log:
        log_experiment(build, a)
        return
    for b in (tagdiskd, passthrough):
        if not os.access(b, os.X_OK):
            sys.exit(f"bench: {b} is missing (make all bench-tools)")
    if not shutil.which("fio"):
        sys.exit("bench: fio is missing (Debian: apt-get install fio)")
    if not shutil.which("qemu-storage-daemon"):
        sys.exit("bench: qemu-storage-daemon is missing (Debian: apt-get install "
                 "--no-install-recommends qemu-system-common)")
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        sys.exit("bench: needs root and /dev/fuse")

    if a.only_hdd:
        hdd_experiment(tagdiskd, a)
        return
    os.makedirs(out_dir, exist_ok=True)
    sys.stdout = Tee(sys.stdout, os.path.join(out_dir, "bench.txt"))
    work = tempfile.mkdtemp(prefix="tagdisk-bench.", dir="/var/tmp" if a.on_disk else None)
    tmpfs = None
    if not a.on_disk:
        tmpfs = os.path.join(work, "tmpfs")
        os.makedirs(tmpfs)
        sh("mount", "-t", "tmpfs", "-o", "size=90%", "tmpfs", tmpfs)
    store = tmpfs or work
    daemons = {}
    qsd = None
    loopdevs = []
    try:
        # One prefilled image, copied per daemon so nobody shares a file.
        first = os.path.join(store, "raw.img")
        fill_image(first, a.size)
        images = {"raw": first}
        served = [f"{k}-{tr}" for k in ("pass", "bio", "rq", "mq") for tr in TRANSPORTS]
        for t in served + [QSD]:
            images[t] = os.path.join(store, t + ".img")
            shutil.copyfile(first, images[t])

        common = ["--workers", str(a.workers)] if a.workers is not None else []
        for tr in TRANSPORTS:
            daemons[f"pass-{tr}"] = Daemon(passthrough, images[f"pass-{tr}"], work,
                                           f"pass-{tr}", [], transport=tr)
            daemons[f"bio-{tr}"] = Daemon(tagdiskd, images[f"bio-{tr}"], work, f"bio-{tr}",
                                          ["--mode", "bio"] + common, transport=tr)
            daemons[f"rq-{tr}"] = Daemon(tagdiskd, images[f"rq-{tr}"], work, f"rq-{tr}",
                                         ["--mode", "rq", "--elevator", "deadline",
                                          "--depth", "32"] + common, transport=tr)
            daemons[f"mq-{tr}"] = Daemon(tagdiskd, images[f"mq-{tr}"], work, f"mq-{tr}",
                                         ["--mode", "mq", "--elevator", "none",
                                          "--depth", "32"] + common, transport=tr)
        qsd = Qsd(images[QSD], work, QSD)
        for t, d in daemons.items():
            # The pass-through fails to start on a transport it cannot have; ask tagdiskd.
            if not t.startswith("pass-") and fuse_transport(d) != transport_of(t):
                raise RuntimeError(f"{t} serves with {fuse_transport(d)}; see {d.log.name}")
        files = {"raw": images["raw"]}
        owner = {}
        for t in served:
            files[t] = daemons[t].disk
            owner[t] = daemons[t]
        files[QSD], owner[QSD] = qsd.disk, qsd
        under_loop = [(f"loop-{tr}", f"rq-{tr}") for tr in TRANSPORTS]
        under_loop += [(f"loop-pass-{tr}", f"pass-{tr}") for tr in TRANSPORTS]
        under_loop += [(f"loop-mq-{tr}", f"mq-{tr}") for tr in TRANSPORTS]
        under_loop += [("loop-" + QSD, QSD)]
        for t, under in under_loop:
            dev = subprocess.run(["losetup", "-f", "--show", "--direct-io=on",
                                  owner[under].disk], check=True, capture_output=True,
                                 text=True).stdout.strip()
            loopdevs.append(dev)
            files[t] = dev
            owner[t] = owner[under]

        keys = [(t, j[0]) for j in JOBS for t in job_targets(j[0])]
        results = {k: [] for k in keys}
        cpu = {k: [] for k in keys}
        print(f"tagdisk bench: {len(JOBS)} jobs x {len(TARGETS)} targets (+ {len(LOOP_PASS)} "
              f"on {LOOP_PASS_JOB}) x {a.rounds} rounds, {a.runtime}s each (+ {RAMP}s ramp), "
              f"images {a.size} on {'disk' if a.on_disk else 'tmpfs'}; FUSE transport "
              f"explicit (--transport classic | uring) on every tagdisk daemon; "
              f"{qsd_version()}", flush=True)
        for rnd in range(a.rounds):
            for job in JOBS:
                targets = job_targets(job[0])
                order = targets[rnd % len(targets):] + targets[:rnd % len(targets)]
                for t in order:
                    d = owner.get(t)
                    c0 = cpu_seconds(d.proc.pid) if d else 0
                    r = fio(files[t], job[1], job[2], job[3], a.runtime, a.size, job[4],
                            numjobs=job[5])
                    c1 = cpu_seconds(d.proc.pid) if d else 0
                    results[(t, job[0])].append(r)
                    if d and r["ios_run"]:
                        cpu[(t, job[0])].append((c1 - c0) / r["ios_run"] * 1e6)
            print(f"  round {rnd + 1}/{a.rounds} done", flush=True)

        def med(t, j, k):
            return statistics.median(x[k] for x in results[(t, j)])

        def cpu_us(t, j):
            """Median daemon CPU microseconds per I/O, None for the raw file."""
            return statistics.median(cpu[(t, j)]) if cpu.get((t, j)) else None

        print()
        hdr = (f"{'job':<23} {'target':<17} {'IOPS':>9} {'MB/s':>8} {'p99 us':>8} "
               f"{'CPU us/IO':>9} {'xraw':>5} {'xpass':>5} {'xclassic':>8} {'cpu xpass':>9} "
               f"{'cpu u/c':>7}")
        print(hdr)
        print("-" * len(hdr))
        for job in JOBS:
            j = job[0]
            raw_iops = med("raw", j, "iops")
            for t in job_targets(j):
                iops = med(t, j, "iops")
                mbs = med(t, j, "bw") / 1e6
                p99 = med(t, j, "p99")
                c = cpu_us(t, j)
                cs = f"{c:9.2f}" if c is not None else f"{'-':>9}"
                p, cl = pass_of(t), classic_of(t)
                xpass = fmt_ratio(iops, med(p, j, "iops")) if p else "  -  "
                xcl = fmt_ratio(iops, med(cl, j, "iops")) if cl else "  -  "
                # The daemon beneath a loop device also serves the loop's I/O: no CPU x pass.
                cx = fmt_ratio(c, cpu_us(p, j)) if p and not t.startswith("loop") else "  -  "
                cuc = fmt_ratio(c, cpu_us(cl, j)) if cl else "  -  "
                print(f"{j:<23} {t:<17} {iops:9.0f} {mbs:8.1f} {p99:8.0f} {cs} "
                      f"{fmt_ratio(iops, raw_iops):>5} {xpass:>5} {xcl:>8} {cx:>9} {cuc:>7}")
            print()

        result = os.path.join(out_dir, "bench.json")
        save_result(result, a, JOBS, job_targets, med, cpu_us)
        draw_chart(result, out_dir)
        print()

        def ratio(t, u, j):
            d = med(u, j, "iops")
            return med(t, j, "iops") / d if d else 0.0

        def worst(pairs):
            """(lowest IOPS ratio, its job) over (target, reference, job) triples."""
            return min((ratio(t, u, j), j) for t, u, j in pairs)

        rss = {t: peak_rss_kib(d.proc.pid) for t, d in daemons.items()}
        # psync: parallel direct writes on and off, on a fresh rq-deadline daemon each.
        rows = []
        for label, opt in (("with FOPEN_PARALLEL_DIRECT_WRITES", []),
                           ("without (-o no_parallel_direct_writes)",
                            ["-o", "no_parallel_direct_writes"])):
            img = os.path.join(store, "psync.img")
            shutil.copyfile(first, img)
            d = Daemon(tagdiskd, img, work, "psync", ["--depth", "32"] + common + opt)
            tr = fuse_transport(d)
            r = fio(d.disk, "randwrite", "4k", 1, a.runtime, a.size, [], engine="psync",
                    numjobs=4)
            d.stop()
            os.unlink(img)
            rows.append(f"  {label:<40} {r['iops']:10.0f} IOPS  p99 {r['p99']:8.0f} us")
        print(f"fio psync randwrite 4k numjobs=4 on the disk file (rq, deadline, depth 32, "
              f"transport auto: {tr}):")
        print("\n".join(rows))
        print()

        trace_row = trace_experiment(build, a, store, first)
        print()
        log_row = log_experiment(build, a, store, first)
        print()

        qd32, two = "4k randread QD32", "4k randread QD32 2 jobs"
        single = [job[0] for job in JOBS if job[5] == 1]
        every = [job[0] for job in JOBS]
        print("targets (ratios of medians from this run):")
        r = ratio("loop-pass-uring", "loop-pass-classic", qd32)
        print(f"  pass-through uring >= 1.4 x classic, {qd32} through a loop device: "
              f"{r:.2f} -> {verdict(r >= 1.4)}")
        r = ratio("pass-uring", "pass-classic", two)
        print(f"  pass-through uring >= 2.0 x classic, {two}: {r:.2f} -> {verdict(r >= 2.0)}")
        r, j = worst(("pass-uring", "pass-classic", j) for j in single)
        print(f"  pass-through uring >= 0.95 x classic on every single-submitter job: worst "
              f"{r:.2f} ({j}) -> {verdict(r >= 0.95)}")
        cu, cc = cpu_us("pass-uring", qd32) or 0.0, cpu_us("pass-classic", qd32) or 0.0
        r = cu / cc if cc else 9.0
        print(f"  pass-through CPU per 4 KiB I/O uring <= 0.6 x classic, {qd32}: "
              f"{cu:.2f} / {cc:.2f} us = {r:.2f} -> {verdict(r <= 0.6)}")
        r, j = worst(("bio-uring", "pass-uring", j) for j in every)
        print(f"  bio-uring >= 0.9 x pass-uring on every job: worst {r:.2f} ({j}) "
              f"-> {verdict(r >= 0.9)}")
        r = ratio("loop-uring", "loop-classic", qd32)
        print(f"  rq-uring >= 1.2 x rq-classic, {qd32} through a loop device: {r:.2f} "
              f"-> {verdict(r >= 1.2)}")
        r, j = worst(("mq-uring", "pass-uring", j) for j in every)
        print(f"  mq-uring >= 0.9 x pass-uring on every job: worst {r:.2f} ({j}) "
              f"-> {verdict(r >= 0.9)}")
        r = ratio("loop-mq-uring", "loop-classic", qd32)
        print(f"  mq-uring >= 1.3 x rq-classic, {qd32} through a loop device: {r:.2f} "
              f"-> {verdict(r >= 1.3)}")
        for kind, bound in (("bio", 0.95), ("rq", 0.90)):
            for tr in TRANSPORTS:
                r, j = worst((f"{kind}-{tr}", f"pass-{tr}", j) for j in every)
                print(f"  {kind}-{tr} >= {bound:.2f} x pass-{tr} on every job: worst {r:.2f} "
                      f"({j}) -> {verdict(r >= bound)}")
        for tr in TRANSPORTS:
            r, j = max((cpu_us(f"rq-{tr}", j) / cpu_us(f"pass-{tr}", j), j) for j in every
                       if cpu_us(f"rq-{tr}", j) is not None and cpu_us(f"pass-{tr}", j))
            print(f"  rq-{tr} CPU per I/O <= 1.2 x pass-{tr}: worst {r:.2f} ({j}) "
                  f"-> {verdict(r <= 1.2)}")
        for t, u in (("mq-uring", QSD), ("rq-classic", QSD), ("loop-mq-uring", "loop-" + QSD)):
            print(f"  figure, no target: {t} / {u}, {qd32}: {ratio(t, u, qd32):.2f}")
        print(f"  trace --blktrace: 0 dropped and >= 0.90 x untraced IOPS: {trace_row[1]} dropped, "
              f"{trace_row[0]:.2f} -> {verdict(trace_row[1] == 0 and trace_row[0] >= 0.90)}")
        print(f"  write log: 4k randwrite QD32 costs at most 1.3 x (logged >= 0.77 x unlogged "
              f"IOPS): {log_row[0]:.2f} -> {verdict(log_row[0] >= 1 / 1.3)}; reads unaffected "
              f"(>= 0.95 x): {log_row[1]:.2f} -> {verdict(log_row[1] >= 0.95)}")
        bound = 32 * 1024 + 128 * 1024
        for t, k in sorted(rss.items()):
            print(f"  peak RSS {t:<13} {k / 1024:7.1f} MiB (bound 32 MiB + nr_requests 128 x 1 MiB "
                  f"= {bound / 1024:.0f} MiB) -> {verdict(k <= bound)}")
        print()
    finally:
        for dev in loopdevs:
            subprocess.run(["losetup", "-d", dev])
        for d in list(daemons.values()) + ([qsd] if qsd else []):
            d.stop()
        if tmpfs:
            subprocess.run(["umount", tmpfs])
        shutil.rmtree(work, ignore_errors=True)

    import bench_restart
    bench_restart.main(["--build", build])
    print()
    if not a.skip_hdd:
        hdd_experiment(tagdiskd, a)


def log_experiment(build, a, store=None, image=None):
    """The logging row: fio 4k randwrite and randread QD32 on rq-deadline, with and without
    the write log recording (`tagdiskctl log start` before fio, `log stop` after) to a file
    beside the image (tmpfs unless --on-disk).

    The two runs of a pair follow each other (in alternating order) and each pair gives a
    ratio, logged / unlogged: on a busy machine the load drifts less within a pair than
    across the rounds. One logged run before the pairs warms the memory and is not
    counted. Reported: the median of the pairs' ratios, for IOPS and for the
    daemon's CPU time per I/O (its writer thread included). Return: (median IOPS ratio of
    the writes, of the reads).
    """
    tagdiskd = os.path.join(build, "tagdiskd")
    work = tempfile.mkdtemp(prefix="tagdisk-log.", dir=store)
    tmpfs = None
    if store is None and not a.on_disk:
        tmpfs = os.path.join(work, "tmpfs")
        os.makedirs(tmpfs)
        sh("mount", "-t", "tmpfs", "-o", "size=90%", "tmpfs", tmpfs)
    where = tmpfs or work
    img = image
    if img is None:
        img = os.path.join(where, "log.img")
        fill_image(img, a.size)
    runtime = a.log_runtime
    iops = {(rw, logged): [] for rw in ("randwrite", "randread") for logged in (False, True)}
    ratios = {rw: [] for rw in ("randwrite", "randread")}
    cpu_ratios = {rw: [] for rw in ("randwrite", "randread")}
    sizes = []
    d = Daemon(tagdiskd, img, work, "log", ["--mode", "rq", "--elevator", "deadline",
                                            "--depth", "32"])
    path = os.path.join(where, "bench.wlog")
    try:
        tr = fuse_transport(d)
        # Not counted: one logged run first. The first writes into memory the machine has
        # not used for a while cost several times the later ones (a VM's host backs guest
        # pages on first touch: 0.4 against 3 GB/s for dd to tmpfs here), and the log is
        # most of what this row writes.
        r = admin(d.sock, f"log start {path}")
        if not r.get("ok"):
            raise RuntimeError(f"log start: {r.get('error')}")
        fio(d.disk, "randwrite", "4k", 32, runtime, a.size, [])
        admin(d.sock, "log stop")
        os.unlink(path)
        for rnd in range(a.log_rounds):
            for rw in ("randwrite", "randread"):
                pair = {}
                for logged in ((False, True) if rnd % 2 == 0 else (True, False)):
                    if logged:
                        r = admin(d.sock, f"log start {path}")
                        if not r.get("ok"):
                            raise RuntimeError(f"log start: {r.get('error')}")
                    c0 = cpu_seconds(d.proc.pid)
                    r = fio(d.disk, rw, "4k", 32, runtime, a.size, [])
                    c1 = cpu_seconds(d.proc.pid)
                    pair[logged] = (r["iops"], (c1 - c0) / r["ios_run"] * 1e6)
                    iops[(rw, logged)].append(r["iops"])
                    if logged:
                        r = admin(d.sock, "log stop")
                        if not r.get("ok"):
                            raise RuntimeError(f"log stop: {r.get('error')}")
                        if rw == "randwrite":
                            sizes.append((r["entries"], r["bytes"]))
                        os.unlink(path)
                ratios[rw].append(pair[True][0] / pair[False][0])
                cpu_ratios[rw].append(pair[True][1] / pair[False][1])
    finally:
        d.stop()
        if tmpfs:
            subprocess.run(["umount", tmpfs])
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in iops.items()}
    w, r = statistics.median(ratios["randwrite"]), statistics.median(ratios["randread"])
    cw, cr = statistics.median(cpu_ratios["randwrite"]), statistics.median(cpu_ratios["randread"])
    entries, size = max(sizes)
    print(f"write log: fio 4k QD32, {runtime}s, rq deadline depth 32, transport auto: {tr}, "
          f"log on {'disk' if a.on_disk else 'tmpfs'}, {a.log_rounds} pairs of runs")
    print(f"  randwrite unlogged {med[('randwrite', False)]:10.0f} IOPS (median)")
    print(f"  randwrite logged   {med[('randwrite', True)]:10.0f} IOPS (median; largest log "
          f"{entries} entries, {size / 2**20:.0f} MiB)")
    print(f"  randread  unlogged {med[('randread', False)]:10.0f} IOPS (median)")
    print(f"  randread  logged   {med[('randread', True)]:10.0f} IOPS (median)")
    print(f"  logged / unlogged, median of the pairs: randwrite IOPS {w:.2f} (cost {1 / w:.2f} x, "
          f"budget 1.3 x) -> {verdict(w >= 1 / 1.3)}, CPU per I/O {cw:.2f} x; randread IOPS "
          f"{r:.2f} -> {verdict(r >= 0.95)}, CPU per I/O {cr:.2f} x")
    return w, r


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
        fill_image(img, a.size)
    runtime = a.trace_runtime
    plain, traced, dropped, events = [], [], 0, []
    d = Daemon(tagdiskd, img, work, "trace", ["--mode", "rq", "--elevator", "deadline",
                                              "--depth", "32"])
    try:
        tr = fuse_transport(d)
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
    print(f"trace: fio 4k randrw QD32, {runtime}s, rq deadline depth 32, transport auto: {tr}, "
          f"median of {a.rounds}:")
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
    try:
        rows = {}
        # noop: the queue hands requests over in arrival order, so any reordering
        # is the drive's own (shortest positioning time first among its tags).
        for depth in (1, 32):
            d = Daemon(tagdiskd, img, work, f"hdd{depth}",
                       ["-c", conf, "--size", "4G", "--depth", str(depth), "--elevator", "noop"])
            if depth == 1:
                print(f"HDD model (7200 rpm, 0.5-12 ms seeks, 150 MB/s, SPTF in the drive), "
                      f"4 GiB disk, {runtime}s per run, transport auto: {fuse_transport(d)}:")
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
    # A failure is one line naming what failed (its log says more), not a traceback.
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as e:
        cmd = e.cmd if isinstance(e.cmd, str) else " ".join(map(str, e.cmd))
        said = (e.stderr or "").strip().splitlines()
        sys.exit(f"bench: `{cmd}` failed with status {e.returncode}"
                 + (f": {said[-1]}" if said else ""))
    except (RuntimeError, OSError) as e:
        sys.exit(f"bench: {e}")
    except KeyboardInterrupt:
        sys.exit("bench: interrupted")
