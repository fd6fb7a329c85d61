#!/usr/bin/env bats
# tagdiskd under valgrind memcheck while it serves real traffic (rq, bio and mq modes):
# ext4 on a direct-I/O loop device, fio verify, resets, elevator and depth changes,
# injected errors, a hang recovered by the command timeout, garbage on the admin socket,
# a trace stream, SIGHUP, then SIGTERM. Memcheck must report 0 errors and nothing
# definitely lost, both in its exit status (99 on errors) and in its log.
#
# Run by `make check-valgrind` (tests/run-tests.sh BUILD valgrind); too slow for
# `make check`, which runs only tests/bats/*.bats (bats does not descend into slow/).

TD_BUILD=${TD_BUILD:-$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)/build}
# Always the classic transport: memcheck (3.19) keeps its one-thread-at-a-time lock while
# a ring thread waits in io_uring_enter(2), so no other thread of the daemon ever runs
# again and the mount hangs. The rings themselves are checked by make asan and make tsan
# with TD_TRANSPORT=uring.
TD_TRANSPORT=classic
load ../helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires valgrind fio losetup mkfs.ext4 e2fsck || return 0
}

setup() {
	td_setup_dir
	VG_LOG=$TD_DIR/valgrind.log
	TD_WRAPPER="valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite"
	TD_WRAPPER+=" --show-leak-kinds=definite --track-origins=no --log-file=$VG_LOG"
	# Memcheck runs the daemon some 20-50 times slower; mostly it is waiting for I/O.
	TD_START_TIMEOUT=120
	# A long command timeout: no reset should come from slowness alone.
	printf '[drive]\ncommand_timeout_ms = %d\nmax_retries = 50\n' 3000 >"$TD_DIR/vg.ini"
}

teardown() {
	[ -n "${CHAOS:-}" ] && kill "$CHAOS" 2>/dev/null
	td_teardown
}

# The daemon has exited: memcheck's log says 0 errors and nothing definitely lost.
valgrind_clean() {
	# One TAP comment line with memcheck's verdict, shown whether the test passes or not.
	echo "# memcheck: $(grep -E 'ERROR SUMMARY|definitely lost|in use at exit' "$VG_LOG" |
		sed 's/^==[0-9]*== *//; s/ (suppressed.*//' | paste -sd ';' -)" >&3
	if ! grep -q 'ERROR SUMMARY: 0 errors from 0 contexts' "$VG_LOG" ||
		grep -qE 'definitely lost: [1-9]' "$VG_LOG"; then
		cat "$VG_LOG" >&2
		return 1
	fi
}

timeouts_above() { # N
	[ "$(td_stats timeouts)" -gt "$1" ]
}

resets_above() { # N
	[ "$(td_status resets)" -gt "$1" ]
}

# In the background until stop_chaos (or teardown): reset the drive, switch to elevator A
# and depth 3, then to elevator B and depth 32, a switch every 0.2 s or so.
start_chaos() { # A B
	(
		while :; do
			td_ctl reset >/dev/null
			td_ctl elevator "$1" >/dev/null
			td_ctl depth 3 >/dev/null
			sleep 0.2
			td_ctl elevator "$2" >/dev/null
			td_ctl depth 32 >/dev/null
			sleep 0.2
		done
	) &
	CHAOS=$!
}

stop_chaos() {
	kill "$CHAOS"
	wait "$CHAOS" || true
	CHAOS=
}

# fio verify on a file or device: 8 MiB of 4 KiB random writes at QD8, all read back.
fio_verify() { # target [fio options]
	local target=$1
	shift
	run --separate-stderr timeout 600 fio --name=vg --rw=randwrite --bs=4k --size=8M \
		--ioengine=libaio --iodepth=8 --direct=1 --verify=crc32c --do_verify=1 \
		--verify_fatal=1 --verify_state_save=0 --randrepeat=0 --output-format=terse \
		"$@" --filename="$target"
	echo "fio status $status: $stderr" >&2
	[ "$status" -eq 0 ]
}

