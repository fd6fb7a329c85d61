# shellcheck shell=bash
# Helpers for tagdisk's integration tests: real FUSE, real loop devices, real tools.
#
# Each test gets its own directory ($TD_DIR) holding the image, the mount point
# and the admin socket; teardown always stops the daemon, detaches loop devices
# and unmounts, whatever the test did.
#
#   requires_fuse          skip (one reason) without /dev/fuse or root
#   requires CMD...        skip when a command is missing
#   start_tagdiskd ARGS    start the daemon in the foreground (background job),
#                          wait until the disk file and the socket are up
#   stop_tagdiskd          SIGTERM and wait; fails if the exit status is not 0
#   td_ctl ARGS            tagdiskctl against this test's socket
#   td_admin LINE          send one raw line to the socket, print the reply line
#   td_elv_name NAME       the elevator name status shows for NAME in the mode under test
#   reset_loop             tagdiskctl reset every 100-200 ms until $TD_DIR/stop exists (background)

load /usr/lib/bats/bats-support/load
load /usr/lib/bats/bats-assert/load

TD_ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
TD_BUILD=${TD_BUILD:-$TD_ROOT/build}
TAGDISKD=$TD_BUILD/tagdiskd
TAGDISKCTL=$TD_BUILD/tagdiskctl
# Set to run the daemon under a tool, e.g. "valgrind --error-exitcode=99 ...".
TD_WRAPPER=${TD_WRAPPER:-}
# The FUSE transport start_tagdiskd asks for (--transport): classic unless set; "uring" runs a
# file over FUSE io_uring (tests/run-tests.sh does so for the files both transports must pass),
# and an empty value passes nothing (the daemon's default, auto).
TD_TRANSPORT=${TD_TRANSPORT-classic}
# The queue mode under test: unset or empty, each test's own (rq unless it asks); "mq" makes
# start_tagdiskd run in mq mode every test that asks for rq or names no mode (tests/run-tests.sh
# reruns the reset, timeout, requeue, depth, elevator and fio-verify tests so). A test that asks
# for bio keeps it (and --mode beats a config file's [queue] mode).
TD_MODE=${TD_MODE-}
# Seconds to wait for the daemon to come up: generous, for sanitizer and valgrind builds and
# busy machines; it costs nothing when the daemon is quick.
TD_START_TIMEOUT=${TD_START_TIMEOUT:-60}

# Skipping: bats 1.8 cannot skip from setup_file, so there td_skip_file records
# the reason (the first one wins); setup_file then returns early
# ("requires_fuse || return 0", "... || { td_skip_file REASON; return 0; }"), and
# td_check_skip (called by td_setup_dir) skips each test with that one reason.
# In a test or setup() they skip at once.
td_skip_file() {
	if [ -z "${BATS_TEST_NAME:-}" ]; then
		export TD_SKIP_REASON="${TD_SKIP_REASON:-$1}"
		return 0
	fi
	skip "$1"
}

td_check_skip() {
	[ -z "${TD_SKIP_REASON:-}" ] || skip "$TD_SKIP_REASON"
}

requires_fuse() {
	[ "$(id -u)" -eq 0 ] || { td_skip_file "needs root (mounts FUSE and uses loop devices)"; return 1; }
	[ -c /dev/fuse ] || { td_skip_file "no /dev/fuse on this machine"; return 1; }
	[ -x "$TAGDISKD" ] || { td_skip_file "tagdiskd is not built ($TAGDISKD)"; return 1; }
	if [ "$TD_TRANSPORT" = uring ] && ! td_uring_available; then
		td_skip_file "TD_TRANSPORT=uring: this kernel has no FUSE over io_uring (fuse enable_uring)"
		return 1
	fi
}

# td_uring_available: the fuse module offers FUSE over io_uring, or we can switch it on.
td_uring_available() {
	local p=/sys/module/fuse/parameters/enable_uring
	[ -e "$p" ] || return 1
	[ "$(cat "$p")" = Y ] || [ -w "$p" ]
}

requires() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || { td_skip_file "$c is not installed"; return 1; }
	done
}

# requires_backend rbd|nbd: skip unless this tagdiskd has the backend (make WITH_RBD=0 and
# WITH_NBD=0 build without them; tagdiskd --version lists those it has).
requires_backend() {
	"$TAGDISKD" --version | grep -qE "backends: .*\<$1\>" ||
		{ td_skip_file "${1^^}: this tagdiskd is built without the $1 backend (make WITH_${1^^}=0)"; return 1; }
}

