#!/usr/bin/env bats
# make run: the quick start. It serves a 1 GiB sparse image at mnt/disk in the foreground,
# says how to reach it, and stops cleanly on Ctrl-C.
#
# RUN_DIR puts the image, the mount point and the socket in this test's directory instead
# of the source tree, and BUILD reuses the binaries already built, so nothing is rebuilt.
# make runs in a session of its own, so "Ctrl-C" is SIGINT to its whole process group,
# as a terminal sends it.

load helpers
bats_require_minimum_version 1.5.0

setup_file() { requires_fuse || return 0; }

setup() {
	td_setup_dir
	rmdir "$TD_MNT" # make run creates it
	TD_IMG=$TD_DIR/tagdisk.img
	TD_SOCK=$TD_DIR/tagdisk.sock
	RUN_LOG=$TD_DIR/run.log
	MAKE_PID=
	[ -e "$TD_ROOT/tagdisk.img" ] && ROOT_IMG_BEFORE=1 || ROOT_IMG_BEFORE=0
}

teardown() {
	if [ -n "$MAKE_PID" ]; then
		kill -TERM -- "-$MAKE_PID" 2>/dev/null || true
		wait "$MAKE_PID" 2>/dev/null || true
	fi
	td_teardown
}

# Start `make run` in its own session and wait for the disk; TD_PID becomes the daemon.
start_make_run() {
	# Not a sub-make of `make check`: none of its flags or jobserver.
	setsid env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS \
		make --no-print-directory -C "$TD_ROOT" BUILD="$TD_BUILD" RUN_DIR="$TD_DIR" run \
		>"$RUN_LOG" 2>&1 </dev/null &
	MAKE_PID=$!
	# Generous: make checks (and may build) everything before it starts the daemon.
	local end=$((EPOCHSECONDS + 300))
	while [ "$EPOCHSECONDS" -le "$end" ]; do
		if [ -S "$TD_SOCK" ] && [ -f "$TD_DISK" ] && td_is_mounted "$TD_MNT" &&
			TD_PID=$(td_status pid 2>/dev/null); then
			return 0
		fi
		kill -0 "$MAKE_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "make run did not bring the disk up:" >&2
	cat "$RUN_LOG" >&2
	return 1
}

# wait_make SECS: wait (at most SECS) for make to end; its exit status in MAKE_RC.
wait_make() {
	local end=$((EPOCHSECONDS + $1))
	while [ "$EPOCHSECONDS" -le "$end" ]; do
		kill -0 "$MAKE_PID" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$MAKE_PID" 2>/dev/null; then
		echo "make run ($MAKE_PID) still running after $1 s:" >&2
		cat "$RUN_LOG" >&2
		return 1
	fi
	MAKE_RC=0
	wait "$MAKE_PID" || MAKE_RC=$?
	MAKE_PID=
	TD_PID=
}

@test "make run serves a 1 GiB sparse image at RUN_DIR/mnt/disk and says how to reach it" {
	start_make_run
	[ "$(stat -c %s "$TD_IMG")" -eq $((1 << 30)) ]
	[ "$(stat -c %s "$TD_DISK")" -eq $((1 << 30)) ]
	# Sparse: nothing allocated yet beyond a few blocks.
	[ "$(stat -c %b "$TD_IMG")" -lt 2048 ]
	grep -qxF "  as a block device:  sudo losetup --direct-io=on -f --show $TD_MNT/disk" "$RUN_LOG"
	grep -qF "  watch the queue:    $TD_BUILD/tagdiskctl -s $TD_SOCK status" "$RUN_LOG"
	# Nothing went to the source tree.
	[ "$ROOT_IMG_BEFORE" -eq 1 ] || [ ! -e "$TD_ROOT/tagdisk.img" ]
}

@test "the disk of make run reads back what was written, and tagdiskctl status shows it" {
	start_make_run
	head -c $((4 << 20)) /dev/urandom >"$TD_DIR/data"
	dd if="$TD_DIR/data" of="$TD_DISK" bs=1M seek=100 oflag=direct conv=notrunc status=none
	dd if="$TD_DISK" of="$TD_DIR/back" bs=1M skip=100 count=4 iflag=direct status=none
	cmp "$TD_DIR/data" "$TD_DIR/back"
	# What the banner told us to run.
	run -0 "$TD_BUILD/tagdiskctl" -s "$TD_SOCK" status
	[[ $output == *"image       $TD_IMG"* ]]
	[[ $output == *"size        1.0 GiB (1073741824 bytes)"* ]]
	[[ $output == *"mode        rq"* ]]
	[ "$(td_status depth)" -eq 32 ]
}

@test "Ctrl-C stops make run cleanly: drained, flushed, unmounted, and the data is in the image" {
	start_make_run
	head -c $((1 << 20)) /dev/urandom >"$TD_DIR/data"
	dd if="$TD_DIR/data" of="$TD_DISK" bs=1M seek=7 oflag=direct conv=notrunc status=none
	kill -INT -- "-$MAKE_PID"
	wait_make 60
	# make dies of the SIGINT it got too (130); it reports no failed recipe, so the daemon
	# it ran exited 0.
	[ "$MAKE_RC" -eq 130 ] || [ "$MAKE_RC" -eq 0 ]
	run -1 grep -E '\*\*\* .*(Error|Interrupt)' "$RUN_LOG"
	grep -qF "tagdiskd: notice: signal: SIGINT, stopping" "$RUN_LOG"
	grep -qF "tagdiskd: notice: stopped: queue drained, flushed, unmounted" "$RUN_LOG"
	td_not_mounted "$TD_MNT"
	[ ! -e "$TD_SOCK" ]
	dd if="$TD_IMG" of="$TD_DIR/back" bs=1M skip=7 count=1 status=none
	cmp "$TD_DIR/data" "$TD_DIR/back"
}

@test "SIGINT to the daemon alone ends make run with status 0" {
	start_make_run
	kill -INT "$TD_PID"
	wait_make 60
	[ "$MAKE_RC" -eq 0 ]
	td_not_mounted "$TD_MNT"
}

@test "make run serves an existing image again, as it is" {
	start_make_run
	printf 'tagdisk' | dd of="$TD_DISK" bs=512 seek=3 oflag=direct conv=notrunc,sync status=none
	kill -INT "$TD_PID"
	wait_make 60
	[ "$MAKE_RC" -eq 0 ]
	start_make_run
	[ "$(dd if="$TD_DISK" bs=512 skip=3 count=1 iflag=direct status=none | head -c 7)" = tagdisk ]
	kill -INT "$TD_PID"
	wait_make 60
	[ "$MAKE_RC" -eq 0 ]
}

# Success when an access to @1 fails with ENOTCONN, as on a FUSE mount whose daemon died.
dead_mount() {
	timeout 10 ls "$1" 2>&1 | grep -F "Transport endpoint is not connected"
}

@test "after a SIGKILL left a dead mount, make run detaches it and serves again" {
	start_make_run
	kill -KILL "$TD_PID"
	wait_make 60
	# Over io_uring the first access can fail with ECONNABORTED instead (the
	# connection is aborted as the rings close); from then on it is ENOTCONN.
	td_wait_for 60 "the dead mount to say ENOTCONN" dead_mount "$TD_MNT"
	start_make_run
	grep -qxF "run: detaching the dead mount left on $TD_MNT" "$RUN_LOG"
	[ "$(stat -c %s "$TD_DISK")" -eq $((1 << 30)) ]
	kill -INT "$TD_PID"
	wait_make 60
	[ "$MAKE_RC" -eq 0 ]
	td_not_mounted "$TD_MNT"
}
