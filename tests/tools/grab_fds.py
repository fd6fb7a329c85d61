#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""grab_fds.py - run a command with a running daemon's FUSE connection, as a service manager
would hand it over (tests/bats/takeover.bats: a second daemon must refuse a connection that is
still being served).

  grab_fds.py PID -- COMMAND [ARGS...]

Copies PID's /dev/fuse fd and its tagdisk-state memfd into this process (pidfd_getfd(2)),
makes them fds 3 and 4 and executes COMMAND with LISTEN_FDS=2, LISTEN_PID set to its own pid
and LISTEN_FDNAMES=tagdisk-fuse:tagdisk-state.
"""
import ctypes
import os
import sys

SYS_PIDFD_GETFD = 438


def main():
    pid, cmd = int(sys.argv[1]), sys.argv[3:]
    fuse = state = None
    for name in os.listdir("/proc/%d/fd" % pid):
        target = os.readlink("/proc/%d/fd/%s" % (pid, name))
        if target == "/dev/fuse" and fuse is None:
            fuse = int(name)
        elif target.startswith("/memfd:tagdisk-state") and state is None:
            state = int(name)
    if fuse is None or state is None:
        print("grab_fds.py: process %d holds no FUSE connection and record" % pid, file=sys.stderr)
        return 1
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    got = []
    for fd in (fuse, state):
        n = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        if n < 0:
            print("grab_fds.py: pidfd_getfd: %s" % os.strerror(ctypes.get_errno()), file=sys.stderr)
            return 1
        got.append(n)
    os.dup2(got[0], 3)
    os.dup2(got[1], 4)
    os.environ["LISTEN_FDS"] = "2"
    os.environ["LISTEN_FDNAMES"] = "tagdisk-fuse:tagdisk-state"
    os.environ["LISTEN_PID"] = str(os.getpid())  # exec keeps the pid
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    sys.exit(main())
