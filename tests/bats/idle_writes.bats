#!/usr/bin/env bats
# Writes after idling: every acknowledged byte reads back, on every transport and mode.
#
# The daemon gives memory back when it idles (FUSE over io_uring: an idle ring thread returns
# the pages of its armed entries after TD_URING_IDLE_TRIM_S, 1 s). An armed entry may be filled
# by the kernel with a request at any instant, so a trim that discards its pages on the belief
# that it is empty turns an acknowledged write into zeros. The LD_PRELOAD shim
# tests/tools/slow_trim.c makes each memory-discarding call of the daemon (mmap MAP_FIXED,
# mremap, madvise DONTNEED/FREE/REMOVE) 20 ms slower, so requests do arrive while a trim runs;
# tests/tools/idle_probe.py dirties many buffers, idles 1 s, streams probes of 4 KiB to 1 MiB,
# idles once more for longer than every timer, and reads every probe back.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires python3 || return 0
	[ -f "$TD_BUILD/tests/libslowtrim.so" ] ||
		{ td_skip_file "the shim is not built ($TD_BUILD/tests/libslowtrim.so: make unit-tests)"; return 0; }
}
setup() { td_setup_dir; }
teardown() { td_teardown; }

# idle_case TRANSPORT MODE: serve with the shim, probe, compare, and show the shim was in play.
idle_case() {
	local transport=$1 mode=$2 rc calls trims=
	if [ "$transport" = uring ] && ! td_uring_available; then
		skip "this kernel has no FUSE over io_uring (fuse enable_uring)"
	fi
	# ASan wants its runtime first in the library list; the shim goes after it.
	TD_TRANSPORT=$transport TD_WRAPPER="env LD_PRELOAD=$TD_BUILD/tests/libslowtrim.so \
TD_SLOWTRIM_US=20000 TD_SLOWTRIM_COUNT=$TD_DIR/trims ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		start_tagdiskd --size 256M --mode "$mode"
	[ "$(td_status transport)" = "$transport" ]
	run timeout 600 python3 "$TD_ROOT/tests/tools/idle_probe.py" "$TD_DISK" 6 1.0 2.5
	rc=$status
	echo "$output"
	calls=$(stat -c %s "$TD_DIR/trims" 2>/dev/null || echo 0)
	if [ "$transport" = uring ]; then
		trims="; ring entries given back $(td_status uring_trims), of which"
		trims+=" $(td_status uring_trim_kept) held a request and were kept"
	fi
	echo "# $transport/$mode: ${output##*$'\n'}; $calls discards under the shim${trims:-}" >&3
	[ "$rc" -eq 0 ]
	[ "$(td_status errors)" -eq 0 ]
	# Over the ring, the rounds make the ring threads give memory back: the window was there.
	if [ "$transport" = uring ]; then
		[ "$calls" -gt 0 ]
		[ "$(td_status uring_trims)" -gt 0 ]
	fi
	stop_tagdiskd
}

@test "idle writes over uring, rq mode: every acknowledged byte reads back" { idle_case uring rq; }
@test "idle writes over uring, mq mode: every acknowledged byte reads back" { idle_case uring mq; }
@test "idle writes over uring, bio mode: every acknowledged byte reads back" { idle_case uring bio; }
@test "idle writes over classic, rq mode: every acknowledged byte reads back" { idle_case classic rq; }
@test "idle writes over classic, mq mode: every acknowledged byte reads back" { idle_case classic mq; }
@test "idle writes over classic, bio mode: every acknowledged byte reads back" { idle_case classic bio; }
