#!/usr/bin/env bats
# A medium that hangs must not freeze the control plane. The image lives on an ext4 file
# system of its own (a small image file in the test directory, on a loop device); fio writes
# and verifies (crc32c, verify_fatal) through a direct-I/O loop device on the disk file; then
# the image's file system is frozen with fsfreeze, so the daemon's pwrite (or, with a volatile
# write cache, the write-back of a flush) blocks in the kernel. While it is frozen:
#  - status answers promptly and lists the stuck call (thread, op, sector, age);
#  - reset answers within a few seconds (it used to wait for the call, for as long as the
#    freeze lasted, and so did every later status and timeout);
#  - the command timeouts keep firing and being counted (two distinct counts are seen), and
#    with max_retries high enough nothing fails with EIO.
# Then the file system is thawed and fio's verification must pass with no error. The answer
# times are printed, not asserted beyond a coarse bound. Teardown always thaws first.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires fio fsfreeze losetup mkfs.ext4 || return 0
}
setup() {
	td_setup_dir
	fusectl_mounted
	FS=$TD_DIR/fs
	FROZEN=
	FIO_PID=
}
teardown() {
	# Thaw first, whatever happened: a frozen file system would hold the daemon, fio and this
	# teardown in the kernel for good.
	[ -z "$FROZEN" ] || fsfreeze -u "$FS" 2>/dev/null || true
	if [ -n "$FIO_PID" ]; then
		kill "$FIO_PID" 2>/dev/null || true
		wait "$FIO_PID" 2>/dev/null || true
	fi
	td_teardown
}

# fusectl_mounted: the fusectl file system, through which status counts the requests waiting
# in the transport, is mounted: the system's, or one of this test's own.
fusectl_mounted() {
	awk '$3 == "fusectl" { found = 1 } END { exit !found }' /proc/mounts && return 0
	mkdir "$TD_DIR/fusectl"
	mount -t fusectl fusectl "$TD_DIR/fusectl"
}

# image_on_own_fs: a 256 MiB ext4 file system on a loop device over a file in the test
# directory, mounted at $FS; the daemon's image goes there (td_teardown unmounts and detaches).
image_on_own_fs() {
	local dev
	truncate -s 256M "$TD_DIR/fs.img"
	dev=$(losetup -f --show "$TD_DIR/fs.img")
	TD_LOOPS+=("$dev")
	mkfs.ext4 -q -F "$dev"
	mkdir "$FS"
	mount "$dev" "$FS"
	TD_IMG=$FS/disk.img
}

# fio_verify_bg ARGS...: 4 KiB random writes at QD 16 over 64 MiB of the loop device, each
# block verified (crc32c, a mismatch is fatal) within 256 writes and all at the end; in the
# background, JSON in $TD_DIR/fio.json. At most 2000 writes a second, so that the writes
# last 8 s at least, however fast the machine: the freeze must find fio still writing.
fio_verify_bg() {
	(cd "$TD_DIR" && exec fio --name=frozen --filename="$LOOP" --rw=randwrite --bs=4k \
		--iodepth=16 --ioengine=libaio --direct=1 --size=64M --rate_iops=2000 \
		--verify=crc32c --do_verify=1 --verify_fatal=1 --verify_backlog=256 \
		--randrepeat=0 "$@" --output-format=json --output="$TD_DIR/fio.json") &
	FIO_PID=$!
}

writes_at_least() {
	[ "$(td_stats writes)" -ge "$1" ]
}

no_stale_calls() {
	[ "$(td_status stale_calls)" -eq 0 ]
}

# stuck_call_listed: status lists at least one stuck call (prints what it saw).
stuck_call_listed() {
	td_admin status | python3 -c '
import json, sys
d = json.loads(sys.stdin.readline())
print("stale_calls %d, stuck_calls %s, timeouts %d, in flight %d, waiting in the transport %s"
      % (d["stale_calls"], d["stuck_calls"][:2], d["timeouts"], d["in_flight"],
         d["transport_waiting"]))
sys.exit(0 if d["stale_calls"] >= 1 and d["stuck_calls"] else 1)'
}

# command_older_than MS: the oldest outstanding tag is older than MS milliseconds.
command_older_than() {
	td_admin tags | python3 -c '
import json, sys
d = json.loads(sys.stdin.readline())
ages = [t["age_us"] for t in d["tags"]]
print("tags %d, oldest %d us" % (len(ages), max(ages, default=0)))
sys.exit(0 if max(ages, default=0) > int(sys.argv[1]) * 1000 else 1)' "$1"
}

