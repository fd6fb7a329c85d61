#!/usr/bin/env bats
# What the daemon says about a network backend, and how the disk file looks
# without an image file of its own, with nbdkit's memory plugin as the server
# ([drive] backend = nbd): status names the backend and its target, tagdiskctl
# prints them, st_blocks counts the whole size as allocated and SEEK_DATA /
# SEEK_HOLE see only data; a [disk] size other than the export's stops the
# start with status 2 and mounts nothing.
#
# Without nbdkit every test skips with one line starting "NBD:".

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires_backend nbd || return 0
	command -v nbdkit >/dev/null || { td_skip_file "NBD: nbdkit is not installed (tests/deps.sh)"; return 0; }
	return 0
}

setup() {
	td_setup_dir
	# The disk is the export: no image file.
	TD_IMG=
	NBD_SOCK=$TD_DIR/nbd.sock
	NBD_URI="nbd+unix:///?socket=$NBD_SOCK"
	NBD_PID=
	rm -f "$NBD_SOCK"
	nbdkit -f -U "$NBD_SOCK" memory 64M >"$TD_DIR/nbdkit.log" 2>&1 3>&- &
	NBD_PID=$!
	td_wait_until 60 test -S "$NBD_SOCK"
	printf '[drive]\nbackend = nbd\n[nbd]\nuri = %s\n' "$NBD_URI" >"$TD_DIR/nbd.ini"
}

teardown() {
	td_teardown
	if [ -n "$NBD_PID" ]; then
		kill "$NBD_PID" 2>/dev/null || true
		wait "$NBD_PID" 2>/dev/null || true
	fi
}

@test "status: backend nbd, the URI as backend_target and image, the export's size" {
	start_tagdiskd -c "$TD_DIR/nbd.ini"
	[ "$(td_status backend)" = nbd ]
	[ "$(td_status backend_target)" = "$NBD_URI" ]
	[ "$(td_status image)" = "$NBD_URI" ]
	[ "$(td_status size)" -eq $((64 << 20)) ]
	run -0 td_ctl status
	[ "${lines[1]}" = "$(printf '%-10s  %s' image "$NBD_URI")" ]
	[ "${lines[2]}" = "$(printf '%-10s  %s' backend "nbd ($NBD_URI)")" ]
	grep -qF "serving \"$NBD_URI\" (64M)" "$TD_LOG"
	stop_tagdiskd
}

@test "without an image file the disk is all data: st_blocks, SEEK_DATA and SEEK_HOLE" {
	start_tagdiskd -c "$TD_DIR/nbd.ini"
	[ "$(stat -c %s "$TD_DISK")" -eq $((64 << 20)) ]
	[ $(($(stat -c %b "$TD_DISK") * $(stat -c %B "$TD_DISK"))) -eq $((64 << 20)) ]
	run -0 python3 -c '
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
for off in (0, 4096, size - 512):
    assert os.lseek(fd, off, os.SEEK_DATA) == off, off
    assert os.lseek(fd, off, os.SEEK_HOLE) == size, off
try:
    os.lseek(fd, size, os.SEEK_DATA)
    sys.exit("SEEK_DATA at the end did not fail")
except OSError as e:
    assert e.errno == errno.ENXIO, e
' "$TD_DISK"
	# Data written through the disk file reads back.
	dd if=/dev/urandom of="$TD_DIR/p" bs=64k count=4 status=none
	dd if="$TD_DIR/p" of="$TD_DISK" bs=64k seek=3 oflag=direct conv=notrunc status=none
	cmp <(dd if="$TD_DISK" bs=64k skip=3 count=4 iflag=direct status=none) "$TD_DIR/p"
	stop_tagdiskd
}

@test "a [disk] size other than the export's: exit 2, one error naming both, nothing mounted" {
	run_tagdiskd -c "$TD_DIR/nbd.ini" --mount "$TD_MNT" --socket "$TD_SOCK" --size 32M
	echo "status $status; stdout: $output; stderr: $stderr" >&2
	[ "$status" -eq 2 ]
	grep -qxF "tagdiskd: error: --size \"32M\": the NBD export \"$NBD_URI\" is 64M (67108864 bytes)" \
		<<<"$stderr"
	[ ! -e "$TD_SOCK" ]
	[ -z "$(ls -A "$TD_MNT")" ]
	td_not_mounted "$TD_MNT"
	# The same size is fine.
	start_tagdiskd -c "$TD_DIR/nbd.ini" --size 64M
	[ "$(td_status size)" -eq $((64 << 20)) ]
	stop_tagdiskd
}
