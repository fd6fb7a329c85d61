#!/usr/bin/env bats
# Sparse-aware copies of a disk whose writes sit in a volatile write cache.
#
# With write_cache = volatile, completed writes that were never flushed live in
# the drive's cache, not in the image; reads return them all the same. So must
# SEEK_DATA / SEEK_HOLE and st_blocks on the disk file: a copy that trusts them
# (cp --sparse, qemu-img convert, rsync -S) would otherwise skip data that
# reads back, and copy a disk that is not the one it read.
#
# Each test writes a pattern at a few offsets of a fresh sparse image with
# O_DIRECT and no fsync, checks that it is in the cache and not on the image,
# then looks at the disk the way a copy does.

load helpers

setup_file() {
	requires_fuse || return 0
	requires python3 cp cmp dd stat || return 0
}
setup() { td_setup_dir; }
teardown() { td_teardown; }

SIZE=$((64 << 20))
CHUNK=65536
# 1 MiB; 5 MiB + 4 KiB; 33 MiB; 63 MiB + 512 (one sector into a line).
OFFSETS="1048576 5246976 34603520 66060800"

# write_unflushed: the pattern at $OFFSETS, CHUNK bytes each, straight to the drive (the
# disk file is direct I/O), never flushed: close is not a flush.
write_unflushed() {
	python3 - "$TD_DISK" $OFFSETS <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
for off in map(int, sys.argv[2:]):
    data = (b"tagdisk sparse %012d " % off) * 4096
    assert os.pwrite(fd, data[:65536], off) == 65536
os.close(fd)
PY
}

# expected_disk FILE: what the whole disk must read as.
expected_disk() {
	python3 - "$1" "$SIZE" $OFFSETS <<'PY'
import os, sys
path, size = sys.argv[1], int(sys.argv[2])
with open(path, "wb") as f:
    f.truncate(size)
    for off in map(int, sys.argv[3:]):
        f.seek(off)
        f.write(((b"tagdisk sparse %012d " % off) * 4096)[:65536])
PY
}

start_volatile() {
	printf '[drive]\nwrite_cache = volatile\n' >"$TD_DIR/tagdisk.ini"
	start_tagdiskd -c "$TD_DIR/tagdisk.ini" --size 64M
	[ "$(td_status write_cache)" = volatile ]
	write_unflushed
	# The premise: the data is in the cache, the image has none of it.
	[ "$(td_admin stats | td_json cache cached_bytes)" -eq $((4 * CHUNK)) ]
	[ "$(stat -c %b "$TD_IMG")" -eq 0 ]
}

@test "cp --sparse=always of the disk copies the unflushed writes: it equals a plain read" {
	start_volatile
	expected_disk "$TD_DIR/expected"
	cp --sparse=always "$TD_DISK" "$TD_DIR/sparse-always"
	cp --sparse=auto "$TD_DISK" "$TD_DIR/sparse-auto"
	dd if="$TD_DISK" of="$TD_DIR/plain" bs=1M iflag=direct status=none
	cmp "$TD_DIR/expected" "$TD_DIR/plain"
	cmp "$TD_DIR/plain" "$TD_DIR/sparse-always"
	cmp "$TD_DIR/plain" "$TD_DIR/sparse-auto"
	# Still unflushed: the copies read the cache, they did not make it write back.
	[ "$(stat -c %b "$TD_IMG")" -eq 0 ]
	# Stopping flushes: then the image itself is that disk.
	stop_tagdiskd
	cmp "$TD_DIR/expected" "$TD_IMG"
}

@test "SEEK_DATA and SEEK_HOLE on the disk see the unflushed writes, exactly" {
	start_volatile
	run python3 - "$TD_DISK" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print(os.lseek(fd, 0, os.SEEK_DATA),
      os.lseek(fd, 1048576, os.SEEK_HOLE),
      os.lseek(fd, 1048576 + 65536, os.SEEK_DATA),
      os.lseek(fd, 5246976 + 100, os.SEEK_DATA),
      os.lseek(fd, 66060800 + 65536, os.SEEK_HOLE),
      os.lseek(fd, 0, os.SEEK_HOLE))
PY
	assert_success
	assert_output "1048576 1114112 5246976 5247076 66126336 0"
	# Holes everywhere else.
	[ "$(td_hole_bytes "$TD_DISK" 0 "$SIZE")" -eq $((SIZE - 4 * CHUNK)) ]
}

# disk_blocks_at_least N: st_blocks of the disk file is N or more.
disk_blocks_at_least() {
	local blocks
	blocks=$(stat -c %b "$TD_DISK")
	echo "st_blocks $blocks"
	[ "$blocks" -ge "$1" ]
}

@test "st_blocks of the disk counts the unflushed writes" {
	start_volatile
	# The kernel may serve attributes it cached (for a second at most) before the writes.
	td_wait_for 60 "st_blocks to count the cached writes" \
		disk_blocks_at_least $((4 * CHUNK / 512))
}
