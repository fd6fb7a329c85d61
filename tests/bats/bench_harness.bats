#!/usr/bin/env bats
# make bench's harness (bench/bench.py): the classes that start and stop what it measures.
# A full `make bench` takes about 25 minutes and is not part of make check, so a stop that
# raised (qemu-storage-daemon's export had no mount attribute) only showed at the end of
# one. Here each kind serves a pattern, stops, and leaves the pattern in its image and no
# mount behind, also when the process is already dead.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires qemu-storage-daemon || return 0
}
setup() { td_setup_dir; }
teardown() { td_teardown; }

# harness KIND...: start each KIND (tagdiskd, tagdiskd-killed, qsd, qsd-killed) on an image
# of its own in TD_DIR, write 1 MiB of a pattern at 1 MiB through its disk file, stop it
# (after a kill -9 for *-killed), and check the image and /proc/mounts. Prints what it saw.
harness() {
	/usr/bin/python3 - "$TD_ROOT/bench" "$TAGDISKD" "$TD_DIR" "$@" <<'PY'
import os, sys
sys.path.insert(0, sys.argv[1])
import bench

tagdiskd, work, kinds = sys.argv[2], sys.argv[3], sys.argv[4:]
pattern = bytes((i * 7 + 3) % 251 for i in range(1 << 20))
bad = 0
for kind in kinds:
    img = os.path.join(work, kind + ".img")
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    if kind.startswith("qsd"):
        d = bench.Qsd(img, work, kind)
    else:
        d = bench.Daemon(tagdiskd, img, work, kind, ["--mode", "rq"], transport="classic")
    fd = os.open(d.disk, os.O_RDWR)
    os.pwrite(fd, pattern, 1 << 20)
    os.fsync(fd)
    os.close(fd)
    if kind.endswith("-killed"):
        d.proc.kill()
        d.proc.wait()
    d.stop()
    with open(img, "rb") as f:
        f.seek(1 << 20)
        stored = f.read(1 << 20) == pattern
    mounts = open("/proc/mounts").read()
    mounted = any(line.split()[1] == d.mnt for line in mounts.splitlines())
    print(f"{kind}: pattern {'stored' if stored else 'NOT stored'}, "
          f"{'still mounted' if mounted else 'unmounted'}")
    bad += (not stored) + mounted
sys.exit(1 if bad else 0)
PY
}

@test "bench harness: tagdiskd and qemu-storage-daemon serve, stop, and leave their data and no mount" {
	run harness tagdiskd qsd
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "tagdiskd: pattern stored, unmounted" ]
	[ "${lines[1]}" = "qsd: pattern stored, unmounted" ]
}

@test "bench harness: a daemon killed with -9 is unmounted by its stop, its written data in the image" {
	run harness tagdiskd-killed qsd-killed
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "tagdiskd-killed: pattern stored, unmounted" ]
	[ "${lines[1]}" = "qsd-killed: pattern stored, unmounted" ]
}
