#!/usr/bin/env bats
# The nbd backend when its server stays away past the backend's default bounds (60 s each,
# TD_NBD_ANSWER_LIMIT_MS and TD_NBD_LOST_LIMIT_MS in src/engine/drive_nbd_int.h): the
# connection to a server stopped with SIGSTOP is drained after 60 s without an answer, and
# the write in flight, never sent again, completes once the server resumes and answers it; a
# server gone for more than 60 s fails the waiting write with EIO and the next one at once,
# and writes work again once it is back. Kept out of `make check` (tests/bats/*.bats) for
# its time: about three minutes of waiting. (nbd.bats reaches the same paths in seconds
# through TAGDISK_NBD_ANSWER_LIMIT_MS.)

TD_BUILD=${TD_BUILD:-$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)/build}
load ../helpers
load ../nbd_helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	command -v nbdkit >/dev/null || { td_skip_file "NBD: nbdkit is not installed (tests/deps.sh)"; return 0; }
	requires cmp || return 0
}
setup() {
	td_setup_dir
	nbd_setup
}
teardown() {
	# A stopped server would hold the daemon's last flush until its bounds.
	[ -z "${NBD_PID:-}" ] || kill -CONT "$NBD_PID" 2>/dev/null || true
	nbd_teardown
}

# write_ok OFFSET: one 4 KiB O_DIRECT write at OFFSET of the disk file succeeds.
write_ok() {
	[ "$(td_dio write "$TD_DISK" 4096 "$1")" = "$1 ok" ]
}

@test "nbdkit stopped with SIGSTOP under a write: drained after 60 s without an answer, the write completes once it resumes" {
	local dd_pid
	start_nbdkit
	start_nbd_daemon 1
	head -c 4096 /dev/urandom >"$TD_DIR/block"
	kill -STOP "$NBD_PID"
	dd if="$TD_DIR/block" of="$TD_DISK" bs=4k seek=3 count=1 oflag=direct conv=notrunc \
		2>"$TD_DIR/dd.err" 3>&- &
	dd_pid=$!
	BG_PIDS="$BG_PIDS $dd_pid"
	td_wait_for 180 "the backend to give up on the stopped server" \
		grep -q 'no answer for 60 s; draining it: 1 command' "$TD_LOG"
	kill -CONT "$NBD_PID"
	wait "$dd_pid"
	# Answered on the drained connection: nothing was sent again.
	grep 'drained after .* every command has its answer' "$TD_LOG" >&2
	td_wait_for 60 "the connection to be back" grep -q 'back after' "$TD_LOG"
	cmp "$TD_DIR/block" <(dd if="$NBD_IMG" bs=4k skip=3 count=1 status=none)
	[ "$(td_status errors)" -eq 0 ]
	stop_tagdiskd
}

@test "nbdkit gone for more than 60 s: the waiting write fails with EIO, the next at once, writes work again once it is back" {
	local start
	start_nbdkit
	start_nbd_daemon 1
	stop_nbdkit KILL
	run td_dio write "$TD_DISK" 4096 0
	[ "$output" = "0 EIO" ]
	grep 'unreachable for 60 s' "$TD_LOG" >&2
	# Fails fast: well before the drive's 30 s command timeout could have been involved.
	start=$EPOCHSECONDS
	run td_dio write "$TD_DISK" 4096 8192
	[ "$output" = "8192 EIO" ]
	[ $((EPOCHSECONDS - start)) -lt 20 ]
	start_nbdkit
	td_wait_for 60 "writes to go through again" write_ok 16384
	stop_tagdiskd
}
