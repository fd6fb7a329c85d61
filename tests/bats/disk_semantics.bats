#!/usr/bin/env bats
# The disk file behaves like a block device (DESIGN.md, "The disk file"):
# fixed size, O_TRUNC ignored, ENOSPC past the end, byte-granular I/O,
# discard and write zeroes, fsync, read-only mode.

load helpers
bats_require_minimum_version 1.5.0

setup_file() { requires_fuse || return 0; }
setup() { td_setup_dir; }
teardown() { td_teardown; }

SIZE=$((32 * 1024 * 1024))

# A 32 MiB image full of random bytes, and a copy of it to replay writes on.
random_image() {
	head -c "$SIZE" /dev/urandom >"$TD_IMG"
	cp "$TD_IMG" "$TD_DIR/ref"
}

@test "O_TRUNC is ignored: open(O_WRONLY|O_TRUNC) keeps the data and the size" {
	random_image
	start_tagdiskd
	python3 - "$TD_DISK" "$SIZE" <<'PY'
import os, sys
disk, size = sys.argv[1], int(sys.argv[2])
pat = os.urandom(65536)
with open(disk, 'r+b') as f:
    f.write(pat)
assert os.stat(disk).st_size == size
tail = open(disk, 'rb').read()[65536:]
fd = os.open(disk, os.O_WRONLY | os.O_TRUNC)
st = os.fstat(fd)
os.close(fd)
assert st.st_size == size, st.st_size
assert os.stat(disk).st_size == size, os.stat(disk).st_size
data = open(disk, 'rb').read()
assert len(data) == size, len(data)
assert data[:65536] == pat
assert data[65536:] == tail
# 'wb' is O_WRONLY|O_CREAT|O_TRUNC: it writes from 0 and leaves the rest.
with open(disk, 'wb') as f:
    f.write(b'abc')
data = open(disk, 'rb').read()
assert len(data) == size
assert data[:3] == b'abc' and data[3:65536] == pat[3:] and data[65536:] == tail
PY
	[ "$(stat -c %s "$TD_DISK")" -eq "$SIZE" ]
}

@test "O_TRUNC is ignored: dd without conv=notrunc and a shell redirection keep the rest" {
	random_image
	start_tagdiskd
	head -c 16384 /dev/urandom >"$TD_DIR/pat"
	dd if="$TD_DIR/pat" of="$TD_DISK" bs=4k status=none
	dd if="$TD_DIR/pat" of="$TD_DIR/ref" bs=4k conv=notrunc status=none
	[ "$(stat -c %s "$TD_DISK")" -eq "$SIZE" ]
	cmp "$TD_DISK" "$TD_DIR/ref"
	printf 'hello' >"$TD_DISK"
	printf 'hello' | dd of="$TD_DIR/ref" conv=notrunc status=none
	[ "$(stat -c %s "$TD_DISK")" -eq "$SIZE" ]
	cmp "$TD_DISK" "$TD_DIR/ref"
	stop_tagdiskd
	cmp "$TD_IMG" "$TD_DIR/ref"
}

@test "truncate to another size fails with EPERM; to the same size it succeeds" {
	random_image
	start_tagdiskd
	run truncate -s 1M "$TD_DISK"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Operation not permitted"* ]]
	run truncate -s 64M "$TD_DISK"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Operation not permitted"* ]]
	run truncate -s 0 "$TD_DISK"
	[[ "$output" == *"Operation not permitted"* ]]
	truncate -s "$SIZE" "$TD_DISK"
	python3 - "$TD_DISK" "$SIZE" <<'PY'
import errno, os, sys
disk, size = sys.argv[1], int(sys.argv[2])
fd = os.open(disk, os.O_RDWR)
for n in (0, size - 512, size + 512):
    try:
        os.ftruncate(fd, n)
        raise SystemExit('ftruncate to %d succeeded' % n)
    except OSError as e:
        assert e.errno == errno.EPERM, e
os.ftruncate(fd, size)
PY
	[ "$(stat -c %s "$TD_DISK")" -eq "$SIZE" ]
	[ "$(stat -c %s "$TD_IMG")" -eq "$SIZE" ]
	cmp "$TD_DISK" "$TD_DIR/ref"
}

