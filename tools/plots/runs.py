# SPDX-License-Identifier: GPL-2.0-or-later
"""The real runs behind the README's pictures: tagdiskd on the HDD latency model, traced with
`tagdiskctl trace --blktrace` while fio loads it.

Each run leaves, in its own directory under the work directory:
  trace.blktrace.0   the events (tdtrace.read)
  fio.json           fio's report
  stats.json         the daemon's `stats` at the end of the run
  run.json           what was run (elevator, depth, load) and, for the reset run, when the
                     resets came and what the daemon replied
so that a picture can be drawn again from them (plots.py --redraw) without running anything.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

HDD_INI = "[drive]\nmodel = hdd\ncommand_timeout_ms = 0\n"
# The reset run: a hung command is taken back after this long. The drive serves the nearest
# command first and may pass a far one over for a few hundred ms on a busy machine: twice
# that and more keeps the only timeout the injected one.
RESET_TIMEOUT_MS = 2000
RESET_INI = (f"[drive]\nmodel = hdd\ncommand_timeout_ms = {RESET_TIMEOUT_MS}\n"
             "max_retries = 5\n")


class RunError(Exception):
    pass


def wait_for(what, cond, seconds=60.0):
    """Poll cond() until it is true; raise RunError naming what was awaited after seconds."""
    end = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > end:
            raise RunError(f"timed out after {seconds:.0f} s waiting for {what}")
        time.sleep(0.02)


def admin(sock, line):
    """One admin command; the decoded reply. Raise RunError on a refusal."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    try:
        s.connect(sock)
        s.sendall(line.encode() + b"\n")
        reply = s.makefile("rb").readline()
    finally:
        s.close()
    r = json.loads(reply)
    if r.get("ok") is not True:
        raise RunError(f"admin {line!r}: {r.get('error', reply)}")
    return r


def is_mounted(path):
    with open("/proc/mounts") as f:
        return any(line.split()[1] == path for line in f)


class Daemon:
    """tagdiskd in the foreground, serving dir/disk.img at dir/mnt/disk, socket dir/sock."""

    def __init__(self, build, rundir, ini, args):
        self.dir = rundir
        self.sock = os.path.join(rundir, "sock")
        self.mnt = os.path.join(rundir, "mnt")
        self.disk = os.path.join(self.mnt, "disk")
        os.makedirs(self.mnt, exist_ok=True)
        conf = os.path.join(rundir, "tagdisk.ini")
        with open(conf, "w") as f:
            f.write(ini)
        self.log = open(os.path.join(rundir, "tagdiskd.log"), "w")
        cmd = [os.path.join(build, "tagdiskd"), "-f", "-c", conf,
               "--image", os.path.join(rundir, "disk.img"), "--size", "4G",
               "--mount", self.mnt, "--socket", self.sock] + args
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)

        def up():
            if self.proc.poll() is not None:
                raise RunError(f"tagdiskd exited with {self.proc.returncode}; see "
                               f"{self.log.name}")
            return os.path.exists(self.sock) and is_mounted(self.mnt)

        wait_for("tagdiskd to mount " + self.mnt, up)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        # The image is 4 GiB sparse; only what the run wrote takes room. Not kept.
        img = os.path.join(self.dir, "disk.img")
        if os.path.exists(img):
            os.unlink(img)
        if self.proc.returncode != 0:
            raise RunError(f"tagdiskd exited with {self.proc.returncode}; see {self.log.name}")


class Tracer:
    """tagdiskctl trace --blktrace FILE, from the moment it says it writes until stop()."""

    def __init__(self, build, sock, path):
        self.path = path
        self.err = open(path + ".err", "w+")
        self.proc = subprocess.Popen([os.path.join(build, "tagdiskctl"), "-s", sock, "trace",
                                      "--blktrace", path], stderr=self.err)

        def writing():
            self.err.seek(0)
            if self.proc.poll() is not None:
                raise RunError("tagdiskctl trace exited: " + self.err.read().strip())
            return "tagdiskctl: trace: writing" in self.err.read()

        wait_for("tagdiskctl trace to start", writing)

    def stop(self):
        """Return tagdiskctl's closing line (events written). Raise RunError when it failed,
        which it does when the daemon dropped events."""
        self.proc.send_signal(signal.SIGINT)
        try:
            rc = self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise RunError("tagdiskctl trace did not stop on SIGINT")
        self.err.seek(0)
        text = self.err.read()
        self.err.close()
        if rc != 0:
            raise RunError(f"tagdiskctl trace exited with {rc}: {text.strip()}")
        return text.strip().splitlines()[-1].replace("tagdiskctl: trace: ", "")


FIO_GLOBAL = """[global]
filename={disk}
direct=1
ioengine=libaio
time_based
runtime={seconds}
size=4G
"""

# Random reads at QD32: 32 requests to put in order, by the elevator or by the drive.
FIO_RANDREAD = """[randread]
rw=randread
bs=4k
iodepth=32
"""

# What each HDD run is: (elevator, tag depth, load, what the picture calls it).
HDD_RUNS = {
    "depth1": ("noop", 1, FIO_RANDREAD, "tag depth 1"),
    "deadline": ("deadline", 1, FIO_RANDREAD, "deadline"),
    "depth32": ("noop", 32, FIO_RANDREAD, "tag depth 32"),
}