@test "memcheck, rq mode: ext4 on a loop device, fio verify under resets and switches, faults, garbage, trace, SIGHUP, SIGTERM: 0 errors, nothing definitely lost" {
	start_tagdiskd -c "$TD_DIR/vg.ini" --size 128M --mode rq --elevator deadline
	local dev fs=$TD_DIR/fs
	dev=$(td_losetup --direct-io=on)
	# ext4 on the first 96 MiB; faults go to [100, 128) MiB, which it does not cover.
	mkfs.ext4 -q -F "$dev" 96M
	mkdir "$fs"
	mount "$dev" "$fs"
	cp -a /usr/include/linux "$fs/tree"
	sync -f "$fs"

	# Resets, elevator switches and depth changes while fio writes and verifies.
	start_chaos noop deadline
	fio_verify "$fs/fio.dat"
	stop_chaos
	[ "$(td_status resets)" -gt 0 ]

	# An injected read error: EIO for the reader, then gone after clear.
	local off=$((100 * 1024 * 1024))
	td_ctl inject error op=read sector=$((off / 512)) count=8 >/dev/null
	[ "$(td_dio read "$TD_DISK" 4096 "$off")" = "$off EIO" ]
	[ "$(td_admin 'inject list' | td_json rules 0 fired)" -eq 1 ]
	td_ctl inject clear >/dev/null
	[ "$(td_dio read "$TD_DISK" 4096 "$off")" = "$off ok" ]

	# A hang: the command timeout resets the drive and the read completes. The held
	# command may also be one of ext4's (its lazy inode table init writes in the background).
	local timeouts
	timeouts=$(td_stats timeouts)
	td_ctl inject hang times=1 >/dev/null
	[ "$(td_dio read "$TD_DISK" 4096 "$off")" = "$off ok" ]
	td_wait_until 60 timeouts_above "$timeouts"

	# Latency, and a trace stream read for a moment: until it shows a completion (writes
	# before the stream started go unseen: write again), then Ctrl-C.
	td_ctl inject latency 2000 >/dev/null
	"$TAGDISKCTL" -s "$TD_SOCK" trace >"$TD_DIR/trace" &
	local tracer=$!
	td_wait_for 300 "a C event in the trace" eval \
		'td_dio write "$TD_DISK" 65536 "$off" $((off + 65536)) >/dev/null; grep -q " C " "$TD_DIR/trace"'
	kill -INT "$tracer"
	wait "$tracer"
	td_ctl inject latency 0 >/dev/null

	# Garbage on the admin socket: each line answered, the daemon keeps serving.
	{
		head -c 10000 /dev/zero | tr '\0' x
		printf '\nstatus \xff\xfe\nsta\x00tus\ndepth x\ninject error op=bogus\nstatus\n'
	} | td_admin_lines 6 >"$TD_DIR/replies"
	[ "$(grep -c '"ok":false' "$TD_DIR/replies")" -eq 5 ]
	[ "$(tail -n 1 "$TD_DIR/replies" | td_json ok)" = true ]
	printf 'stat' | python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.stdin.buffer.read())
' "$TD_SOCK"

	kill -HUP "$TD_PID"
	td_wait_until 60 grep -q 'reload' "$TD_LOG"

	umount "$fs"
	run e2fsck -fn "$dev"
	echo "$output" >&2
	[ "$status" -eq 0 ]
	losetup -d "$dev"
	[ "$(td_stats retries_exhausted)" -eq 0 ]
	stop_tagdiskd
	valgrind_clean
}

@test "memcheck, bio mode: fio verify on the disk file and on a loop device, SIGTERM: 0 errors, nothing definitely lost" {
	start_tagdiskd --size 64M --mode bio
	fio_verify "$TD_DISK"
	local dev
	dev=$(td_losetup --direct-io=on)
	fio_verify "$dev" --offset=16M
	losetup -d "$dev"
	stop_tagdiskd
	valgrind_clean
}

@test "memcheck, mq mode: fio verify on the disk file and on a loop device under resets, scheduler and depth switches, SIGTERM: 0 errors, nothing definitely lost" {
	start_tagdiskd -c "$TD_DIR/vg.ini" --size 64M --mode mq --elevator mq-deadline
	start_chaos none mq-deadline
	fio_verify "$TD_DISK"
	local dev
	dev=$(td_losetup --direct-io=on)
	fio_verify "$dev" --offset=16M
	td_wait_until 60 resets_above 0
	stop_chaos
	losetup -d "$dev"
	[ "$(td_stats retries_exhausted)" -eq 0 ]
	stop_tagdiskd
	valgrind_clean
}

@test "memcheck, volatile write cache: writes, a flush, powerfail keep=50, SIGTERM: 0 errors, nothing definitely lost" {
	printf '[drive]\nwrite_cache = volatile\ncache_size = 8M\n' >"$TD_DIR/vol.ini"
	start_tagdiskd -c "$TD_DIR/vol.ini" --size 64M --mode rq
	fio_verify "$TD_DISK"
	td_dio write "$TD_DISK" 65536 0 65536 131072 >/dev/null
	[ "$(td_admin 'powerfail keep=50 seed=3' | td_json ok)" = true ]
	fio_verify "$TD_DISK" --offset=32M --fsync=16
	stop_tagdiskd
	valgrind_clean
}

@test "memcheck: a bad configuration value exits 2 with nothing definitely lost" {
	run_tagdiskd --image "$TD_IMG" --size 64M --mount "$TD_MNT" --socket "$TD_SOCK" --depth 0
	echo "status $status: $stderr" >&2
	[ "$status" -eq 2 ]
	valgrind_clean
}
