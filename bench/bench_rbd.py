#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""make bench BENCH_ARGS=--rbd: tagdisk in front of a Ceph RBD image, in one run.

A single-OSD cluster on this machine (tests/ceph/cluster.sh; pool size 1, loopback only)
serves one image per target, prefilled (unwritten RBD objects read too fast):
  rbd-bench     `rbd bench` on its own image: librbd with the same block size and number of
                outstanding I/Os (--io-threads), no FUSE, no kernel: the ceiling; librbd's
                cache off, as in tagdisk's rbd backend (a write completes on the OSDs)
  bio           tagdiskd --mode bio, [drive] backend = rbd: make_request straight to the
                drive, each FUSE request waits for its librbd operation
  rq            tagdiskd --mode rq (deadline, depth 32), backend = rbd: every tagged command
                one librbd aio operation, sent by the drive's one worker (the default:
                4 workers measured 5-15 % fewer IOPS, more threads to wake on 2 CPUs)
  qsd           qemu-storage-daemon --blockdev driver=rbd with a FUSE export (Debian's
                qemu-system-common and qemu-block-extra)
Jobs: fio libaio, direct I/O, on the disk file (or the export's file), one job each. The
FUSE transport of tagdiskd is its default (auto). Rounds are interleaved; each figure is the
median of the rounds. The targets: rq >= 2x qsd on 4k QD32, rq >= 0.8x rbd bench on 4k QD32
random writes.
"""
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "tests", "ceph", "cluster.sh")
IMAGE_SIZE = "512M"
JOBS = [
    # name, fio rw, bs, iodepth, rbd bench io-type (None: no rbd bench row)
    ("4k randwrite QD32", "randwrite", "4k", 32, "write"),
    ("4k randread QD32", "randread", "4k", 32, "read"),
    ("4k randread QD1", "randread", "4k", 1, None),
    ("64k randrw 70/30 QD16", "randrw", "64k", 16, None),
]
TARGETS = ["rbd-bench", "bio", "rq", "qsd"]
RAMP = 1


def run(*args, **kw):
    return subprocess.run(args, check=True, **kw)


def fio(filename, rw, bs, iodepth, runtime, size):
    cmd = ["fio", "--name=bench", f"--filename={filename}", f"--rw={rw}", f"--bs={bs}",
           f"--iodepth={iodepth}", "--ioengine=libaio", "--direct=1", "--time_based",
           f"--runtime={runtime}", f"--ramp_time={RAMP}", f"--size={size}",
           "--output-format=json", "--randrepeat=0", "--norandommap", "--rwmixread=70"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    return job["read"]["iops"] + job["write"]["iops"]


def rbd_bench(conf, image, io_type, bs, threads, runtime):
    """IOPS of `rbd bench` for about @runtime seconds (it counts bytes, not time)."""
    ops = 0.0
    # A short calibration run sizes the measured one to about @runtime seconds.
    for probe in (True, False):
        nbytes = 4 << 20 if probe else max(int(ops * runtime) * 4096, 8 << 20)
        # librbd's cache off, as tagdisk's backend has it (tagdisk/backend.h): a write is done
        # when the OSDs have it, in both.
        out = subprocess.run(["rbd", "-c", conf, "--rbd_cache=false", "bench", "--io-type",
                              io_type, "--io-size",
                              bs, "--io-threads", str(threads), "--io-total", str(nbytes),
                              "--io-pattern", "rand", image],
                             check=True, capture_output=True, text=True).stdout
        m = re.search(r"elapsed:\s*([\d.]+)\s+ops:\s*(\d+)\s+ops/sec:\s*([\d.]+)", out)
        if not m:
            raise RuntimeError("cannot read rbd bench's summary:\n" + out)
        ops = float(m.group(3))
    return ops


class Served:
    """A disk file backed by an RBD image: tagdiskd or qemu-storage-daemon."""

    def __init__(self, kind, build, workdir, conf, pool, image):
        self.kind = kind
        self.log = open(os.path.join(workdir, kind + ".log"), "w")
        if kind == "qsd":
            self.disk = os.path.join(workdir, "qsd.export")
            open(self.disk, "w").close()
            cmd = ["qemu-storage-daemon", "--blockdev",
                   f"driver=rbd,node-name=rbd0,pool={pool},image={image},conf={conf},"
                   "user=admin,cache.direct=on",
                   "--export", f"type=fuse,id=exp0,node-name=rbd0,mountpoint={self.disk},"
                   "writable=on"]
            ready = lambda: os.path.ismount(self.disk)  # noqa: E731
        else:
            mnt = os.path.join(workdir, kind + ".mnt")
            os.makedirs(mnt, exist_ok=True)
            self.disk = os.path.join(mnt, "disk")
            ini = os.path.join(workdir, kind + ".ini")
            with open(ini, "w") as f:
                f.write(f"[disk]\nmountpoint = {mnt}\n"
                        f"[queue]\nmode = {kind}\n"
                        "[drive]\nbackend = rbd\n"
                        f"[rbd]\npool = {pool}\nimage = {image}\nconf = {conf}\nid = admin\n"
                        f"[admin]\nsocket = {os.path.join(workdir, kind + '.sock')}\n")
            cmd = [os.path.join(build, "tagdiskd"), "-f", "-c", ini]
            ready = lambda: os.path.exists(self.disk) and os.path.ismount(mnt)  # noqa: E731
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if ready():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"{kind} did not start; see {self.log.name}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# Where qemu looks for its block driver modules (QEMU_MODULE_DIR overrides it, as for qemu).
QEMU_MODULE_DIRS = ["/usr/lib/x86_64-linux-gnu/qemu", "/usr/lib/aarch64-linux-gnu/qemu",
                    "/usr/lib64/qemu", "/usr/lib/qemu"]


def missing_tools(build):
    """What this run needs and does not find, as (what, package) pairs: checked before the
    cluster starts, so a missing piece is one line, not a traceback minutes later."""
    missing = []
    for tool, pkg in (("ceph-mon", "ceph-mon"), ("ceph-mgr", "ceph-mgr"),
                      ("ceph-osd", "ceph-osd"), ("rbd", "ceph-common"), ("fio", "fio")):
        if not shutil.which(tool):
            missing.append((tool, pkg))
    # qemu-storage-daemon's rbd driver is a module of its own package; a qemu without
    # module directories has its drivers built in.
    env_dir = os.environ.get("QEMU_MODULE_DIR")
    dirs = [d for d in ([env_dir] if env_dir else QEMU_MODULE_DIRS) if os.path.isdir(d)]
    rbd_driver = ("qemu-storage-daemon's rbd driver (block-rbd.so)", "qemu-block-extra")
    if not shutil.which("qemu-storage-daemon"):
        missing += [("qemu-storage-daemon", "qemu-system-common"), rbd_driver]
    elif dirs and not any(os.path.exists(os.path.join(d, "block-rbd.so")) for d in dirs):
        missing.append(rbd_driver)
    if not os.access(os.path.join(build, "tagdiskd"), os.X_OK):
        missing.append((os.path.join(build, "tagdiskd"), "make all"))
    return missing


def main(a):
    build = os.path.abspath(a.build)
    missing = missing_tools(build)
    if missing:
        sys.exit("bench --rbd: missing " + ", ".join(f"{w} ({p})" for w, p in missing) +
                 "; Debian: apt-get install " +
                 " ".join(sorted({p for _, p in missing if p != "make all"})))
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        sys.exit("bench --rbd: needs root and /dev/fuse")
    runtime = max(a.runtime, 3)
    workdir = tempfile.mkdtemp(prefix="tagdisk-bench-rbd.")
    cdir = os.path.join(workdir, "ceph")
    served = {}
    t0 = time.monotonic()
    try:
        run("bash", CLUSTER, "start", cdir, "--osds", "1", "--pool", "rbd",
            stdout=subprocess.DEVNULL)
        conf = os.path.join(cdir, "ceph.conf")
        print(f"cluster: 1 OSD, pool rbd size 1, up in {time.monotonic() - t0:.0f} s")
        images = {t: f"bench-{t}" for t in TARGETS}
        for t, img in images.items():
            run("rbd", "-c", conf, "create", "--size", IMAGE_SIZE, f"rbd/{img}")
            # Prefill: reads of unwritten objects never reach an OSD's disk.
            run("rbd", "-c", conf, "bench", "--io-type", "write", "--io-size", "4M",
                "--io-threads", "8", "--io-total", IMAGE_SIZE, "--io-pattern", "seq",
                f"rbd/{img}", stdout=subprocess.DEVNULL)
        for t in ("bio", "rq", "qsd"):
            served[t] = Served(t, build, workdir, conf, "rbd", images[t])
        results = {(j[0], t): [] for j in JOBS for t in TARGETS}
        for rnd in range(a.rounds):
            order = TARGETS[rnd % len(TARGETS):] + TARGETS[:rnd % len(TARGETS)]
            for name, rw, bs, qd, io_type in JOBS:
                for t in order:
                    if t == "rbd-bench":
                        if io_type:
                            results[(name, t)].append(
                                rbd_bench(conf, f"rbd/{images[t]}", io_type, bs.upper(), qd,
                                          runtime))
                        continue
                    results[(name, t)].append(
                        fio(served[t].disk, rw, bs, qd, runtime, IMAGE_SIZE))
            print(f"round {rnd + 1}/{a.rounds} done", file=sys.stderr)
        med = {k: statistics.median(v) if v else None for k, v in results.items()}
        print()
        print(f"{'job':24} {'rbd bench':>10} {'bio':>9} {'rq':>9} {'qsd':>9}"
              f" {'rq/qsd':>7} {'rq/rbd':>7} {'bio/qsd':>8}")
        for name, *_ in JOBS:
            row = [med[(name, t)] for t in TARGETS]
            cells = " ".join(f"{v:9.0f}" if v is not None else f"{'-':>9}" for v in row[1:])
            rb = f"{row[0]:10.0f}" if row[0] is not None else f"{'-':>10}"
            ratio = lambda x, y: f"{x / y:7.2f}" if x and y else f"{'-':>7}"  # noqa: E731
            print(f"{name:24} {rb} {cells} {ratio(row[2], row[3])} {ratio(row[2], row[0])}"
                  f" {ratio(row[1], row[3]):>8}")
        print()
        qd32 = [n for n, _, bs, qd, _ in JOBS if bs == "4k" and qd == 32]
        worst_qsd = min(med[(n, "rq")] / med[(n, "qsd")] for n in qd32)
        w = med[("4k randwrite QD32", "rq")] / med[("4k randwrite QD32", "rbd-bench")]
        print(f"target rq >= 2x qsd on 4k QD32: worst {worst_qsd:.2f}: "
              f"{'met' if worst_qsd >= 2 else 'NOT met'}")
        print(f"target rq >= 0.8x rbd bench on 4k QD32 writes: {w:.2f}: "
              f"{'met' if w >= 0.8 else 'NOT met'}")
        print(f"(IOPS, medians of {a.rounds} rounds of {runtime} s; "
              f"{time.monotonic() - t0:.0f} s in all)")
    finally:
        for s in served.values():
            s.stop()
        subprocess.run(["bash", CLUSTER, "stop", cdir], check=False)
        shutil.rmtree(workdir, ignore_errors=True)
