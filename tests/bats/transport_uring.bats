#!/usr/bin/env bats
# FUSE over io_uring ([disk] transport = uring): the ring is really used (the log says so,
# the per-queue request counts of `status` grow with I/O), and the disk file behaves as on
# /dev/fuse: block-device semantics, fio verify, ext4 on a direct-I/O loop device, SIGTERM
# drain, kill -9 and restart. The disk-file, daemon, crash, reset and fio-verify files run
# over the ring too (tests/run-tests.sh, TD_TRANSPORT=uring).

load helpers
bats_require_minimum_version 1.5.0

TD_TRANSPORT=uring

setup_file() {
	requires_fuse || return 0
	requires fio losetup mkfs.ext4 e2fsck python3 || return 0
}
setup() { td_setup_dir; }
teardown() { td_teardown; }

# The requests all ring queues received, summed.
ring_requests() {
	td_status uring_requests | python3 -c 'import json, sys; print(sum(json.load(sys.stdin)))'
}

@test "uring: the log says uring, status shows one queue per CPU, and their counts grow with I/O" {
	start_tagdiskd --size 64M
	grep -q 'fuse: transport uring: ' "$TD_LOG"
	[ "$(td_status transport)" = uring ]
	local cpus queues before after
	cpus=$(python3 -c '
s = open("/sys/devices/system/cpu/possible").read().strip()
print(max(int(p.split("-")[-1]) for p in s.split(",")) + 1)')
	queues=$(td_status uring_requests | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
	[ "$queues" -eq "$cpus" ]
	[ "$(td_status uring_entries)" -ge 2 ]
	before=$(ring_requests)
	dd if=/dev/urandom of="$TD_DISK" bs=4k count=256 oflag=direct conv=notrunc status=none
	dd if="$TD_DISK" of="$TD_DIR/back" bs=4k count=256 iflag=direct status=none
	after=$(ring_requests)
	echo "ring requests: $before -> $after" >&2
	# 256 writes and 256 reads, each one request at least, all through the rings.
	[ $((after - before)) -ge 512 ]
	cmp -n $((1024 * 1024)) "$TD_DIR/back" "$TD_IMG"
	stop_tagdiskd
}

# no_recovery: a config file that lets transport auto pick the ring ([disk] recovery = false).
no_recovery() {
	printf '[disk]\nrecovery = false\n' >"$TD_DIR/no-recovery.ini"
	echo "$TD_DIR/no-recovery.ini"
}

@test "transport auto uses uring where the kernel has it and recovery is off; classic uses no ring" {
	# [disk] recovery (the default) keeps the mount across daemon crashes: classic.
	TD_TRANSPORT=auto start_tagdiskd --size 16M
	[ "$(td_status transport)" = classic ]
	grep -q 'fuse: transport classic: \[disk\] recovery keeps the mount' "$TD_LOG"
	stop_tagdiskd
	TD_TRANSPORT=auto start_tagdiskd --size 16M -c "$(no_recovery)"
	[ "$(td_status transport)" = uring ]
	stop_tagdiskd
	TD_TRANSPORT=classic start_tagdiskd --size 16M
	[ "$(td_status transport)" = classic ]
	run td_status uring_requests
	[ "$status" -ne 0 ]
	! grep -q 'transport uring' "$TD_LOG"
	stop_tagdiskd
}

@test "a bad --transport value exits 2 naming the option and the value" {
	run_tagdiskd --image "$TD_IMG" --size 16M --mount "$TD_MNT" --transport ring
	[ "$status" -eq 2 ]
	[[ "$stderr" == *--transport* ]]
	[[ "$stderr" == *ring* ]]
	td_not_mounted "$TD_MNT"
}

# fake_kernel: set FAKE_KERNEL to a command prefix that runs its command in a mount namespace
# of its own where the fuse module's enable_uring reads N and cannot be written (a read-only
# file bound over it): a kernel that offers no FUSE over io_uring, without touching the real
# switch. The command replaces the prefix (same pid).
fake_kernel() {
	printf 'N\n' >"$TD_DIR/enable_uring"
	FAKE_KERNEL=(unshare -m --propagation private sh -c '
		p=/sys/module/fuse/parameters/enable_uring
		mount --bind "$1" "$p" && mount -o remount,bind,ro "$p" || exit 99
		shift
		exec "$@"' sh "$TD_DIR/enable_uring")
}

@test "an explicit transport uring the kernel cannot give exits 2 before serving, with or without -f" {
	requires unshare || return 0
	local fg
	fake_kernel
	for fg in -f ""; do
		run --separate-stderr timeout -s KILL 120 "${FAKE_KERNEL[@]}" "$TAGDISKD" $fg \
			--image "$TD_IMG" --size 16M --mount "$TD_MNT" --socket "$TD_SOCK" --transport uring
		echo "${fg:-without -f}: status $status, stderr: $stderr" >&2
		[ "$status" -eq 2 ]
		[[ "$stderr" == *"transport uring: "*"enable_uring is N and cannot be set"* ]]
		# Nothing was left: no image, no socket, no mount.
		[ ! -e "$TD_IMG" ]
		[ ! -e "$TD_SOCK" ]
		td_not_mounted "$TD_MNT"
	done
}

@test "where the kernel offers no ring, transport auto serves over /dev/fuse and says so once" {
	requires unshare || return 0
	fake_kernel
	"${FAKE_KERNEL[@]}" "$TAGDISKD" -f --image "$TD_IMG" --size 16M --mount "$TD_MNT" \
		--socket "$TD_SOCK" --transport auto -c "$(no_recovery)" >"$TD_LOG" 2>&1 &
	TD_PID=$!
	# The mount lives in that namespace; the socket is in this test's directory.
	td_wait_until 60 test -S "$TD_SOCK"
	td_wait_until 60 grep -q 'serving' "$TD_LOG"
	[ "$(td_status transport)" = classic ]
	[ "$(grep -c 'fuse: transport classic: .*enable_uring is N and cannot be set' "$TD_LOG")" -eq 1 ]
	! grep -q 'error' "$TD_LOG"
	stop_tagdiskd
}

@test "under valgrind: transport uring is refused up front (exit 2); auto serves over /dev/fuse" {
	requires valgrind || return 0
	if ldd "$TAGDISKD" | grep -qE 'lib(asan|tsan)'; then
		skip "a sanitizer build: valgrind cannot run it (make check-valgrind runs a plain one)"
	fi
	run --separate-stderr timeout -s KILL 300 valgrind -q --error-exitcode=99 "$TAGDISKD" -f \
		--image "$TD_IMG" --size 16M --mount "$TD_MNT" --socket "$TD_SOCK" --transport uring
	echo "status $status, stderr: $stderr" >&2
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"transport uring: the daemon runs under valgrind"* ]]
	[ ! -e "$TD_IMG" ]
	td_not_mounted "$TD_MNT"
	TD_WRAPPER="valgrind -q --error-exitcode=99" TD_TRANSPORT=auto start_tagdiskd --size 16M \
		-c "$(no_recovery)"
	[ "$(td_status transport)" = classic ]
	[ "$(grep -c 'fuse: transport classic: the daemon runs under valgrind' "$TD_LOG")" -eq 1 ]
	dd if=/dev/urandom of="$TD_DIR/data" bs=64k count=4 status=none
	dd if="$TD_DIR/data" of="$TD_DISK" bs=64k oflag=direct conv=notrunc status=none
	cmp "$TD_DIR/data" <(dd if="$TD_DISK" bs=64k count=4 iflag=direct status=none)
	stop_tagdiskd
}

@test "uring: block-device semantics: O_TRUNC ignored, ENOSPC past the end, short reads, holes, flushes" {
	start_tagdiskd --size 1M
	local size=$((1024 * 1024))
	head -c "$size" /dev/urandom >"$TD_DIR/ref"
	dd if="$TD_DIR/ref" of="$TD_DISK" bs=64k conv=notrunc status=none
	# A shell redirection opens with O_TRUNC: ignored, the size stays.
	: >"$TD_DISK"
	[ "$(stat -c %s "$TD_DISK")" -eq "$size" ]
	cmp "$TD_DISK" "$TD_DIR/ref"
	run truncate -s 2M "$TD_DISK"
	[ "$status" -ne 0 ]
	# Past the end: ENOSPC on write, nothing on read.
	run --separate-stderr dd if=/dev/zero of="$TD_DISK" bs=4k count=1 seek=256 conv=notrunc
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"No space left"* ]]
	[ "$(dd if="$TD_DISK" bs=4k skip=256 count=1 status=none | wc -c)" -eq 0 ]
	# Unaligned byte writes land exactly as in a plain file.
	printf 'tagdisk-uring' | dd of="$TD_DISK" bs=1 seek=1000 conv=notrunc status=none
	printf 'tagdisk-uring' | dd of="$TD_DIR/ref" bs=1 seek=1000 conv=notrunc status=none
	cmp "$TD_DISK" "$TD_DIR/ref"
	# Punching a hole reads back zeroes.
	fallocate --punch-hole --keep-size -o 65536 -l 65536 "$TD_DISK"
	cmp -n 65536 <(dd if="$TD_DISK" bs=64k skip=1 count=1 status=none) /dev/zero
	# fsync is a flush at the drive.
	local flushes
	flushes=$(td_stats flushes)
	python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDWR); os.fsync(fd)' "$TD_DISK"
	[ "$(td_stats flushes)" -gt "$flushes" ]
	[ "$(td_status errors)" -eq 0 ]
	stop_tagdiskd
}