td_setup_dir() {
	td_check_skip
	TD_DIR=$(mktemp -d "${BATS_TMPDIR:-/tmp}/tagdisk.XXXXXX")
	mkdir -p "$TD_DIR/mnt"
	TD_IMG=$TD_DIR/disk.img
	TD_MNT=$TD_DIR/mnt
	TD_DISK=$TD_MNT/disk
	TD_SOCK=$TD_DIR/admin.sock
	TD_LOG=$TD_DIR/tagdiskd.log
	TD_PID=
	TD_LOOPS=()
	export TD_DIR TD_IMG TD_MNT TD_DISK TD_SOCK TD_LOG
}

# td_mode_args ARGS...: ARGS with TD_MODE applied (see TD_MODE above), in the array TD_ARGS.
td_mode_args() {
	local a prev= named=0
	TD_ARGS=()
	for a in "$@"; do
		if [ "$prev" = --mode ]; then
			named=1
			[ -n "$TD_MODE" ] && [ "$a" = rq ] && a=$TD_MODE
		fi
		TD_ARGS+=("$a")
		prev=$a
	done
	if [ -n "$TD_MODE" ] && [ "$named" -eq 0 ]; then
		TD_ARGS+=(--mode "$TD_MODE")
	fi
}

# td_elv_name NAME: what status calls elevator NAME under TD_MODE (mq maps noop to none and
# deadline to mq-deadline).
td_elv_name() {
	case "${TD_MODE:-rq}:$1" in
	mq:noop) echo none ;;
	mq:deadline) echo mq-deadline ;;
	*) echo "$1" ;;
	esac
}

# start_tagdiskd [--size SIZE | other options...]: image, mount and socket are this test's
# (no --image when TD_IMG is empty: with backend = rbd or nbd the config names the image).
start_tagdiskd() {
	td_mode_args "$@"
	# shellcheck disable=SC2086
	$TD_WRAPPER "$TAGDISKD" -f ${TD_IMG:+--image "$TD_IMG"} --mount "$TD_MNT" --socket "$TD_SOCK" \
		${TD_TRANSPORT:+--transport "$TD_TRANSPORT"} "${TD_ARGS[@]}" >"$TD_LOG" 2>&1 &
	TD_PID=$!
	local end=$((EPOCHSECONDS + TD_START_TIMEOUT))
	while [ "$EPOCHSECONDS" -le "$end" ]; do
		if [ -S "$TD_SOCK" ] && [ -f "$TD_DISK" ] && mountpoint -q "$TD_MNT"; then
			td_check_transport
			return
		fi
		if ! kill -0 "$TD_PID" 2>/dev/null; then
			echo "tagdiskd exited early:" >&2
			cat "$TD_LOG" >&2
			TD_PID=
			return 1
		fi
		sleep 0.05
	done
	echo "tagdiskd did not come up in ${TD_START_TIMEOUT}s:" >&2
	cat "$TD_LOG" >&2
	return 1
}

# td_check_transport: under TD_TRANSPORT=uring the daemon really serves over the ring (a
# daemon that fell back to /dev/fuse would pass every test of the uring pass without it).
td_check_transport() {
	[ "$TD_TRANSPORT" = uring ] || return 0
	local t
	t=$(td_status transport) || return 1
	if [ "$t" != uring ]; then
		echo "TD_TRANSPORT=uring, but the daemon serves over '$t':" >&2
		cat "$TD_LOG" >&2
		return 1
	fi
}

# stop_tagdiskd: SIGTERM, wait (up to 120 s), and fail unless it exited 0.
stop_tagdiskd() {
	[ -n "$TD_PID" ] || return 0
	local pid=$TD_PID rc
	kill -TERM "$pid" 2>/dev/null || true
	local end=$((EPOCHSECONDS + 120))
	while [ "$EPOCHSECONDS" -le "$end" ]; do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	rc=0
	wait "$pid" || rc=$?
	TD_PID=
	if [ "$rc" -ne 0 ]; then
		echo "tagdiskd exited with status $rc:" >&2
		cat "$TD_LOG" >&2
		return 1
	fi
}

# td_losetup [losetup options]: attach the disk file, remember the device for teardown.
td_losetup() {
	local dev
	dev=$(losetup -f --show "$@" "$TD_DISK") || return 1
	TD_LOOPS+=("$dev")
	echo "$dev"
}

