#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""fdstore.py - the service manager's side of sd_notify's fd store, for tests.

  fdstore.py DIR -- COMMAND [ARGS...]

Plays what systemd does for a Type=notify unit with FileDescriptorStoreMax=,
Restart=on-failure and RestartPreventExitStatus=2, where no systemd runs:

  - $NOTIFY_SOCKET (DIR/notify) takes the service's messages: READY=1,
    STOPPING=1, FDSTORE=1 with FDNAME= and the fds attached (SCM_RIGHTS;
    kept, one per name), FDSTOREREMOVE=1 with FDNAME=;
  - the service is started with LISTEN_FDS, LISTEN_PID and LISTEN_FDNAMES
    for the fds the store holds, passed as fds 3, 4, ...;
  - when it ends on a signal, or with a status other than 0 and 2, it is
    started again with the store (a crash); a status of 0 or 2 ends the
    harness, which closes the store (a stop).

DIR/events gets one line per event, with a monotonic timestamp in seconds:
"start PID", "ready PID", "exit PID STATUS", "killed PID SIGNAL",
"store NAME", "remove NAME", "stopped". DIR/pid holds the service's pid
(rewritten before each start's READY), so a test can kill it. SIGTERM to
the harness stops the service (SIGTERM) and, once it exits, the harness.
"""
import array
import os
import select
import signal
import socket
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        print("usage: fdstore.py DIR -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    state_dir, cmd = sys.argv[1], sys.argv[3:]
    notify_path = os.path.join(state_dir, "notify")
    events = open(os.path.join(state_dir, "events"), "a", buffering=1)
    store = {}  # name -> fd
    stopping = False

    def event(text):
        events.write("%.6f %s\n" % (time.monotonic(), text))

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if os.path.exists(notify_path):
        os.unlink(notify_path)
    sock.bind(notify_path)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)

    def on_term(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)

    def receive():
        fds = array.array("i")
        try:
            msg, anc, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(16 * fds.itemsize))
        except BlockingIOError:
            return
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
        for fd in fds:
            os.set_inheritable(fd, False)
        fields = dict(line.split("=", 1) for line in msg.decode().split("\n") if "=" in line)
        name = fields.get("FDNAME", "stored")
        if fields.get("FDSTORE") == "1" and fds:
            old = store.get(name)
            store[name] = fds[0]
            for extra in fds[1:]:
                os.close(extra)
            if old is not None:
                os.close(old)
            event("store %s" % name)
        else:
            for fd in fds:
                os.close(fd)
        if fields.get("FDSTOREREMOVE") == "1":
            old = store.pop(name, None)
            if old is not None:
                os.close(old)
            event("remove %s" % name)
        if fields.get("READY") == "1":
            event("ready %d" % child.pid)

    while True:
        names = list(store)
        fds = [store[n] for n in names]

        def setup_fds(fds=fds):
            # In the child: the stored fds as 3, 4, ... (dup2 clears close-on-exec).
            moved = [os.dup(fd) for fd in fds]
            for i, fd in enumerate(moved):
                os.dup2(fd, 3 + i)
            for fd in moved:
                os.close(fd)

        env = dict(os.environ, NOTIFY_SOCKET=notify_path)
        for k in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
            env.pop(k, None)
        argv = cmd
        if fds:
            env["LISTEN_FDS"] = str(len(fds))
            env["LISTEN_FDNAMES"] = ":".join(names)
            # LISTEN_PID is the service's own pid: the shell's, which exec keeps.
            argv = ["sh", "-c", 'LISTEN_PID=$$ exec "$@"', "sh"] + cmd
        # Every other fd of ours is close-on-exec (Python's default; the store's are made so).
        child = subprocess.Popen(argv, env=env, preexec_fn=setup_fds, close_fds=False)
        with open(os.path.join(state_dir, "pid.tmp"), "w") as f:
            f.write("%d\n" % child.pid)
        os.rename(os.path.join(state_dir, "pid.tmp"), os.path.join(state_dir, "pid"))
        event("start %d" % child.pid)
        sent_term = False
        while True:
            if stopping and not sent_term:
                try:
                    child.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
                sent_term = True
            try:
                ready, _, _ = select.select([sock], [], [], 0.05)
            except InterruptedError:
                ready = []
            if ready:
                receive()
            rc = child.poll()
            if rc is not None:
                # Messages sent just before the end still count.
                sock.setblocking(False)
                while True:
                    try:
                        select.select([sock], [], [], 0)[0] and receive()
                    except BlockingIOError:
                        pass
                    if not select.select([sock], [], [], 0)[0]:
                        break
                sock.setblocking(True)
                break
        if rc < 0:
            event("killed %d %d" % (child.pid, -rc))
        else:
            event("exit %d %d" % (child.pid, rc))
        if stopping or rc in (0, 2):
            break
        time.sleep(float(os.environ.get("FDSTORE_RESTART_SEC", "0.1")))  # RestartSec=
    for fd in store.values():
        os.close(fd)
    event("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
