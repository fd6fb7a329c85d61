#!/usr/bin/env bats
# fio writes and verifies while the drive is reset over and over, the elevator and the
# tag depth change under it, and hangs are recovered by a short command timeout. The
# data must verify and no request may fail. Written for the sanitizer builds (make tsan
# runs it, and make asan): it drives the reset, requeue and completion paths from many
# threads at once. Kept out of `make check` (tests/bats/*.bats) only for its time under
# TSan; on a plain build it takes about half a minute.

TD_BUILD=${TD_BUILD:-$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)/build}
load ../helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires fio losetup mkfs.ext4 e2fsck || return 0
}

setup() {
	td_setup_dir
	# Sanitized daemons start slower.
	TD_START_TIMEOUT=60
}

teardown() {
	[ -n "${CHAOS:-}" ] && kill "$CHAOS" 2>/dev/null
	td_teardown
}

# chaos_start: resets every 20-100 ms, with elevator switches, depth changes and an
# occasional injected hang, in the background until chaos_stop.
chaos_start() {
	(
		i=0
		while :; do
			i=$((i + 1))
			td_ctl reset >/dev/null || exit 1
			case $((i % 7)) in
			1) td_ctl elevator noop >/dev/null ;;
			2) td_ctl depth 2 >/dev/null ;;
			3) td_ctl elevator deadline >/dev/null ;;
			4) td_ctl depth 64 >/dev/null ;;
			5) td_ctl inject hang times=1 >/dev/null ;;
			6) td_ctl depth 32 >/dev/null ;;
			esac
			sleep "0.0$((RANDOM % 8 + 2))"
		done
	) &
	CHAOS=$!
}

chaos_stop() {
	kill "$CHAOS"
	wait "$CHAOS" 2>/dev/null || true
	CHAOS=
	td_ctl inject clear >/dev/null
}

fio_verify() { # target size [fio options]
	local target=$1 size=$2
	shift 2
	run --separate-stderr timeout 900 fio --name=resets --filename="$target" --size="$size" \
		--direct=1 --ioengine=libaio --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--verify_state_save=0 --randrepeat=0 --output-format=terse "$@"
	echo "fio status $status: $stderr" >&2
	[ "$status" -eq 0 ]
}

# until_resets N COMMAND...: run COMMAND, again while the daemon has counted N resets or
# fewer (at most 30 times): however fast the disk is, the workload sees more than N resets.
until_resets() {
	local n=$1 i
	shift
	for ((i = 0; i < 30; i++)); do
		"$@" || return 1
		[ "$(td_stats resets)" -le "$n" ] || return 0
	done
}

# After the run: resets happened, nothing failed, nothing is left outstanding.
check_after() {
	local resets errors exhausted
	resets=$(td_stats resets)
	errors=$(td_stats errors)
	exhausted=$(td_stats retries_exhausted)
	echo "resets $resets, timeouts $(td_stats timeouts), requeued $(td_stats requeued), errors $errors" >&2
	[ "$resets" -gt 10 ]
	[ "$errors" -eq 0 ]
	[ "$exhausted" -eq 0 ]
	[ "$(td_admin tags | td_json in_use)" -eq 0 ]
}

config() { # extra [drive] lines
	printf '[drive]\ncommand_timeout_ms = 300\nmax_retries = 100\n%s\n' "${1:-}" >"$TD_DIR/resets.ini"
}

@test "fio verify (4k random QD32, 1M sequential) on the disk file while the drive is reset every few ms: data intact, no request failed" {
	config
	start_tagdiskd -c "$TD_DIR/resets.ini" --size 128M --mode rq
	chaos_start
	until_resets 10 fio_verify "$TD_DISK" 16M --rw=randwrite --bs=4k --iodepth=32
	fio_verify "$TD_DISK" 32M --rw=write --bs=1M --iodepth=8 --offset=64M
	chaos_stop
	check_after
	stop_tagdiskd
}

@test "the same with the ssd model, so resets catch commands waiting out their latency" {
	config 'model = ssd
ssd_latency_us = 300'
	start_tagdiskd -c "$TD_DIR/resets.ini" --size 128M --mode rq
	chaos_start
	until_resets 10 fio_verify "$TD_DISK" 8M --rw=randwrite --bs=4k --iodepth=32
	fio_verify "$TD_DISK" 8M --rw=randwrite --bs=64k --iodepth=8 --numjobs=2 --offset_increment=32M
	chaos_stop
	check_after
	stop_tagdiskd
}

@test "ext4 on a direct-I/O loop device while the drive is reset: fio verify inside, e2fsck clean" {
	config
	start_tagdiskd -c "$TD_DIR/resets.ini" --size 128M --mode rq
	local dev fs=$TD_DIR/fs
	dev=$(td_losetup --direct-io=on)
	mkfs.ext4 -q -F "$dev"
	mkdir "$fs"
	mount "$dev" "$fs"
	chaos_start
	until_resets 10 fio_verify "$fs/f" 16M --rw=randwrite --bs=4k --iodepth=16 --fsync=32
	chaos_stop
	umount "$fs"
	run e2fsck -fn "$dev"
	echo "$output" >&2
	[ "$status" -eq 0 ]
	losetup -d "$dev"
	check_after
	stop_tagdiskd
}