td_ctl() {
	"$TAGDISKCTL" -s "$TD_SOCK" "$@"
}

# td_kmsg_mark: put a line of its own in the kernel log and print it; td_kmsg_since MARK
# prints what the kernel logged after it. The kernel log is the machine's: a test reads only
# its own part of it, not what other tests (or anything else) left there before.
td_kmsg_mark() {
	local mark
	mark="tagdisk-test: mark $$.$RANDOM.$EPOCHREALTIME"
	echo "$mark" >/dev/kmsg || return 1
	echo "$mark"
}

td_kmsg_since() {
	dmesg 2>/dev/null | awk -v m="$1" 'seen { print } index($0, m) { seen = 1 }'
}

# td_admin LINE: one raw protocol exchange.
td_admin() {
	python3 - "$TD_SOCK" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(60)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
f = s.makefile("rb")
sys.stdout.write(f.readline().decode())
PY
}

td_teardown() {
	local dev mnt
	# Loop devices go before the daemon: a daemon that stops unmounts its disk lazily when
	# a loop device holds it open, and the loop device's file then reads "/disk", outside
	# TD_DIR, which the scan below would miss (it left loop devices behind).
	if [ -n "${TD_DIR:-}" ]; then
		# Anything mounted below the test directory (ext4 on a loop device).
		for mnt in $(awk -v d="$TD_DIR/" 'index($2, d) == 1 && $2 != d"mnt" {print $2}' /proc/mounts); do
			umount -l "$mnt" 2>/dev/null || true
		done
	fi
	for dev in "${TD_LOOPS[@]:-}"; do
		[ -n "$dev" ] && losetup -d "$dev" 2>/dev/null || true
	done
	# Devices attached in a subshell (dev=$(td_losetup ...)) are not in TD_LOOPS:
	# detach every loop device backed by a file of this test's directory.
	if [ -n "${TD_DIR:-}" ]; then
		losetup -nl -O NAME,BACK-FILE 2>/dev/null | while read -r dev back; do
			case "$back" in "$TD_DIR"/*) losetup -d "$dev" 2>/dev/null || true ;; esac
		done
	fi
	td_harness_stop
	if [ -n "${TD_PID:-}" ]; then
		kill -TERM "$TD_PID" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$TD_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$TD_PID" 2>/dev/null || true
		wait "$TD_PID" 2>/dev/null || true
	fi
	if [ -n "${TD_DIR:-}" ]; then
		td_is_mounted "$TD_MNT" && { fusermount3 -u "$TD_MNT" 2>/dev/null || umount -l "$TD_MNT" 2>/dev/null; }
		rm -rf "$TD_DIR"
	fi
}

# ---- more helpers for the feature suites --------------------------------------------------
#
#   td_is_mounted DIR        DIR is a mount point in /proc/mounts (also when its FUSE
#                            daemon died and stat(2) on it fails)
#   td_json KEY...           read one JSON object on stdin, print the value at KEY (nested)
#   td_status KEY...         one field of the admin "status" reply
#   td_wait_for SECS WHAT CMD...
#                            run CMD every 0.05 s until it succeeds, then print what it
#                            printed that time; after SECS seconds (wall clock) fail, saying
#                            it was waiting for WHAT, with CMD's last output. Tests wait for
#                            a condition this way, never with a bare sleep; SECS is generous
#                            (60 or more): it costs nothing when things work, and CI may be
#                            a machine many times slower (make tsan, a busy host).
#   td_wait_until SECS CMD   td_wait_for without a description or output
#   td_wait_exit [SECS]      wait (60 s by default) for the daemon to exit by itself; its
#                            status in TD_RC
#   run_tagdiskd ARGS        run the daemon to its end (at most 60 s), e.g. on a bad config
#   td_hole_bytes F OFF LEN  bytes of [OFF, OFF+LEN) of file F that are holes (SEEK_DATA)
#   td_kill9                 kill -9 the daemon and remove its dead mount
#   td_not_mounted DIR       DIR is no mount point (a bare "! cmd" never fails a bats test)

td_is_mounted() {
	awk -v d="$1" '$2 == d { found = 1 } END { exit !found }' /proc/mounts
}

td_json() {
	python3 -c '
import json, sys
v = json.loads(sys.stdin.readline())
for k in sys.argv[1:]:
    v = v[int(k)] if isinstance(v, list) else v[k]
print(json.dumps(v) if not isinstance(v, str) else v)
' "$@"
}

td_status() {
	td_admin status | td_json "$@"
}

td_wait_for() {
	# Names of its own that CMD (often an eval of the caller's code) will not use.
	local _tw_secs=$1 _tw_what=$2 _tw_out _tw_rc=1 _tw_tries=0 _tw_end
	shift 2
	_tw_end=$((EPOCHSECONDS + _tw_secs))
	_tw_out=$(mktemp "${BATS_TEST_TMPDIR:-${TMPDIR:-/tmp}}/td_wait_for.XXXXXX") || return 1
	while :; do
		_tw_tries=$((_tw_tries + 1))
		if "$@" >"$_tw_out" 2>"$_tw_out.err"; then
			_tw_rc=0
			break
		fi
		[ "$EPOCHSECONDS" -lt "$_tw_end" ] || break
		sleep 0.05
	done
	if [ "$_tw_rc" -eq 0 ]; then
		cat "$_tw_out"
	else
		{
			echo "td_wait_for: timed out after ${_tw_secs}s ($_tw_tries tries) waiting for $_tw_what"
			echo "  command: $*"
			echo "  its last output:"
			sed 's/^/    /' "$_tw_out" "$_tw_out.err"
		} >&2
	fi
	rm -f "$_tw_out" "$_tw_out.err"
	return "$_tw_rc"
}

td_wait_until() {
	td_wait_for "$1" "'${*:2}' to succeed" "${@:2}" >/dev/null
}

td_wait_exit() {
	local secs=${1:-60}
	[ -n "$TD_PID" ] || { echo "td_wait_exit: no daemon" >&2; return 1; }
	local end=$((EPOCHSECONDS + secs))
	while [ "$EPOCHSECONDS" -le "$end" ]; do
		kill -0 "$TD_PID" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$TD_PID" 2>/dev/null; then
		echo "td_wait_exit: tagdiskd ($TD_PID) still running after ${secs}s" >&2
		return 1
	fi
	TD_RC=0
	# shellcheck disable=SC2034 # TD_RC is read by the tests
	wait "$TD_PID" || TD_RC=$?
	TD_PID=
}

run_tagdiskd() {
	# shellcheck disable=SC2086 # TD_WRAPPER is a command line
	run --separate-stderr timeout -s TERM 60 $TD_WRAPPER "$TAGDISKD" -f "$@"
}

td_hole_bytes() {
	python3 - "$@" <<'PY'
import errno, os, sys
path, off, length = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_RDONLY)
end, pos, holes = off + length, off, 0
while pos < end:
    try:
        data = min(os.lseek(fd, pos, os.SEEK_DATA), end)
    except OSError as e:
        if e.errno != errno.ENXIO:
            raise
        data = end
    holes += data - pos
    if data >= end:
        break
    pos = os.lseek(fd, data, os.SEEK_HOLE)
print(holes)
PY
}

td_kill9() {
	[ -n "$TD_PID" ] || return 0
	kill -KILL "$TD_PID"
	wait "$TD_PID" 2>/dev/null || true
	TD_PID=
	if td_is_mounted "$TD_MNT"; then
		fusermount3 -u "$TD_MNT" 2>/dev/null || umount -l "$TD_MNT"
	fi
	! td_is_mounted "$TD_MNT"
}

td_not_mounted() {
	! td_is_mounted "$1"
}

# ---- helpers for the admin socket and tagdiskctl suites ------------------------------------
#
#   td_stats KEY...          one field of the admin "stats" reply
#   td_admin_lines N         send stdin, as it is, on one connection; print the first N reply lines
#   td_dio read|write FILE BS OFFSET...
#                            one O_DIRECT pread/pwrite of BS bytes at each byte OFFSET, in order;
#                            prints "OFFSET ok", or "OFFSET EIO" (the errno's name), per offset
#   td_test_user NAME        create the system user NAME (and its group) unless it exists; a
#                            user created here is deleted by td_remove_test_users (in teardown)

td_stats() {
	td_admin stats | td_json "$@"
}

td_admin_lines() {
	python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(60)
s.connect(sys.argv[1])
s.sendall(sys.stdin.buffer.read())
f = s.makefile("rb")
for _ in range(int(sys.argv[2])):
    sys.stdout.write(f.readline().decode())
' "$TD_SOCK" "$1"
}

td_dio() {
	python3 -c '
import errno, mmap, os, sys
op, path, bs = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(path, (os.O_RDONLY if op == "read" else os.O_WRONLY) | os.O_DIRECT)
buf = mmap.mmap(-1, bs)
for off in sys.argv[4:]:
    try:
        io = os.preadv if op == "read" else os.pwritev
        n = io(fd, [buf], int(off))
        print(off, "ok" if n == bs else "short %d" % n, flush=True)
    except OSError as e:
        print(off, errno.errorcode.get(e.errno, e.errno), flush=True)
' "$@"
}

td_test_user() {
	getent passwd "$1" >/dev/null && return 0
	useradd -M -r -s /usr/sbin/nologin "$1" || return 1
	echo "$1" >>"$BATS_FILE_TMPDIR/td_created_users"
}

td_remove_test_users() {
	local u
	[ -f "$BATS_FILE_TMPDIR/td_created_users" ] || return 0
	while read -r u; do
		userdel "$u" 2>/dev/null || true
		if getent group "$u" >/dev/null; then groupdel "$u" 2>/dev/null || true; fi
	done <"$BATS_FILE_TMPDIR/td_created_users"
	rm -f "$BATS_FILE_TMPDIR/td_created_users"
}

# reset_loop: `tagdiskctl reset` every 100-200 ms until $TD_DIR/stop exists; each reply line
# goes to $TD_DIR/resets.log, and a failed call leaves "FAILED rc" there.
reset_loop() {
	local rc
	while [ ! -e "$TD_DIR/stop" ]; do
		rc=0
		"$TAGDISKCTL" -s "$TD_SOCK" reset >>"$TD_DIR/resets.log" 2>&1 || rc=$?
		[ "$rc" -eq 0 ] || echo "FAILED $rc" >>"$TD_DIR/resets.log"
		sleep "0.1$((RANDOM % 10))" # the pace of the resets, not a wait for anything
	done
}

# ---- a service manager's fd store (tests/tools/fdstore.py), for the takeover tests --------
#
#   td_harness_start ARGS    tagdiskd -f ARGS (this test's image, mount and socket over classic
#                            /dev/fuse; TD_IMG empty: no --image) under the harness, which keeps
#                            its FDSTORE=1 fds and starts it again with them after a crash; wait
#                            until it serves. Events in $TD_DIR/events, the pid in $TD_DIR/pid.
#   td_harness_kill9         SIGKILL the daemon, wait for its successor's READY=1; print the
#                            time from the kill to that READY, in ms
#   td_harness_readies       how many READY=1 the harness got so far
#   td_harness_stop          SIGTERM the harness (a stop: the daemon unmounts), wait for it

td_harness_readies() {
	local n
	n=$(grep -c ' ready ' "$TD_DIR/events" 2>/dev/null) || true
	echo "${n:-0}"
}

# td_harness_readies_over N: more READY=1 than N (td_wait_until runs it again each time).
td_harness_readies_over() { [ "$(td_harness_readies)" -gt "$1" ]; }

td_harness_start() {
	python3 "$TD_ROOT/tests/tools/fdstore.py" "$TD_DIR" -- "$TAGDISKD" -f \
		${TD_IMG:+--image "$TD_IMG"} --mount "$TD_MNT" --socket "$TD_SOCK" --transport classic \
		"$@" >"$TD_LOG" 2>&1 &
	TD_HARNESS=$!
	td_wait_until 60 td_harness_readies_over 0
	td_wait_until 60 test -f "$TD_DISK"
	grep -q 'store tagdisk-fuse' "$TD_DIR/events"
}

td_harness_kill9() {
	local before t0 t1
	before=$(td_harness_readies)
	t0=$(date +%s%N)
	kill -KILL "$(cat "$TD_DIR/pid")"
	td_wait_until 120 td_harness_readies_over "$before"
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}

td_harness_stop() {
	[ -n "${TD_HARNESS:-}" ] || return 0
	local i
	kill -TERM "$TD_HARNESS" 2>/dev/null
	for ((i = 0; i < 1200; i++)); do
		kill -0 "$TD_HARNESS" 2>/dev/null || break
		sleep 0.05
	done
	kill -KILL "$TD_HARNESS" 2>/dev/null
	wait "$TD_HARNESS" 2>/dev/null
	TD_HARNESS=
	# A daemon the harness did not stop.
	if [ -f "$TD_DIR/pid" ] && kill -0 "$(cat "$TD_DIR/pid")" 2>/dev/null; then
		TD_PID=$(cat "$TD_DIR/pid")
	fi
}