def fio(jobfile, out):
    """Run fio on a job file, its JSON report to out; return the report. fio runs in the
    job file's directory, where it leaves its verify state files."""
    r = subprocess.run(["fio", "--output-format=json", "--output", out, jobfile],
                       capture_output=True, text=True, cwd=os.path.dirname(jobfile))
    if r.returncode != 0:
        raise RunError(f"fio {jobfile} failed ({r.returncode}): {r.stderr.strip()}")
    with open(out) as f:
        text = f.read()
    return json.loads(text[text.index("{"):])


def save(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


def hdd_run(build, work, name, seconds, say):
    """One traced fio run of HDD_RUNS[name] into work/name/."""
    elevator, depth, load, label = HDD_RUNS[name]
    rundir = os.path.join(work, name)
    shutil.rmtree(rundir, ignore_errors=True)
    os.makedirs(rundir)
    d = Daemon(build, rundir, HDD_INI, ["--elevator", elevator, "--depth", str(depth)])
    try:
        tracer = Tracer(build, d.sock, os.path.join(rundir, "trace.blktrace.0"))
        job = os.path.join(rundir, "job.fio")
        with open(job, "w") as f:
            f.write(FIO_GLOBAL.format(disk=d.disk, seconds=seconds) + load)
        try:
            fio(job, os.path.join(rundir, "fio.json"))
        finally:
            summary = tracer.stop()
        save(os.path.join(rundir, "stats.json"), admin(d.sock, "stats"))
    finally:
        d.stop()
    save(os.path.join(rundir, "run.json"), {"name": name, "elevator": elevator, "depth": depth,
                                            "label": label, "seconds": seconds,
                                            "trace": summary})
    say(f"{name}: {summary}")


# ---- the reset run --------------------------------------------------------------------------

# fio writes RESET_BLOCKS 4 KiB blocks at QD32 in random order, each once, and reads each back
# (crc32c; a mismatch ends fio with an error). The daemon's events are placed by how much has
# been written, not by time, so a slow machine draws the same picture, only slower.
RESET_BLOCKS = 2048
RESET_DEPTH = 16  # tags: fio's 32 leave 16 waiting in the queue

FIO_VERIFY = """[verify]
filename={disk}
rw=randwrite
bs=4k
iodepth=32
ioengine=libaio
direct=1
size={size}
verify=crc32c
do_verify=1
verify_fatal=1
verify_backlog=256
randrepeat=0
"""


class Poller(threading.Thread):
    """Polls the daemon's stats every 20 ms, for the reset run's progress."""

    def __init__(self, sock):
        super().__init__(daemon=True)
        self.sock = sock
        self.latest = None
        self.error = None
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            try:
                self.latest = admin(self.sock, "stats")
            except (OSError, ValueError, RunError) as e:
                self.error = e
                return
            self.stopping.wait(0.02)

    def writes(self):
        if self.error:
            raise RunError(f"polling stats: {self.error}")
        return self.latest["writes"] if self.latest else 0


def reset_run(build, work, say):
    """fio verify at QD32 on the HDD model, tag depth RESET_DEPTH; at a quarter of the writes
    `reset`, at half `inject hang` (the timer resets RESET_TIMEOUT_MS later)."""
    rundir = os.path.join(work, "reset")
    shutil.rmtree(rundir, ignore_errors=True)
    os.makedirs(rundir)
    d = Daemon(build, rundir, RESET_INI, ["--elevator", "deadline",
                                          "--depth", str(RESET_DEPTH)])
    marks = []
    try:
        tracer = Tracer(build, d.sock, os.path.join(rundir, "trace.blktrace.0"))
        poller = Poller(d.sock)
        poller.start()
        job = os.path.join(rundir, "job.fio")
        with open(job, "w") as f:
            f.write(FIO_VERIFY.format(disk=d.disk, size=RESET_BLOCKS * 4096))
        result = {}

        def run_fio():
            try:
                result["fio"] = fio(job, os.path.join(rundir, "fio.json"))
            except RunError as e:
                result["error"] = e

        f = threading.Thread(target=run_fio)
        f.start()
        try:
            wait_for("a quarter of the writes", lambda: poller.writes() >= RESET_BLOCKS // 4,
                     300)
            r = admin(d.sock, "reset")
            marks.append({"what": "reset", "requeued": r["requeued"]})
            wait_for("half of the writes", lambda: poller.writes() >= RESET_BLOCKS // 2, 300)
            admin(d.sock, "inject hang times=1")
            marks.append({"what": "hang"})
            wait_for("the command timeout",
                     lambda: poller.latest and poller.latest["timeouts"] >= 1, 300)
        finally:
            f.join()
            poller.stopping.set()
            poller.join()
            summary = tracer.stop()
        if "error" in result:
            raise result["error"]
        stats = admin(d.sock, "stats")
        save(os.path.join(rundir, "stats.json"), stats)
        save(os.path.join(rundir, "inject.json"), admin(d.sock, "inject list"))
    finally:
        d.stop()
    save(os.path.join(rundir, "run.json"), {"name": "reset", "elevator": "deadline",
                                            "depth": RESET_DEPTH, "blocks": RESET_BLOCKS,
                                            "timeout_ms": RESET_TIMEOUT_MS, "marks": marks,
                                            "trace": summary})
    say(f"reset: {summary}; resets {stats['resets']}, timeouts {stats['timeouts']}, "
        f"requeued {stats['requeued']}")