VERIFY=(--direct=1 --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0
	--verify_state_save=0 --ioengine=libaio)

fio_ok() { # NAME FIO_OPTIONS...
	local name=$1
	shift
	(cd "$TD_DIR" && timeout 900 fio --name="$name" --output="$TD_DIR/$name.out" "$@") || {
		cat "$TD_DIR/$name.out" >&2
		return 1
	}
	grep -q 'err= 0' "$TD_DIR/$name.out"
}

@test "uring: fio verify on the disk file and a direct-I/O loop device, rq and bio modes" {
	local mode dev
	for mode in rq bio; do
		start_tagdiskd --size 256M --mode "$mode"
		fio_ok "rw4k-$mode" --filename="$TD_DISK" --rw=randwrite --bs=4k --iodepth=32 \
			--size=64M "${VERIFY[@]}"
		fio_ok "seq1m-$mode" --filename="$TD_DISK" --rw=write --bs=1M --iodepth=8 \
			--size=256M "${VERIFY[@]}"
		dev=$(td_losetup --direct-io=on)
		fio_ok "loop-$mode" --filename="$dev" --rw=randwrite --bs=16k --iodepth=32 \
			--size=64M "${VERIFY[@]}"
		losetup -d "$dev"
		[ "$(td_status transport)" = uring ]
		[ "$(td_status errors)" -eq 0 ]
		stop_tagdiskd
	done
}