@test "writes at or past the end fail with ENOSPC; a write across the end is cut at the end" {
	random_image
	start_tagdiskd
	python3 - "$TD_DISK" "$SIZE" <<'PY'
import errno, os, sys
disk, size = sys.argv[1], int(sys.argv[2])
fd = os.open(disk, os.O_RDWR)
for off in (size, size + 1, size + 4096, 2 * size):
    for n in (1, 512, 4096, 65536):
        try:
            r = os.pwrite(fd, b'x' * n, off)
            raise SystemExit('pwrite(%d bytes at %d) returned %d' % (n, off, r))
        except OSError as e:
            assert e.errno == errno.ENOSPC, (off, n, e)
assert os.pwrite(fd, b'y' * 8192, size - 4096) == 4096
assert os.pwrite(fd, b'z' * 100, size - 10) == 10
assert os.pwrite(fd, b'w', size - 1) == 1
tail = os.pread(fd, 8192, size - 4096)
assert tail == b'y' * 4086 + b'z' * 9 + b'w', tail[-20:]
assert os.fstat(fd).st_size == size
PY
	[ "$(stat -c %s "$TD_DISK")" -eq "$SIZE" ]
	stop_tagdiskd
	[ "$(stat -c %s "$TD_IMG")" -eq "$SIZE" ]
	# Nothing but the last 4 KiB changed.
	cmp -n $((SIZE - 4096)) "$TD_IMG" "$TD_DIR/ref"
}

@test "reads at or past the end return 0 bytes; a read across the end stops at the end" {
	random_image
	start_tagdiskd
	python3 - "$TD_DISK" "$SIZE" "$TD_DIR/ref" <<'PY'
import os, sys
disk, size, ref = sys.argv[1], int(sys.argv[2]), open(sys.argv[3], 'rb').read()
fd = os.open(disk, os.O_RDONLY)
for off in (size, size + 1, size + 4096, 2 * size):
    assert os.pread(fd, 4096, off) == b'', off
assert os.pread(fd, 8192, size - 4096) == ref[-4096:]
assert os.pread(fd, 100, size - 7) == ref[-7:]
os.lseek(fd, size - 512, os.SEEK_SET)
assert os.read(fd, 4096) == ref[-512:]
assert os.read(fd, 4096) == b''
PY
	run dd if="$TD_DISK" of=/dev/null bs=4k skip=$((SIZE / 4096)) count=4
	[ "$status" -eq 0 ]
	[[ "$output" == *"0+0 records in"* ]]
}