timeouts_above() {
	[ "$(td_status timeouts)" -gt "$1" ]
}

# timed_ctl ARGS...: tagdiskctl ARGS (waiting up to 60 s for the reply) through bats' run; its
# time in CTL_S; fails, saying how long it waited, unless it answered.
timed_ctl() {
	local t0=$EPOCHREALTIME
	run timeout 90 "$TAGDISKCTL" -s "$TD_SOCK" -t 60 "$@"
	CTL_S=$(elapsed_since "$t0")
	if [ "$status" -ne 0 ]; then
		echo "tagdiskctl $* did not answer: exit status $status after $CTL_S s: $output" >&2
		return 1
	fi
}

# elapsed_since T0: seconds since $EPOCHREALTIME was T0, with 3 decimals.
elapsed_since() {
	awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'
}

# frozen_medium_case CONFIG FIO_ARGS...: the whole scenario, with [drive] CONFIG lines.
frozen_medium_case() {
	local config=$1 t0 status_s reset_s status2_s n1 n2 seen
	shift
	image_on_own_fs
	printf '[drive]\ncommand_timeout_ms = 1000\nmax_retries = 100\n%b' "$config" >"$TD_DIR/td.ini"
	start_tagdiskd -c "$TD_DIR/td.ini" --size 128M
	LOOP=$(td_losetup --direct-io=on)
	fio_verify_bg "$@"
	td_wait_for 300 "fio to have written 256 blocks" writes_at_least 256 >&2

	fsfreeze -f "$FS"
	FROZEN=1
	kill -0 "$FIO_PID" || { echo "fio ended before the freeze" >&2; return 1; }
	# A write (or a flush) reaches the frozen image and blocks.
	td_wait_for 120 "a command stuck for 800 ms while frozen" command_older_than 800 >&2

	# status answers at once; reset within a few seconds (it leaves the stuck call behind
	# instead of waiting for it), and status again after it.
	timed_ctl status
	status_s=$CTL_S
	timed_ctl reset
	reset_s=$CTL_S
	assert_output --regexp '^reset: [0-9]+ requests requeued$'
	timed_ctl status
	echo "# while frozen: status answered in $status_s s, reset in $reset_s s, status again in $CTL_S s" >&3
	awk -v s="$status_s" -v r="$reset_s" -v t="$CTL_S" 'BEGIN { exit !(s < 5 && r < 10 && t < 5) }'
	# It shows the stuck calls: thread, op, sector, age.
	assert_output --regexp 'stuck calls +[0-9]+, the drive is fenced: new commands wait'
	assert_output --regexp 'tid [0-9]+: (write|flush|read)(, sector [0-9]+ \([0-9]+ sectors\))?, for [0-9.]+ (us|ms|s)'
	seen=$(td_wait_for 60 "a stuck call in the JSON status" stuck_call_listed)
	echo "# frozen: $seen" >&3

	# The timeouts keep firing and being counted.
	td_wait_for 120 "a command timeout while frozen" timeouts_above 0 >&2
	n1=$(td_status timeouts)
	td_wait_for 120 "a timeout after the ${n1} seen" timeouts_above "$n1" >&2
	n2=$(td_status timeouts)
	echo "# timeouts while frozen: $n1, then $n2" >&3
	[ "$(td_status errors)" -eq 0 ]
	[ "$(td_status stale_calls)" -ge 1 ]

	fsfreeze -u "$FS"
	FROZEN=
	local rc=0
	wait "$FIO_PID" || rc=$?
	FIO_PID=
	[ "$rc" -eq 0 ]
	python3 - "$TD_DIR/fio.json" >&3 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
w, r = j["write"]["total_ios"], j["read"]["total_ios"]
print("# fio: %d writes, %d verified, error %d" % (w, r, j["error"]))
assert j["error"] == 0, j["error"]
assert w == 16384, w
assert r == w, (w, r)
PY
	# The stale calls returned and nothing failed.
	td_wait_until 120 no_stale_calls
	[ "$(td_status errors)" -eq 0 ]
	[ "$(td_stats retries_exhausted)" -eq 0 ]
	run -0 td_ctl status
	refute_output --partial 'stuck calls'
	losetup -d "$LOOP"
	stop_tagdiskd
}

@test "a frozen image file system: status and reset answer, timeouts go on, fio verifies after the thaw" {
	frozen_medium_case ''
}

@test "write_cache = volatile: a flush stuck in the write-back freezes nothing either" {
	frozen_medium_case 'write_cache = volatile\n' --fsync=64
}
