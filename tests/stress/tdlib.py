# SPDX-License-Identifier: GPL-2.0-or-later
"""Shared pieces of tagdisk's stress programs (stress.py, crash.py, admin_load.py).

A Daemon runs one tagdiskd in the foreground on a work directory of its own;
admin() and AdminConn speak the admin protocol (one line out, one JSON line
back); run_fio() runs fio with JSON output and returns the parsed result.
Nothing here decides what passes: the programs do, and say why.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Skip(Exception):
    """The machine cannot run this program (no root, no /dev/fuse, a tool missing)."""


class Failure(Exception):
    """A check failed; the message says which and with what values."""


def build_dir():
    return os.path.abspath(os.environ.get("TD_BUILD") or os.path.join(ROOT, "build"))


def require(*tools):
    if os.geteuid() != 0:
        raise Skip("needs root (mounts FUSE and uses loop devices)")
    if not os.path.exists("/dev/fuse"):
        raise Skip("no /dev/fuse on this machine")
    for t in tools:
        if not shutil.which(t):
            raise Skip("%s is not installed" % t)
    d = build_dir()
    for b in ("tagdiskd", "tagdiskctl"):
        if not os.access(os.path.join(d, b), os.X_OK):
            raise Skip("%s is not built in %s" % (b, d))


def log(*args):
    print(*args, flush=True)


def is_mounted(path):
    with open("/proc/mounts") as f:
        return any(line.split()[1] == path for line in f)


class AdminConn:
    """One connection to the admin socket; several commands may go over it."""

    def __init__(self, path, timeout=30.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""

    def readline(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Failure("admin: the daemon closed the connection without a reply")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def send_raw(self, data):
        self.sock.sendall(data)

    def cmd(self, line):
        self.sock.sendall(line.encode() + b"\n")
        return json.loads(self.readline())

    def close(self):
        self.sock.close()


def admin(path, line, timeout=30.0):
    """Send one command, return the reply object (whatever "ok" says)."""
    c = AdminConn(path, timeout)
    try:
        return c.cmd(line)
    finally:
        c.close()


def admin_ok(path, line, timeout=30.0):
    r = admin(path, line, timeout)
    if r.get("ok") is not True:
        raise Failure("admin %r: %r" % (line, r))
    return r


class Daemon:
    """tagdiskd in the foreground, with its image, mount point and socket in @workdir."""

    def __init__(self, workdir, name="td", wrapper=None):
        self.dir = workdir
        self.img = os.path.join(workdir, name + ".img")
        self.mnt = os.path.join(workdir, name + ".mnt")
        self.sock = os.path.join(workdir, name + ".sock")
        self.log = os.path.join(workdir, name + ".log")
        self.disk = os.path.join(self.mnt, "disk")
        self.wrapper = wrapper or []
        self.proc = None
        os.makedirs(self.mnt, exist_ok=True)

    def start(self, *args, timeout=30.0):
        cmd = self.wrapper + [os.path.join(build_dir(), "tagdiskd"), "-f", "--image", self.img,
                              "--mount", self.mnt, "--socket", self.sock] + list(args)
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        logf.close()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise Failure("tagdiskd exited early with status %d:\n%s" %
                              (self.proc.returncode, self.log_text()))
            if os.path.exists(self.sock) and is_mounted(self.mnt) and os.path.exists(self.disk):
                return
            time.sleep(0.05)
        raise Failure("tagdiskd did not come up in %.0f s:\n%s" % (timeout, self.log_text()))

    @property
    def pid(self):
        return self.proc.pid

    def log_text(self, tail=60):
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-tail:])
        except OSError:
            return ""

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def ctl(self, line, timeout=30.0):
        return admin_ok(self.sock, line, timeout)

    def proc_status(self, key):
        """A field of /proc/PID/status in KiB (VmRSS, VmHWM), or None once it is gone."""
        try:
            with open("/proc/%d/status" % self.pid) as f:
                for line in f:
                    if line.startswith(key + ":"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def stop(self, timeout=60.0):
        """SIGTERM and wait. Return: the exit status (negative: killed by that signal)."""
        if not self.proc:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Failure("tagdiskd did not stop within %.0f s of SIGTERM:\n%s" %
                          (timeout, self.log_text()))
        self.proc = None
        return rc

    def kill9(self):
        """kill -9 the daemon and remove its dead mount."""
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        self.unmount_dead()

    def unmount_dead(self):
        if is_mounted(self.mnt):
            if subprocess.call(["fusermount3", "-u", self.mnt], stderr=subprocess.DEVNULL):
                subprocess.call(["umount", "-l", self.mnt])

    def cleanup(self):
        """Whatever state it is in: make sure nothing of it is left running or mounted."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self.unmount_dead()


def fio_json(text):
    """fio may print warnings before its JSON; parse from the first brace."""
    return json.loads(text[text.index("{"):])


def run_fio(args, timeout, cwd=None):
    """Run fio; return (status, parsed JSON or None, stderr text)."""
    p = subprocess.run(["fio", "--output-format=json"] + args, cwd=cwd, timeout=timeout,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        result = fio_json(p.stdout)
    except ValueError:
        result = None
    return p.returncode, result, p.stderr


def loop_attach(path, direct_io=True):
    args = ["losetup", "-f", "--show"]
    if direct_io:
        args.append("--direct-io=on")
    return subprocess.check_output(args + [path], text=True).strip()


def loop_detach(dev):
    subprocess.call(["losetup", "-d", dev], stderr=subprocess.DEVNULL)


def kernel_log_lines():
    """The kernel log as lines, or [] where it cannot be read."""
    try:
        return subprocess.run(["dmesg"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, timeout=30).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return []


def main_wrapper(main):
    """Run main(); exit 0 on success, 77 on Skip (printed), 1 on Failure."""
    try:
        main()
    except Skip as e:
        log("SKIP: %s" % e)
        sys.exit(77)
    except Failure as e:
        log("FAIL: %s" % e)
        sys.exit(1)