# Replay random unaligned writes on the disk and on a plain copy; they must end equal.
# $1: logical block size the offsets cluster around.
unaligned_writes() {
	python3 - "$TD_DISK" "$TD_DIR/ref" "$1" <<'PY'
import os, random, sys
disk, ref, lbs = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(20240601)
d = os.open(disk, os.O_RDWR)
r = os.open(ref, os.O_RDWR)
size = os.fstat(r).st_size
assert os.fstat(d).st_size == size
for i in range(3000):
    kind = rnd.randrange(6)
    if kind == 0:                       # one byte anywhere
        off, n = rnd.randrange(size), 1
    elif kind == 1:                     # just around a sector boundary
        off, n = rnd.randrange(1, size // 512) * 512 + rnd.randint(-8, 8), rnd.randint(1, 40)
    elif kind == 2:                     # across a page boundary
        off, n = rnd.randrange(1, size // 4096) * 4096 - rnd.randint(1, 600), rnd.randint(1, 5000)
    elif kind == 3:                     # across a block boundary of the disk
        off, n = rnd.randrange(1, size // lbs) * lbs - rnd.randint(1, lbs), rnd.randint(lbs, 3 * lbs)
    elif kind == 4:                     # larger, unaligned at both ends
        off, n = rnd.randrange(size - 300000), rnd.randint(65537, 300000)
    else:                               # aligned
        off, n = rnd.randrange(size // lbs - 8) * lbs, lbs * rnd.randint(1, 8)
    n = min(n, size - off)
    data = rnd.randbytes(n)
    assert os.pwrite(d, data, off) == n, (off, n)
    os.pwrite(r, data, off)
    if i % 50 == 0:                     # read back an unaligned range now and then
        roff = max(0, off - rnd.randint(0, 700))
        rn = min(size - roff, n + rnd.randint(0, 1400))
        assert os.pread(d, rn, roff) == os.pread(r, rn, roff), (i, roff, rn)
PY
}

# Threads write disjoint 64-byte granules that share sectors: read-modify-write
# must not lose a neighbour's bytes.
concurrent_unaligned_writes() {
	python3 - "$TD_DISK" "$TD_DIR/ref" <<'PY'
import os, random, sys, threading
disk, ref = sys.argv[1], sys.argv[2]
NTHREADS, GRANULE, SPAN = 8, 64, 256 * 1024
d = os.open(disk, os.O_RDWR)
r = os.open(ref, os.O_RDWR)
errors = []

def worker(t):
    rnd = random.Random(t)
    try:
        for _ in range(600):
            g = rnd.randrange(SPAN // GRANULE // NTHREADS) * NTHREADS + t
            start = g * GRANULE + rnd.randrange(GRANULE)
            n = rnd.randint(1, g * GRANULE + GRANULE - start)
            data = rnd.randbytes(n)
            assert os.pwrite(d, data, start) == n
            os.pwrite(r, data, start)
    except Exception as e:
        errors.append(e)

threads = [threading.Thread(target=worker, args=(t,)) for t in range(NTHREADS)]
for th in threads:
    th.start()
for th in threads:
    th.join()
assert not errors, errors
PY
}

@test "unaligned byte writes give the same bytes as on a plain file (512-byte blocks)" {
	random_image
	start_tagdiskd
	unaligned_writes 512
	cmp "$TD_DISK" "$TD_DIR/ref"
	concurrent_unaligned_writes
	cmp "$TD_DISK" "$TD_DIR/ref"
	stop_tagdiskd
	cmp "$TD_IMG" "$TD_DIR/ref"
}

@test "unaligned byte writes give the same bytes with --name other and 4096-byte blocks" {
	random_image
	printf '[disk]\nlogical_block_size = 4096\n' >"$TD_DIR/td.ini"
	TD_DISK=$TD_MNT/other
	start_tagdiskd -c "$TD_DIR/td.ini" --name other
	[ "$(ls "$TD_MNT")" = other ]
	[ ! -e "$TD_MNT/disk" ]
	[ "$(stat -c %s "$TD_DISK")" -eq "$SIZE" ]
	[ "$(stat -c %o "$TD_DISK")" -eq 4096 ]
	[ "$(td_status logical_block_size)" -eq 4096 ]
	[ "$(td_status disk)" = "$TD_MNT/other" ]
	unaligned_writes 4096
	cmp "$TD_DISK" "$TD_DIR/ref"
	concurrent_unaligned_writes
	cmp "$TD_DISK" "$TD_DIR/ref"
	stop_tagdiskd
	cmp "$TD_IMG" "$TD_DIR/ref"
}

@test "fallocate --punch-hole reads back zeroes and punches a hole in the image" {
	random_image
	start_tagdiskd
	local before after
	before=$(du -B1 "$TD_IMG" | cut -f1)
	[ "$(td_hole_bytes "$TD_IMG" 0 "$SIZE")" -eq 0 ]
	fallocate --punch-hole --offset 1M --length 4M "$TD_DISK"
	fallocate --punch-hole --offset 1M --length 4M "$TD_DIR/ref"
	# Unaligned edges: the partial blocks are zeroed, the bytes around them kept.
	fallocate --punch-hole --offset $((8 * 1048576 + 100)) --length 10000 "$TD_DISK"
	fallocate --punch-hole --offset $((8 * 1048576 + 100)) --length 10000 "$TD_DIR/ref"
	cmp "$TD_DISK" "$TD_DIR/ref"
	cmp -n 4194304 -i $((1048576)):0 "$TD_DISK" /dev/zero
	[ "$(td_hole_bytes "$TD_IMG" 1048576 4194304)" -eq 4194304 ]
	[ "$(td_hole_bytes "$TD_IMG" 0 1048576)" -eq 0 ]
	[ "$(td_hole_bytes "$TD_IMG" $((5 * 1048576)) 1048576)" -eq 0 ]
	# SEEK_HOLE / SEEK_DATA on the disk file show the image's holes.
	[ "$(td_hole_bytes "$TD_DISK" 1048576 4194304)" -eq 4194304 ]
	[ "$(td_hole_bytes "$TD_DISK" 0 1048576)" -eq 0 ]
	[ "$(td_hole_bytes "$TD_DISK" 0 "$SIZE")" -eq "$(td_hole_bytes "$TD_IMG" 0 "$SIZE")" ]
	after=$(du -B1 "$TD_IMG" | cut -f1)
	[ $((before - after)) -ge 4194304 ]
	[ "$(td_admin stats | td_json discards)" -ge 2 ]
	stop_tagdiskd
	cmp "$TD_IMG" "$TD_DIR/ref"
}

@test "fallocate --zero-range reads back zeroes and keeps the bytes around it" {
	random_image
	start_tagdiskd
	fallocate --zero-range --offset 2M --length 3M "$TD_DISK"
	fallocate --zero-range --offset 2M --length 3M "$TD_DIR/ref"
	fallocate --zero-range --offset $((10 * 1048576 - 77)) --length 5000 "$TD_DISK"
	fallocate --zero-range --offset $((10 * 1048576 - 77)) --length 5000 "$TD_DIR/ref"
	cmp "$TD_DISK" "$TD_DIR/ref"
	cmp -n 3145728 -i $((2 * 1048576)):0 "$TD_DISK" /dev/zero
	# The image holds zeroes there (allocated or not, as the filesystem under it likes).
	cmp -n 3145728 -i $((2 * 1048576)):0 "$TD_IMG" /dev/zero
	[ "$(td_admin stats | td_json write_zeroes)" -ge 2 ]
	stop_tagdiskd
	cmp "$TD_IMG" "$TD_DIR/ref"
}

@test "fallocate without flags allocates within the disk and fails with ENOSPC past the end" {
	random_image
	start_tagdiskd
	fallocate --offset 0 --length "$SIZE" "$TD_DISK"
	run fallocate --offset "$SIZE" --length 4096 "$TD_DISK"
	[ "$status" -ne 0 ]
	[[ "$output" == *"No space left on device"* ]]
	[ "$(stat -c %s "$TD_DISK")" -eq "$SIZE" ]
	cmp "$TD_DISK" "$TD_DIR/ref"
}

@test "fsync and fdatasync reach the drive as flushes and succeed" {
	random_image
	start_tagdiskd
	local before after
	before=$(td_admin stats | td_json flushes)
	python3 - "$TD_DISK" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.pwrite(fd, b'durable' * 100, 12345)
os.fsync(fd)
os.pwrite(fd, b'again' * 100, 99999)
os.fdatasync(fd)
os.close(fd)
PY
	dd if=/dev/zero of="$TD_DISK" bs=4k count=1 conv=notrunc,fsync status=none
	after=$(td_admin stats | td_json flushes)
	[ $((after - before)) -ge 3 ]
	[ "$(td_status errors)" -eq 0 ]
}

@test "read-only mode: opening for writing fails with EROFS, reads work, the image is untouched" {
	random_image
	local sum
	sum=$(sha256sum <"$TD_IMG")
	start_tagdiskd --read-only
	[ "$(td_status read_only)" = true ]
	run bash -c "echo x >'$TD_DISK'"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Read-only file system"* ]]
	run dd if=/dev/zero of="$TD_DISK" bs=4k count=1 conv=notrunc
	[ "$status" -ne 0 ]
	[[ "$output" == *"Read-only file system"* ]]
	run fallocate --punch-hole --offset 0 --length 4096 "$TD_DISK"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Read-only file system"* ]]
	python3 - "$TD_DISK" <<'PY'
import errno, os, sys
for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC):
    try:
        os.open(sys.argv[1], flags)
        raise SystemExit('open with flags %#x succeeded' % flags)
    except OSError as e:
        assert e.errno == errno.EROFS, e
PY
	[ "$(sha256sum <"$TD_DISK")" = "$sum" ]
	stop_tagdiskd
	[ "$(sha256sum <"$TD_IMG")" = "$sum" ]
}