@test "uring, bio mode: 1 MiB I/O from one job goes to ring helpers; mixed sizes keep their data" {
	start_tagdiskd --size 256M --mode bio
	[ "$(td_status uring_helpers)" -eq 0 ]
	fio_ok seq1m --filename="$TD_DISK" --rw=write --bs=1M --iodepth=8 --size=128M "${VERIFY[@]}"
	local helpers bound
	helpers=$(td_status uring_helpers)
	bound=$(($(nproc) * 2))
	[ "$bound" -ge 4 ] || bound=4
	echo "ring helpers after 1 MiB writes and reads: $helpers (bound $bound)" >&2
	[ "$helpers" -ge 1 ]
	[ "$helpers" -le "$bound" ]
	# Entries move between the queues' threads and the helpers as the sizes change.
	fio_ok mixed --filename="$TD_DISK" --rw=randrw --bsrange=4k-1M --iodepth=32 \
		--numjobs=2 --offset_increment=128M --size=128M "${VERIFY[@]}"
	[ "$(td_status uring_helpers)" -le "$bound" ]
	cmp "$TD_DISK" "$TD_IMG"
	[ "$(td_status errors)" -eq 0 ]
	stop_tagdiskd
	grep -q 'fuse: transport uring: ' "$TD_LOG"
}

