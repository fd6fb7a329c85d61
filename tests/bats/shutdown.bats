#!/usr/bin/env bats
# Stopping: SIGTERM drains the queue and flushes within [drive]
# shutdown_timeout_ms, then fails what is left with EIO and exits 3 (data may
# be lost); a second SIGTERM or SIGINT while it waits stops at once (also 3).
# The mount is gone in every case. An idle disk still stops with 0.

load helpers
bats_require_minimum_version 1.5.0

setup_file() { requires_fuse || return 0; }
setup() {
	td_setup_dir
	TD_INI=$TD_DIR/td.ini
	READER_PID=
}
teardown() {
	td_teardown
	[ -z "$READER_PID" ] || { kill "$READER_PID" 2>/dev/null; wait "$READER_PID" 2>/dev/null; } || true
}

# hung_read: one O_DIRECT read that an injected hang holds; returns once the
# daemon shows it outstanding. Its result goes to $TD_DIR/reader.out.
hung_read() {
	[ "$(td_admin 'inject hang' | td_json ok)" = true ]
	td_dio read "$TD_DISK" 4096 0 >"$TD_DIR/reader.out" 2>&1 &
	READER_PID=$!
	td_wait_until 30 one_hung
}

one_hung() {
	[ "$(td_admin 'inject list' | td_json rules 0 fired)" -ge 1 ]
}

@test "an idle disk stops on SIGTERM with status 0" {
	start_tagdiskd --size 64M
	dd if=/dev/urandom of="$TD_DISK" bs=64k count=16 oflag=direct conv=notrunc status=none
	stop_tagdiskd
	grep -q 'stopped: queue drained, flushed, unmounted$' "$TD_LOG"
	td_not_mounted "$TD_MNT"
	run grep -E 'error|data may be lost' "$TD_LOG"
	[ "$status" -eq 1 ]
}

@test "a hung command: SIGTERM fails it with EIO after shutdown_timeout_ms, exits 3, unmounted" {
	printf '[drive]\ncommand_timeout_ms = 0\nshutdown_timeout_ms = 500\n' >"$TD_INI"
	start_tagdiskd --size 64M -c "$TD_INI"
	hung_read
	kill -TERM "$TD_PID"
	td_wait_exit 60
	cat "$TD_LOG" >&2
	[ "$TD_RC" -eq 3 ]
	grep -q 'stop: the queue did not drain within shutdown_timeout_ms (500 ms): 1 request failed with EIO$' \
		"$TD_LOG"
	grep -q 'stopped: queue drained by failing 1 request, image synced, unmounted; exit status 3: data may be lost$' \
		"$TD_LOG"
	td_not_mounted "$TD_MNT"
	[ ! -e "$TD_SOCK" ]
	# The reader got the error.
	wait "$READER_PID" || true
	READER_PID=
	cat "$TD_DIR/reader.out" >&2
	[ "$(cat "$TD_DIR/reader.out")" = "0 EIO" ]
}

@test "shutdown_timeout_ms = 0 waits for a hung command; a second SIGTERM or SIGINT stops at once" {
	local sig
	for sig in TERM INT; do
		printf '[drive]\ncommand_timeout_ms = 0\nshutdown_timeout_ms = 0\n' >"$TD_INI"
		start_tagdiskd --size 64M -c "$TD_INI"
		hung_read
		kill -TERM "$TD_PID"
		td_wait_until 30 grep -q 'signal: SIGTERM, stopping' "$TD_LOG"
		# Still waiting for the hung read, and still answering.
		[ "$(td_status state)" = running ]
		kill -0 "$TD_PID"
		kill "-$sig" "$TD_PID"
		td_wait_exit 60
		cat "$TD_LOG" >&2
		[ "$TD_RC" -eq 3 ]
		grep -q "signal: second SIG$sig: stopping now without draining (in flight 1, queued 0); data may be lost" \
			"$TD_LOG"
		grep -q 'stopped: abandoned, unmounted; exit status 3: data may be lost$' "$TD_LOG"
		td_not_mounted "$TD_MNT"
		[ ! -e "$TD_SOCK" ]
		# The reader is not left waiting on a dead mount.
		td_wait_until 60 reader_done
		READER_PID=
		rm -f "$TD_LOG"
	done
}

reader_done() {
	! kill -0 "$READER_PID" 2>/dev/null
}

@test "a volatile cache whose final flush cannot complete: exit 3, the lost bytes named" {
	printf '[drive]\nwrite_cache = volatile\ncommand_timeout_ms = 0\nshutdown_timeout_ms = 500\n' \
		>"$TD_INI"
	start_tagdiskd --size 64M -c "$TD_INI"
	# Completed into the cache, never flushed.
	dd if=/dev/urandom of="$TD_DISK" bs=64k count=4 oflag=direct conv=notrunc status=none
	# The next command, the final flush, hangs.
	[ "$(td_admin 'inject hang' | td_json ok)" = true ]
	kill -TERM "$TD_PID"
	td_wait_exit 60
	cat "$TD_LOG" >&2
	[ "$TD_RC" -eq 3 ]
	grep -q 'stop: the final flush did not complete within shutdown_timeout_ms (500 ms): failed with EIO' \
		"$TD_LOG"
	grep -q "stopped: queue drained, flush failed, unmounted, the volatile write cache lost 262144 bytes; exit status 3: data may be lost$" \
		"$TD_LOG"
	td_not_mounted "$TD_MNT"
}

@test "an unmount from outside during a hang: the first SIGTERM does not abandon, the second does" {
	printf '[drive]\ncommand_timeout_ms = 0\nshutdown_timeout_ms = 0\n' >"$TD_INI"
	start_tagdiskd --size 64M -c "$TD_INI"
	hung_read
	# A forced unmount aborts the FUSE connection (a lazy one would wait for the reader).
	umount -f "$TD_MNT" || true
	td_wait_until 30 grep -q "fuse: $TD_MNT was unmounted, stopping" "$TD_LOG"
	kill -TERM "$TD_PID"
	td_wait_until 30 grep -q 'signal: SIGTERM: already stopping' "$TD_LOG"
	kill -0 "$TD_PID"
	kill -TERM "$TD_PID"
	td_wait_exit 60
	[ "$TD_RC" -eq 3 ]
	grep -q 'signal: second SIGTERM: stopping now without draining' "$TD_LOG"
}
