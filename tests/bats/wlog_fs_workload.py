#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The file system workload of wlog_fs.bats: creates, renames, appends and unlinks, each made
durable with fsync (the file's, then the directory's), and after each one a write log mark.

    wlog_fs_workload.py MOUNTPOINT TAGDISKCTL SOCKET MANIFEST OPS SEED

Operation i works in MOUNTPOINT/d: create f<i> (written to "tmp", fsynced, renamed, the
directory fsynced), append to a file (fsynced), rename a file to r<i> or unlink one (the
directory fsynced); then `tagdiskctl mark m<i>`. MANIFEST gets, for each mark, the files the
directory must hold once the disk is replayed to it: lines "m<i> <i> NAME SHA256 LAST", LAST
being the last operation that touches NAME in the whole run (so a file with LAST <= i must
still be intact in any crash after mark m<i>), and a line "m<i> <i> - - -" for every mark.
"""
import hashlib
import os
import random
import subprocess
import sys


def fsync_fd(fd):
    os.fsync(fd)


def main():
    mnt, ctl, sock, manifest = sys.argv[1:5]
    nops, seed = int(sys.argv[5]), int(sys.argv[6])
    rnd = random.Random(seed)
    d = os.path.join(mnt, "d")
    os.mkdir(d)
    dfd = os.open(d, os.O_RDONLY)
    fsync_fd(dfd)
    files, touched, marks = {}, {}, []
    for i in range(nops):
        op = "create" if len(files) < 3 else rnd.choice(
            ["create", "create", "append", "rename", "unlink"])
        if op == "create":
            name = "f%d" % i
            data = rnd.randbytes(rnd.randint(1, 64) * 1024 - rnd.randint(0, 1000))
            tmp = os.path.join(d, "tmp")
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                fsync_fd(f.fileno())
            os.rename(tmp, os.path.join(d, name))
            fsync_fd(dfd)
            files[name] = data
            touched[name] = i
        elif op == "append":
            name = rnd.choice(sorted(files))
            data = rnd.randbytes(rnd.randint(1, 16) * 1000)
            with open(os.path.join(d, name), "ab") as f:
                f.write(data)
                f.flush()
                fsync_fd(f.fileno())
            files[name] += data
            touched[name] = i
        elif op == "rename":
            name = rnd.choice(sorted(files))
            new = "r%d" % i
            os.rename(os.path.join(d, name), os.path.join(d, new))
            fsync_fd(dfd)
            files[new] = files.pop(name)
            touched[name] = touched[new] = i
        else:
            name = rnd.choice(sorted(files))
            os.unlink(os.path.join(d, name))
            fsync_fd(dfd)
            files.pop(name)
            touched[name] = i
        # The fsyncs returned: the mark says so in the log.
        subprocess.run([ctl, "-s", sock, "mark", "m%d" % i], check=True,
                       stdout=subprocess.DEVNULL)
        marks.append((i, {n: hashlib.sha256(v).hexdigest() for n, v in files.items()}))
    with open(manifest, "w") as m:
        for i, fl in marks:
            m.write("m%d %d - - -\n" % (i, i))
            for n, h in sorted(fl.items()):
                m.write("m%d %d %s %s %d\n" % (i, i, n, h, touched[n]))
    print("workload: %d operations, %d files at the end" % (nops, len(files)), file=sys.stderr)


if __name__ == "__main__":
    main()
