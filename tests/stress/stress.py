#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""tagdisk chaos stress: ext4 on a direct-I/O loop device, fio verify, and a drive that misbehaves.

    tests/stress/stress.py [--seconds N] [--seed S] [--rss-limit-mib M] [--keep]

Layout of the 512 MiB disk (rq mode, command_timeout_ms = 500):

    [0, 384 MiB)      ext4, through /dev/loopN with --direct-io=on
    [384, 392 MiB)    gap: never written, so no request can merge across it
    [392, 504 MiB)    spare: raw fio on the disk file; the only place errors are injected
    [504, 512 MiB)    tail: never touched (kept clear of probes of the device's end)

Injected write errors on ext4 metadata would (rightly) make ext4 give up, and
a data write error would make fio's verify fail for a reason that is not a
bug. So error rules only ever cover the spare region, where a raw fio with
continue_on_error=io expects and counts EIO, and every other check is strict.

Workloads, until the time is up:
  - fio on files inside ext4, in rounds (each round writes its files and
    verifies every block: 4k random QD16, 1M sequential QD4, two psync jobs
    with mixed block sizes and an fsync every 8 writes);
  - file churn inside ext4 (create, overwrite, rename, delete, read back,
    fsync), standing in for fsstress, which Debian does not package;
  - raw random reads and writes on the spare region (continue_on_error=io).
At the same time a chaos thread, at random intervals from a seeded generator,
resets the drive, switches the elevator, resizes the tag map, arms error
rules on the spare region and clears them later, injects a hang and waits for
the command timeout to recover it, adds latency, sends SIGHUP, and feeds the
admin socket garbage (random bytes, over-long lines, invalid UTF-8, NUL
bytes, wrong commands, pipelined commands, abrupt closes, a trace stream).

Then: stop the chaos, clear the faults, let the workloads finish, and require
no fio error or verify failure on ext4; only EIO on the spare region; no
request failed by retries; no tag outstanding; e2fsck -fn clean; every file
of the churn intact after a remount; no I/O or ext4 error on the loop device
in the kernel log; the daemon's peak RSS (VmHWM) under the limit, and its
RSS once the workloads are over under the bound (see RSS_LIMIT_MIB_DEFAULT);
exit 0 on SIGTERM. It prints the count of every action. Exit status: 0 pass, 1 a
violation (each one listed), 77 skipped (no root, /dev/fuse or tool).
"""
import argparse
import collections
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tdlib  # noqa: E402
from tdlib import Failure, log  # noqa: E402

MIB = 1 << 20
DISK_MIB = 512
FS_MIB = 384
SPARE_START_MIB = 392
SPARE_END_MIB = 504
SPARE_FIRST_SECTOR = SPARE_START_MIB * MIB // 512
SPARE_SECTORS = (SPARE_END_MIB - SPARE_START_MIB) * MIB // 512
COMMAND_TIMEOUT_MS = 500
# The ssd model keeps each command at the drive this long, so resets find commands in
# flight (with model none they complete in microseconds) and the drive's delay path,
# which gives a command up when a reset quiesces it, is exercised too.
SSD_LATENCY_US = 100
# Resets requeue what is in flight and count a retry; with the chaos thread
# resetting up to a few times a second a request stays far below this, so a
# retries_exhausted count above zero is a finding, not bad luck.
MAX_RETRIES = 20
DEPTHS = (1, 2, 3, 4, 8, 16, 32, 64, 128)
CHURN_BYTES_MAX = 48 * MIB
# The daemon's memory (everything it maps is locked). At its peak: a 32 MiB base, one 1 MiB
# buffer for each of the nr_requests (128) requests in flight, a receive buffer (1 MiB + 4 KiB)
# for each of the 16 FUSE threads (rq mode with drive workers), and the buffer pool's reserve
# of free buffers (28 MiB + 32 KiB, src/daemon/bufpool.h): 204 MiB; the limit leaves room
# for the engine's read-modify-write bounce buffers. Once the workloads are over (issue 11):
# the base, the pool's reserve and the receive buffers of at most 10 idle FUSE threads
# (src/daemon/fuse_session.c).
RSS_LIMIT_MIB_DEFAULT = 256
SETTLED_RSS_KIB = 32 * 1024 + (28 * 1024 + 32) + 10 * 1028
SETTLE_SECONDS = 60

BAD_COMMANDS = [
    "frob", "status extra", "depth x", "depth 0", "depth 99999", "elevator nosuch",
    "inject", "inject error", "inject error op=bogus sector=1 count=1",
    "inject error op=read sector=1", "inject error op=read sector=1 count=0",
    "inject error op=read sector=1 count=1 colour=blue", "inject every 0",
    "inject latency 99999999", "inject hang times=0", "inject seed -1", "powerfail keep=50",
    "reset now", "help me", "tags all", "inject clear now", "elevator a b", " ", "\t",
]


def content(tag, size):
    """What the file churn writes into a file: @size bytes derived from @tag."""
    block = hashlib.sha256(tag.encode()).digest() * 128  # 4 KiB
    return (block * (size // len(block) + 1))[:size]


class Stress:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.rng = random.Random(self.seed)
        self.deadline = None
        self.stop = threading.Event()       # the workloads' time is up (or a fatal problem)
        self.chaos_stop = threading.Event()
        self.lock = threading.Lock()
        self.violations = []
        self.actions = collections.Counter()
        self.figures = collections.OrderedDict()
        self.error_rules = []               # (op, sector, count, times) armed on the spare region
        self.fired_errors = 0               # error-rule firings seen before each clear
        self.fired_hangs = 0
        self.hang_recovery_ms = []
        self.rss_peak_kib = 0
        self.oldest_tag_us = 0
        self.workdir = tempfile.mkdtemp(prefix="tagdisk-stress.", dir=args.tmpdir)
        self.d = tdlib.Daemon(self.workdir, "stress")
        self.fs = os.path.join(self.workdir, "fs")
        self.dev = None
        self.fs_mounted = False
        self.files = {}  # churn: path -> (tag, size) of what it holds
        self.raw_errors = 0

    # ---- bookkeeping ------------------------------------------------------------------

    def violation(self, msg):
        with self.lock:
            self.violations.append(msg)
        log("stress: VIOLATION: %s" % msg)

    def fatal(self, msg):
        """Something that makes going on pointless: record it and stop everything."""
        self.violation(msg)
        self.stop.set()
        self.chaos_stop.set()

    def count(self, action, n=1):
        with self.lock:
            self.actions[action] += n

    # ---- setup ------------------------------------------------------------------------

    def write_config(self):
        path = os.path.join(self.workdir, "stress.ini")
        with open(path, "w") as f:
            f.write("[queue]\nmode = rq\nelevator = deadline\n"
                    "[tags]\ndepth = 32\n"
                    "[drive]\nworkers = 4\nmodel = ssd\nssd_latency_us = %d\n"
                    "command_timeout_ms = %d\nmax_retries = %d\nseed = %d\n" %
                    (SSD_LATENCY_US, COMMAND_TIMEOUT_MS, MAX_RETRIES, self.seed))
        return path

    def setup(self):
        self.config = self.write_config()
        self.d.start("-c", self.config, "--size", "%dM" % DISK_MIB)
        self.dev = tdlib.loop_attach(self.d.disk, direct_io=True)
        self.loop_name = os.path.basename(self.dev)
        self.klog_start = len(tdlib.kernel_log_lines())
        subprocess.check_call(["mkfs.ext4", "-q", "-F", self.dev, "%dM" % FS_MIB])
        os.makedirs(self.fs)
        subprocess.check_call(["mount", self.dev, self.fs])
        self.fs_mounted = True
        os.makedirs(os.path.join(self.fs, "fio"))
        os.makedirs(os.path.join(self.fs, "tree"))
        log("stress: tagdiskd pid %d, %s on %s, ext4 %d MiB of %d MiB, spare [%d, %d) MiB" %
            (self.d.pid, self.d.disk, self.dev, FS_MIB, DISK_MIB, SPARE_START_MIB,
             SPARE_END_MIB))

    def cleanup(self):
        if self.fs_mounted:
            subprocess.call(["umount", "-l", self.fs], stderr=subprocess.DEVNULL)
        if self.dev:
            tdlib.loop_detach(self.dev)
        self.d.cleanup()
        if not self.args.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            log("stress: kept %s" % self.workdir)

    # ---- workloads ----------------------------------------------------------------------

    def fs_fio_loop(self):
        """fio rounds inside ext4 until the time is up; each round verifies all it wrote."""
        rounds = 0
        written = 0
        while not self.stop.is_set() and time.monotonic() < self.deadline:
            rounds += 1
            seed = self.seed * 1000 + rounds
            args = [
                "--directory=%s" % os.path.join(self.fs, "fio"), "--direct=1",
                "--verify_state_save=0", "--randrepeat=0", "--randseed=%d" % seed,
                "--do_verify=1", "--verify_fatal=1",
                "--name=rand4k", "--rw=randwrite", "--bs=4k", "--ioengine=libaio",
                "--iodepth=16", "--size=24M", "--verify=crc32c",
                "--name=seq1m", "--rw=write", "--bs=1M", "--ioengine=libaio", "--iodepth=4",
                "--size=64M", "--verify=md5",
                "--name=mixsync", "--rw=randwrite", "--bssplit=4k/50:16k/30:64k/20",
                "--ioengine=psync", "--numjobs=2", "--size=16M", "--fsync=8",
                "--verify=crc32c",
            ]
            try:
                rc, res, err = tdlib.run_fio(args, timeout=600)
            except subprocess.TimeoutExpired:
                self.fatal("fio round %d inside ext4 did not finish in 600 s" % rounds)
                break
            if rc != 0 or not res:
                self.fatal("fio round %d inside ext4: status %d: %s" % (rounds, rc,
                                                                        err.strip()[-2000:]))
                break
            for j in res["jobs"]:
                w, r = j["write"]["io_bytes"], j["read"]["io_bytes"]
                if j["error"] or w == 0 or r != w:
                    self.fatal("fio round %d job %s: error %d, wrote %d, verified %d" %
                               (rounds, j["jobname"], j["error"], w, r))
                written += w
            self.count("fio_round")
        self.figures["fio rounds inside ext4 (write + full verify)"] = rounds
        self.figures["fio bytes written and verified inside ext4"] = written

    def raw_fio(self):
        """Random I/O on the spare region for the whole run; EIO there is expected."""
        secs = max(int(self.deadline - time.monotonic()), 1)
        args = [
            "--name=spare", "--filename=%s" % self.d.disk, "--offset=%dM" % SPARE_START_MIB,
            "--size=%dM" % (SPARE_END_MIB - SPARE_START_MIB), "--rw=randrw",
            "--bssplit=4k/60:64k/30:256k/10", "--ioengine=libaio", "--iodepth=8",
            "--direct=1", "--time_based", "--runtime=%d" % secs, "--continue_on_error=io",
            "--rate_iops=1000,1000", "--randrepeat=0", "--randseed=%d" % self.seed,
        ]
        try:
            rc, res, err = tdlib.run_fio(args, timeout=secs + 300)
        except subprocess.TimeoutExpired:
            self.fatal("raw fio on the spare region did not finish")
            return
        if rc != 0 or not res:
            self.fatal("raw fio on the spare region: status %d: %s" % (rc, err.strip()[-2000:]))
            return
        j = res["jobs"][0]
        total_err = j.get("total_err", 0)
        if total_err and j.get("first_error") != 5:
            self.violation("raw fio on the spare region: first error %s is not EIO (5)" %
                           j.get("first_error"))
        self.figures["raw fio on the spare region: I/Os"] = (j["read"]["total_ios"] +
                                                            j["write"]["total_ios"])
        self.figures["raw fio on the spare region: EIO seen"] = total_err
        self.raw_errors = total_err

    def churn(self):
        """Create, overwrite, rename, delete and read back files in ext4 (fsstress stand-in)."""
        rng = random.Random(self.seed ^ 0x5EED)
        root = os.path.join(self.fs, "tree")
        dirs = [os.path.join(root, "d%d" % i) for i in range(8)]
        total = 0
        serial = 0
        ops = collections.Counter()

        def write(path, tag, size, fsync):
            with open(path, "wb") as f:
                f.write(content(tag, size))
                if fsync:
                    f.flush()
                    os.fsync(f.fileno())

        try:
            for d in dirs:
                os.mkdir(d)
            while not self.stop.is_set() and time.monotonic() < self.deadline:
                op = rng.choices(["create", "overwrite", "rename", "delete", "verify",
                                  "fsyncdir"], [30, 15, 15, 15, 20, 5])[0]
                if op != "create" and not self.files:
                    op = "create"
                if op == "create" or op == "overwrite":
                    if op == "create":
                        serial += 1
                        path = os.path.join(rng.choice(dirs), "f%d" % serial)
                        old = 0
                    else:
                        path = rng.choice(sorted(self.files))
                        old = self.files[path][1]
                    size = rng.choice([0, 1, 511, 4096, 12345, 65536, 262144,
                                       rng.randrange(1, 1 << 20)])
                    tag = "%d-%d-%d" % (self.seed, serial, rng.randrange(1 << 30))
                    write(path, tag, size, rng.random() < 0.2)
                    self.files[path] = (tag, size)
                    total += size - old
                elif op == "rename":
                    src = rng.choice(sorted(self.files))
                    serial += 1
                    dst = os.path.join(rng.choice(dirs), "r%d" % serial)
                    os.rename(src, dst)
                    self.files[dst] = self.files.pop(src)
                elif op == "delete":
                    path = rng.choice(sorted(self.files))
                    os.unlink(path)
                    total -= self.files.pop(path)[1]
                elif op == "verify":
                    path = rng.choice(sorted(self.files))
                    tag, size = self.files[path]
                    with open(path, "rb") as f:
                        if f.read() != content(tag, size):
                            self.fatal("churn: %s does not hold what was written" % path)
                            break
                else:
                    fd = os.open(rng.choice(dirs), os.O_RDONLY | os.O_DIRECTORY)
                    os.fsync(fd)
                    os.close(fd)
                ops[op] += 1
                while total > CHURN_BYTES_MAX:
                    path = rng.choice(sorted(self.files))
                    os.unlink(path)
                    total -= self.files.pop(path)[1]
                    ops["delete"] += 1
                time.sleep(0.002)
        except OSError as e:
            self.fatal("churn inside ext4: %s" % e)
        self.figures["file churn operations"] = dict(sorted(ops.items()))
        self.figures["file churn: files at the end"] = len(self.files)

    def monitor(self):
        """Peak RSS, and stop early if the daemon died or ext4 went read-only."""
        while not self.stop.is_set():
            hwm = self.d.proc_status("VmHWM")
            if hwm:
                self.rss_peak_kib = max(self.rss_peak_kib, hwm)
            if not self.d.alive():
                self.fatal("tagdiskd died during the run:\n%s" % self.d.log_text())
                return
            with open("/proc/mounts") as f:
                for line in f:
                    fields = line.split()
                    if fields[1] == self.fs and "ro" in fields[3].split(","):
                        self.fatal("ext4 was remounted read-only during the run")
                        return
            time.sleep(0.25)

    # ---- chaos --------------------------------------------------------------------------

    def ctl(self, line):
        try:
            return tdlib.admin_ok(self.d.sock, line, timeout=30)
        except (OSError, ValueError) as e:
            raise Failure("admin %r: %s" % (line, e))

    def chaos(self):
        rng = self.rng
        kinds = ["reset", "elevator", "depth", "error", "hang", "latency", "garbage", "sighup",
                 "probe"]
        weights = [22, 10, 10, 12, 5, 4, 18, 3, 16]
        clear_at = None
        latency_until = None
        try:
            while not self.chaos_stop.is_set():
                now = time.monotonic()
                if now >= self.deadline:
                    break
                if clear_at and now >= clear_at:
                    self.clear_faults()
                    clear_at = latency_until = None
                if latency_until and now >= latency_until:
                    self.ctl("inject latency 0")
                    latency_until = None
                kind = rng.choices(kinds, weights)[0]
                getattr(self, "chaos_" + kind)(rng)
                if kind == "error" and not clear_at:
                    clear_at = time.monotonic() + rng.uniform(0.5, 4.0)
                if kind == "latency":
                    latency_until = time.monotonic() + rng.uniform(0.2, 2.0)
                self.count(kind)
                self.chaos_stop.wait(rng.uniform(0.02, 0.6))
        except (Failure, OSError, ValueError) as e:
            self.fatal("chaos: %s" % e)

    def clear_faults(self):
        """inject list, then inject clear on the same connection: keep what fired."""
        c = tdlib.AdminConn(self.d.sock)
        try:
            r = c.cmd("inject list")
            cl = c.cmd("inject clear")
        finally:
            c.close()
        if not r.get("ok") or not cl.get("ok") or cl.get("rules"):
            raise Failure("inject list/clear: %r / %r" % (r, cl))
        for rule in r["rules"]:
            if rule["kind"] == "error":
                self.fired_errors += rule["fired"]
            elif rule["kind"] == "hang":
                self.fired_hangs += rule["fired"]
        self.count("clear")

    def chaos_reset(self, rng):
        r = self.ctl("reset")
        self.count("requeued_by_resets", r["requeued"])

    def chaos_elevator(self, rng):
        cur = self.ctl("elevator")
        other = [e for e in cur["available"] if e != cur["elevator"]]
        if other:
            self.ctl("elevator %s" % rng.choice(other))

    def chaos_depth(self, rng):
        self.ctl("depth %d" % rng.choice(DEPTHS))

    def chaos_error(self, rng):
        count = rng.choice([1, 8, 512, 4096, 32768, 131072])
        sector = SPARE_FIRST_SECTOR + rng.randrange(SPARE_SECTORS - count)
        op = rng.choice(["read", "write", "any"])
        times = rng.choice(["", " times=1", " times=5", " times=50"])
        self.ctl("inject error op=%s sector=%d count=%d%s" % (op, sector, count, times))
        self.error_rules.append((op, sector, count, times.strip()))

    def chaos_hang(self, rng):
        """Hang the next command and wait until the command timeout has reset the drive."""
        before = self.ctl("stats")["timeouts"]
        t0 = time.monotonic()
        self.ctl("inject hang times=1")
        fired = False
        while time.monotonic() - t0 < 10:
            rules = self.ctl("inject list")["rules"]
            if any(r["kind"] == "hang" and r["fired"] for r in rules):
                fired = True
                break
            time.sleep(0.02)
        if not fired:
            # Nothing was submitted for 10 s: possible near the end. Take the rule back.
            self.clear_faults()
            self.count("hang_not_fired")
            return
        while time.monotonic() - t0 < 15:
            if self.ctl("stats")["timeouts"] > before:
                self.hang_recovery_ms.append((time.monotonic() - t0) * 1000)
                return
            time.sleep(0.02)
        raise Failure("a hung command was not recovered by the %d ms command timeout within "
                      "15 s" % COMMAND_TIMEOUT_MS)

    def chaos_latency(self, rng):
        self.ctl("inject latency %d" % rng.choice([100, 1000, 5000, 20000]))

    def chaos_sighup(self, rng):
        os.kill(self.d.pid, signal.SIGHUP)

    def chaos_probe(self, rng):
        """status, stats and tags during the load: well-formed, and consistent with each other."""
        c = tdlib.AdminConn(self.d.sock)
        try:
            st = c.cmd("status")
            tags = c.cmd("tags")
            stats = c.cmd("stats")
        finally:
            c.close()
        for r in (st, tags, stats):
            if r.get("ok") is not True:
                raise Failure("probe: %r" % r)
        numbers = [t["tag"] for t in tags["tags"]]
        if len(set(numbers)) != len(numbers) or any(n < 0 for n in numbers):
            raise Failure("probe: tag numbers not unique and valid: %r" % numbers)
        # A hung command is reset after COMMAND_TIMEOUT_MS, and requeued ones get a new
        # dispatch time: nothing may stay outstanding ten times that long.
        oldest = max((t["age_us"] for t in tags["tags"]), default=0)
        self.oldest_tag_us = max(self.oldest_tag_us, oldest)
        if oldest > COMMAND_TIMEOUT_MS * 10 * 1000:
            raise Failure("probe: a command %d ms old is outstanding: %r" %
                          (oldest // 1000, tags["tags"][:4]))
        if stats["retries_exhausted"]:
            raise Failure("probe: %d requests failed after exhausting their retries" %
                          stats["retries_exhausted"])

    # ---- garbage on the admin socket ---------------------------------------------------------

    def read_lines(self, sock, want, timeout=10.0):
        """Read up to @want reply lines (None: until the socket is quiet for 0.3 s)."""
        buf = b""
        lines = []
        end = time.monotonic() + timeout
        sock.settimeout(0.3 if want is None else 1.0)
        while (want is None or len(lines) < want) and time.monotonic() < end:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                if want is None:
                    break
                continue
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                lines.append(line)
        return lines

    def expect_replies(self, what, lines, want, ok=None):
        if len(lines) != want:
            raise Failure("garbage %s: %d reply lines, wanted %d" % (what, len(lines), want))
        for line in lines:
            r = json.loads(line)
            if not isinstance(r, dict) or "ok" not in r:
                raise Failure("garbage %s: reply %r is no protocol object" % (what, line[:200]))
            if ok is not None and r["ok"] is not ok:
                raise Failure("garbage %s: reply %r, wanted ok=%s" % (what, line[:300], ok))

    def chaos_garbage(self, rng):
        kind = rng.choice(["random", "long", "utf8", "nul", "words", "pipeline", "abrupt",
                           "trace", "slowloris"])
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(self.d.sock)
        try:
            if kind == "random":
                data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8192)))
                s.sendall(data + b"\n")
                s.shutdown(socket.SHUT_WR)
                # Every line gets a reply; over-long ones one each; all are refusals or
                # (by a tiny chance) a real command: whatever, each must be an object.
                self.expect_replies(kind, self.read_lines(s, None),
                                    len(self.read_lines_expected(data + b"\n")))
            elif kind == "long":
                n = rng.randrange(4097, 300000)
                s.sendall(b"x" * n + b"\nstatus\n")
                lines = self.read_lines(s, 2)
                self.expect_replies(kind, lines, 2)
                first, second = json.loads(lines[0]), json.loads(lines[1])
                if first["ok"] or "too long" not in first["error"] or not second["ok"]:
                    raise Failure("garbage long (%d bytes): %r then %r" % (n, first, second))
            elif kind == "utf8":
                s.sendall(b"status \xff\xfe\xc3\x28\n" + b"\xed\xa0\x80\n")
                self.expect_replies(kind, self.read_lines(s, 2), 2, ok=False)
            elif kind == "nul":
                s.sendall(b"sta\x00tus\n\x00\n")
                self.expect_replies(kind, self.read_lines(s, 2), 2, ok=False)
            elif kind == "words":
                cmds = [rng.choice(BAD_COMMANDS) for _ in range(rng.randrange(1, 20))]
                s.sendall("".join(c + "\n" for c in cmds).encode())
                self.expect_replies(kind + " " + repr(cmds), self.read_lines(s, len(cmds)),
                                    len(cmds), ok=False)
            elif kind == "pipeline":
                n = rng.randrange(1, 200)
                s.sendall(b"status\nstats\ntags\n" * n)
                self.expect_replies(kind, self.read_lines(s, 3 * n, timeout=30), 3 * n,
                                    ok=True)
            elif kind == "abrupt":
                s.sendall(b"stat")  # no newline, then gone
            elif kind == "trace":
                s.sendall(b"trace\n")
                lines = self.read_lines(s, None, timeout=0.5)  # a busy stream never pauses
                if not lines or json.loads(lines[0]).get("trace") != "started":
                    raise Failure("garbage trace: first line %r" % (lines[:1],))
            else:
                # A client that dribbles a command a few bytes at a time.
                for i in range(0, len(b"status\n"), 2):
                    s.sendall(b"status\n"[i:i + 2])
                    time.sleep(0.01)
                self.expect_replies(kind, self.read_lines(s, 1), 1, ok=True)
        finally:
            s.close()
        self.count("garbage_" + kind)
        self.ctl("status")  # still answering

    @staticmethod
    def read_lines_expected(data):
        """How many replies the daemon owes for @data: one per line; an over-long one, one."""
        return [line for line in data.split(b"\n")[:-1]]

    # ---- the run --------------------------------------------------------------------------

    def run(self):
        tdlib.require("fio", "losetup", "mkfs.ext4", "e2fsck", "fusermount3")
        log("stress: seed %d (rerun with --seed %d), %d s, command_timeout_ms %d, "
            "max_retries %d, RSS limit %d MiB" % (self.seed, self.seed, self.args.seconds,
                                                  COMMAND_TIMEOUT_MS, MAX_RETRIES,
                                                  self.args.rss_limit_mib))
        log("stress: no fsstress on Debian 12: file churn in Python stands in for it")
        t_start = time.monotonic()
        try:
            self.setup()
            self.deadline = time.monotonic() + self.args.seconds
            threads = [threading.Thread(target=f, name=f.__name__, daemon=True)
                       for f in (self.fs_fio_loop, self.raw_fio, self.churn, self.chaos,
                                 self.monitor)]
            for t in threads:
                t.start()
            threads[3].join()           # chaos ends at the deadline
            self.chaos_stop.set()
            t_chaos = time.monotonic()
            try:
                if self.d.alive():
                    self.clear_faults()
                    self.ctl("depth 32")
                    self.ctl("elevator deadline")
            except (Failure, OSError, ValueError) as e:
                self.fatal("clearing the faults: %s" % e)
            for t in threads[:3]:
                t.join(900)
                if t.is_alive():
                    self.fatal("workload %s did not finish within 15 min of the end" % t.name)
            self.figures["workloads finished after the chaos stopped (s)"] = round(
                time.monotonic() - t_chaos, 1)
            self.stop.set()
            threads[4].join()
            if self.d.alive():
                try:
                    self.final_checks()
                except (Failure, OSError, ValueError, subprocess.CalledProcessError) as e:
                    self.violation("final checks: %s" % e)
        finally:
            self.cleanup()
        self.figures["total time (s)"] = round(time.monotonic() - t_start, 1)
        self.report()
        if self.violations:
            raise Failure("%d violation(s):\n  %s" % (len(self.violations),
                                                      "\n  ".join(self.violations)))
        log("stress: PASS")

    def final_checks(self):
        # Nothing runs any more: every tag must come back.
        tags = None
        for _ in range(100):
            tags = self.ctl("tags")
            if tags["in_use"] == 0 and not tags["tags"]:
                break
            time.sleep(0.1)
        if tags["in_use"] or tags["tags"]:
            self.violation("tags outstanding after the workloads ended: %r" % tags)
        stats = self.ctl("stats")
        for k in ("resets", "timeouts", "requeued", "errors", "retries_exhausted", "killed",
                  "reads", "writes", "flushes", "discards"):
            self.figures["daemon stats: " + k] = stats[k]
        if stats["retries_exhausted"]:
            self.violation("%d requests failed with EIO after exhausting their retries" %
                           stats["retries_exhausted"])
        if stats["killed"]:
            self.violation("%d requests were killed by prep" % stats["killed"])
        self.figures["error rules armed"] = len(self.error_rules)
        self.figures["error-rule firings (inject list before each clear)"] = self.fired_errors
        self.figures["hangs fired"] = self.fired_hangs
        self.figures["oldest outstanding command seen by probes (ms)"] = (
            self.oldest_tag_us // 1000)
        if self.hang_recovery_ms:
            self.figures["hang recovery ms (min/max)"] = "%.0f / %.0f" % (
                min(self.hang_recovery_ms), max(self.hang_recovery_ms))
        # How the counts must relate. A failed request fails at least one bio, and only the
        # raw fio does I/O on the spare region, one bio per I/O: so fio saw at least as many
        # EIO as the daemon counted failed requests, and none without one. A firing fails its
        # command unless a reset takes the command back first (it is requeued and redone),
        # so firings are at most errors plus requeued. (Not an equality either way: a firing
        # between `inject list` and `inject clear` is not seen here.)
        errors = stats["errors"]
        if errors > self.raw_errors:
            self.violation("daemon counted %d failed requests, raw fio saw only %d EIO" %
                           (errors, self.raw_errors))
        if self.raw_errors and not errors:
            self.violation("raw fio saw %d EIO, the daemon counted no failed request" %
                           self.raw_errors)
        if self.fired_errors > errors + stats["requeued"]:
            self.violation("%d error-rule firings, more than the %d failed plus %d requeued "
                           "requests" % (self.fired_errors, errors, stats["requeued"]))

        hwm = self.d.proc_status("VmHWM") or 0
        self.rss_peak_kib = max(self.rss_peak_kib, hwm)
        self.figures["daemon peak RSS, VmHWM (MiB, limit %d)" % self.args.rss_limit_mib] = round(
            self.rss_peak_kib / 1024, 1)
        if self.rss_peak_kib > self.args.rss_limit_mib * 1024:
            self.violation("daemon peak RSS %.1f MiB is over the %d MiB limit" %
                           (self.rss_peak_kib / 1024, self.args.rss_limit_mib))
        # Nothing runs any more: the buffers of the last I/O go back to the pool just after
        # their replies, and the pool keeps only its reserve.
        end = time.monotonic() + SETTLE_SECONDS
        rss = self.d.proc_status("VmRSS") or 0
        while rss > SETTLED_RSS_KIB and time.monotonic() < end:
            time.sleep(0.1)
            rss = self.d.proc_status("VmRSS") or 0
        self.figures["daemon RSS once idle, VmRSS (MiB, bound %.1f)" % (
            SETTLED_RSS_KIB / 1024)] = round(rss / 1024, 1)
        if rss > SETTLED_RSS_KIB:
            self.violation("daemon RSS %.1f MiB once idle is over the %.1f MiB bound (the "
                           "buffer pool keeps too much?)" % (rss / 1024, SETTLED_RSS_KIB / 1024))

        # The file system: fsck clean, and every file of the churn intact from the disk.
        subprocess.call(["sync", "-f", self.fs])
        subprocess.check_call(["umount", self.fs])
        self.fs_mounted = False
        p = subprocess.run(["e2fsck", "-fn", self.dev], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        self.figures["e2fsck -fn status"] = p.returncode
        if p.returncode != 0:
            self.violation("e2fsck -fn: status %d:\n%s" % (p.returncode, p.stdout[-3000:]))
        subprocess.check_call(["mount", self.dev, self.fs])
        self.fs_mounted = True
        bad = 0
        for path, (tag, size) in sorted(self.files.items()):
            try:
                with open(path, "rb") as f:
                    ok = f.read() == content(tag, size)
            except OSError:
                ok = False
            bad += not ok
        on_disk = set()
        for dirpath, _, names in os.walk(os.path.join(self.fs, "tree")):
            on_disk.update(os.path.join(dirpath, n) for n in names)
        if bad or on_disk != set(self.files):
            self.violation("after a remount: %d of %d churn files damaged, %d missing, %d "
                           "unexpected" % (bad, len(self.files), len(set(self.files) - on_disk),
                                           len(on_disk - set(self.files))))
        subprocess.check_call(["umount", self.fs])
        self.fs_mounted = False
        tdlib.loop_detach(self.dev)
        self.dev = None

        # "I/O error, dev loopN, sector ...", "Buffer I/O error on dev loopN ...",
        # "EXT4-fs error (device loopN): ...", "EXT4-fs (loopN): Remounting ... read-only".
        klog = tdlib.kernel_log_lines()[self.klog_start:]
        mine = re.compile(r"\b%s\b" % re.escape(self.loop_name))
        trouble = re.compile(r"error|read-only|abort", re.IGNORECASE)
        bad_klog = [line for line in klog if mine.search(line) and trouble.search(line)]
        self.figures["kernel log error lines for %s" % self.loop_name] = len(bad_klog)
        if bad_klog:
            self.violation("kernel log errors on %s:\n%s" % (self.loop_name,
                                                             "\n".join(bad_klog[:20])))

        rc = self.d.stop()
        self.figures["tagdiskd exit status after SIGTERM"] = rc
        if rc != 0:
            self.violation("tagdiskd exited with status %d:\n%s" % (rc, self.d.log_text()))

    def report(self):
        log("stress: actions taken (seed %d):" % self.seed)
        for k, v in sorted(self.actions.items()):
            log("  %-28s %d" % (k, v))
        log("stress: figures:")
        for k, v in self.figures.items():
            log("  %s: %s" % (k, v))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int,
                    default=int(os.environ.get("STRESS_SECONDS", "180")))
    ap.add_argument("--seed", type=int,
                    default=int(os.environ.get("STRESS_SEED", "0")) or
                    int(time.time()) % 1000000)
    ap.add_argument("--rss-limit-mib", type=int,
                    default=int(os.environ.get("STRESS_RSS_LIMIT_MIB",
                                               str(RSS_LIMIT_MIB_DEFAULT))))
    ap.add_argument("--tmpdir", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    Stress(ap.parse_args()).run()


if __name__ == "__main__":
    tdlib.main_wrapper(main)