@test "uring, rq mode with drive workers: no ring helpers (the workers do the copies)" {
	start_tagdiskd --size 64M --mode rq --workers 2
	fio_ok seq1m --filename="$TD_DISK" --rw=write --bs=1M --iodepth=8 --size=64M "${VERIFY[@]}"
	[ "$(td_status uring_helpers)" -eq 0 ]
	stop_tagdiskd
}

@test "uring: ext4 on a direct-I/O loop device: fsck clean, files intact after a remount" {
	local dev fs=$TD_DIR/fs tree=/usr/include/linux
	start_tagdiskd --size 256M --workers 2
	dev=$(td_losetup --direct-io=on)
	mkfs.ext4 -q -F "$dev"
	mkdir "$fs"
	mount "$dev" "$fs"
	cp -a "$tree" "$fs/tree"
	umount "$fs"
	run e2fsck -fn "$dev"
	echo "$output" >&2
	[ "$status" -eq 0 ]
	mount "$dev" "$fs"
	diff -r "$tree" "$fs/tree"
	umount "$fs"
	losetup -d "$dev"
	[ "$(td_status errors)" -eq 0 ]
	stop_tagdiskd
}

@test "uring: SIGTERM while the disk is being written drains it and exits 0" {
	start_tagdiskd --size 256M --workers 2
	dd if=/dev/urandom of="$TD_DIR/data" bs=1M count=32 status=none
	dd if="$TD_DIR/data" of="$TD_DISK" bs=1M oflag=direct conv=notrunc status=none &
	local writer=$!
	td_wait_until 60 test "$(td_stats writes 2>/dev/null || echo 0)" -gt 0
	stop_tagdiskd
	wait "$writer" || true # cut short by the unmount, or done
	grep -q 'stopped: queue drained' "$TD_LOG"
	td_not_mounted "$TD_MNT"
	# Every write the daemon acknowledged is in the image: whole MiBs from the start.
	local n
	n=$(python3 - "$TD_IMG" "$TD_DIR/data" <<'PY'
import sys
a, b = open(sys.argv[1], 'rb').read(32 << 20), open(sys.argv[2], 'rb').read()
n = 0
while n < 32 and a[n << 20:(n + 1) << 20] == b[n << 20:(n + 1) << 20]:
    n += 1
print(n)
PY
)
	echo "MiB intact from the start: $n" >&2
	[ "$n" -ge 1 ]
}

@test "uring: kill -9 while serving, then a restart serves every fsynced byte over the ring" {
	start_tagdiskd --size 64M
	head -c $((8 * 1024 * 1024)) /dev/urandom >"$TD_DIR/data"
	dd if="$TD_DIR/data" of="$TD_DISK" bs=1M oflag=direct conv=notrunc,fsync status=none
	# More I/O in flight when it dies.
	dd if=/dev/urandom of="$TD_DISK" bs=1M seek=16 count=16 oflag=direct conv=notrunc status=none &
	local writer=$!
	td_wait_until 60 test "$(td_stats writes 2>/dev/null || echo 0)" -gt 8
	td_kill9
	wait "$writer" || true
	start_tagdiskd
	[ "$(td_status transport)" = uring ]
	cmp -n $((8 * 1024 * 1024)) "$TD_DISK" "$TD_DIR/data"
	stop_tagdiskd
}
