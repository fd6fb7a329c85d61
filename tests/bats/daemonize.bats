#!/usr/bin/env bats
# tagdiskd without -f: the command returns once the disk file and the admin
# socket are up (0), or once the daemon has given up and cleaned up (1, the
# reason on stderr); a bad configuration still exits 2 before anything
# starts. The daemon leaves the terminal, writes --pid-file, logs to syslog
# and stops in order on SIGTERM.

load helpers
bats_require_minimum_version 1.5.0

setup_file() { requires_fuse || return 0; }
setup() {
	td_setup_dir
	TD_PIDFILE=$TD_DIR/tagdiskd.pid
	SYSLOG_PID=
}
teardown() {
	td_teardown
	if [ -n "$SYSLOG_PID" ]; then
		kill "$SYSLOG_PID" 2>/dev/null || true
		wait "$SYSLOG_PID" 2>/dev/null || true
		rm -f /dev/log
	fi
}

# bg_tagdiskd ARGS: run tagdiskd without -f on this test's image, mount point
# and socket, to the end of the command (at most 60 s), as `run` does.
bg_tagdiskd() {
	run --separate-stderr timeout -s KILL 60 "$TAGDISKD" --image "$TD_IMG" --mount "$TD_MNT" \
		--socket "$TD_SOCK" "$@"
}

# After a successful bg_tagdiskd with --pid-file: the daemon's pid in TD_PID.
daemon_from_pidfile() {
	[ -s "$TD_PIDFILE" ] || { echo "no pid file $TD_PIDFILE" >&2; return 1; }
	TD_PID=$(cat "$TD_PIDFILE")
	[[ "$TD_PID" =~ ^[0-9]+$ ]] || { echo "pid file holds '$TD_PID'" >&2; return 1; }
}

# wait_gone PID [SECS]: wait for a process that is not our child to end.
wait_gone() {
	local i
	for ((i = 0; i < ${2:-60} * 10; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	echo "process $1 still running after ${2:-60}s" >&2
	return 1
}

# No tagdiskd runs with DIR in its command line.
no_daemon_for() {
	if pgrep -f -- "$TAGDISKD .*$1" >&2; then
		echo "a tagdiskd for $1 is still running" >&2
		return 1
	fi
}

@test "without -f it returns 0 once the disk serves; the pid file names the detached daemon" {
	bg_tagdiskd --size 64M --pid-file "$TD_PIDFILE"
	echo "status $status, stdout '$output', stderr '$stderr'" >&2
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	# Before it serves it logs to the terminal (the created image, warnings), no error.
	run grep -v -E '^tagdiskd: (info|notice|warning): ' <<<"$stderr"
	[ "$status" -eq 1 ]
	daemon_from_pidfile
	# Up when the command returned: no waiting here.
	[ -S "$TD_SOCK" ]
	td_is_mounted "$TD_MNT"
	[ "$(stat -c %s "$TD_DISK")" -eq $((64 * 1024 * 1024)) ]
	[ "$(cat "/proc/$TD_PID/comm")" = tagdiskd ]
	[ "$(td_status pid)" -eq "$TD_PID" ]
	# Detached: its own session, in /, nothing of the terminal's left.
	[ "$(ps -o sid= -p "$TD_PID" | tr -d ' ')" -eq "$TD_PID" ]
	[ "$(readlink "/proc/$TD_PID/cwd")" = / ]
	[ "$(readlink "/proc/$TD_PID/fd/0")" = /dev/null ]
	[ "$(readlink "/proc/$TD_PID/fd/1")" = /dev/null ]
	[[ "$(readlink "/proc/$TD_PID/fd/2")" == pipe:* ]] # the syslog forwarder
	# It serves the disk, both ways.
	head -c 1M /dev/urandom >"$TD_DIR/data"
	dd if="$TD_DIR/data" of="$TD_DISK" bs=64k oflag=direct conv=notrunc status=none
	cmp -n 1048576 "$TD_DIR/data" "$TD_DISK"
	dd if="$TD_DISK" of="$TD_DIR/back" bs=64k count=16 iflag=direct status=none
	cmp "$TD_DIR/data" "$TD_DIR/back"
}

@test "SIGTERM to the detached daemon unmounts, removes the socket and the pid file" {
	bg_tagdiskd --size 64M --pid-file "$TD_PIDFILE"
	[ "$status" -eq 0 ]
	daemon_from_pidfile
	dd if=/dev/urandom of="$TD_DISK" bs=64k count=4 oflag=direct conv=notrunc status=none
	kill -TERM "$TD_PID"
	wait_gone "$TD_PID" 60
	TD_PID=
	td_not_mounted "$TD_MNT"
	[ ! -e "$TD_SOCK" ]
	[ ! -e "$TD_PIDFILE" ]
	[ ! -e "$TD_DISK" ]
}

@test "relative paths are resolved before the daemon moves to /" {
	printf '[disk]\nimage = disk.img\nsize = 64M\nmountpoint = mnt\n[admin]\nsocket = admin.sock\n' \
		>"$TD_DIR/td.ini"
	run --separate-stderr bash -c 'cd "$1" && exec timeout -s KILL 60 "$2" -c td.ini --pid-file td.pid' \
		_ "$TD_DIR" "$TAGDISKD"
	echo "status $status, stderr '$stderr'" >&2
	[ "$status" -eq 0 ]
	TD_PIDFILE=$TD_DIR/td.pid
	daemon_from_pidfile
	[ "$(td_status image)" = "$TD_IMG" ]
	[ -S "$TD_SOCK" ]
	td_is_mounted "$TD_MNT"
	[ "$(readlink "/proc/$TD_PID/cwd")" = / ]
	kill -TERM "$TD_PID"
	wait_gone "$TD_PID" 60
	TD_PID=
	[ ! -e "$TD_PIDFILE" ]
}

@test "a detached daemon started with relative paths restarts in place: same pid, same mount, in /" {
	run --separate-stderr bash -c 'cd "$1" && exec timeout -s KILL 60 "$2" --image disk.img \
		--size 64M --mount mnt --socket admin.sock --pid-file td.pid' _ "$TD_DIR" "$TAGDISKD"
	echo "status $status, stderr '$stderr'" >&2
	[ "$status" -eq 0 ]
	TD_PIDFILE=$TD_DIR/td.pid
	daemon_from_pidfile
	head -c 1M /dev/urandom >"$TD_DIR/data"
	dd if="$TD_DIR/data" of="$TD_DISK" bs=64k oflag=direct conv=notrunc status=none
	# The new image parses "disk.img", "mnt" and "admin.sock" again: from where it was
	# started, not from "/", where the daemon lives.
	run -0 timeout -s KILL 60 "$TAGDISKCTL" -s "$TD_SOCK" restart
	[[ "${lines[1]}" == "restarted: pid $TD_PID, version "* ]]
	[ "$(td_status pid)" -eq "$TD_PID" ]
	[ "$(td_status image)" = "$TD_IMG" ]
	[ "$(cat "$TD_PIDFILE")" -eq "$TD_PID" ]
	[ "$(readlink "/proc/$TD_PID/cwd")" = / ]
	td_is_mounted "$TD_MNT"
	cmp -n 1048576 "$TD_DIR/data" "$TD_DISK"
	kill -TERM "$TD_PID"
	wait_gone "$TD_PID" 60
	TD_PID=
	td_not_mounted "$TD_MNT"
	[ ! -e "$TD_PIDFILE" ]
}

@test "a stale pid file is replaced; one a live daemon holds is refused with status 2" {
	echo 999999 >"$TD_PIDFILE"
	bg_tagdiskd --size 64M --pid-file "$TD_PIDFILE"
	[ "$status" -eq 0 ]
	daemon_from_pidfile
	[ "$TD_PID" -ne 999999 ]
	[ "$(td_status pid)" -eq "$TD_PID" ]
	# Not a temporary file left beside it.
	[ "$(find "$TD_DIR" -maxdepth 1 -name 'tagdiskd.pid*' | wc -l)" -eq 1 ]

	mkdir "$TD_DIR/mnt2"
	run --separate-stderr timeout -s KILL 60 "$TAGDISKD" --image "$TD_DIR/other.img" --size 64M \
		--mount "$TD_DIR/mnt2" --socket "$TD_DIR/admin2.sock" --pid-file "$TD_PIDFILE"
	echo "status $status, stderr '$stderr'" >&2
	[ "$status" -eq 2 ]
	[ "$stderr" = "tagdiskd: --pid-file \"$TD_PIDFILE\" is in use: held by process $TD_PID" ]
	td_not_mounted "$TD_DIR/mnt2"
	[ ! -e "$TD_DIR/other.img" ]
	[ ! -e "$TD_DIR/admin2.sock" ]
	[ "$(cat "$TD_PIDFILE")" -eq "$TD_PID" ]
	no_daemon_for "$TD_DIR/mnt2"
}

@test "a failure to serve exits 1 with the reason on stderr, once the daemon has cleaned up" {
	start_tagdiskd --size 64M
	mkdir "$TD_DIR/mnt2"
	local pidfile2=$TD_DIR/second.pid
	# The image is locked by the first daemon.
	run --separate-stderr timeout -s KILL 60 "$TAGDISKD" --image "$TD_IMG" \
		--mount "$TD_DIR/mnt2" --socket "$TD_DIR/admin2.sock" --pid-file "$pidfile2"
	echo "status $status, stderr '$stderr'" >&2
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"image \"$TD_IMG\" is in use: locked by process $TD_PID"* ]]
	no_daemon_for "$TD_DIR/mnt2"
	td_not_mounted "$TD_DIR/mnt2"
	[ ! -e "$TD_DIR/admin2.sock" ]
	[ ! -e "$pidfile2" ]

	# The mount itself fails (a FUSE option the kernel refuses).
	run --separate-stderr timeout -s KILL 60 "$TAGDISKD" --image "$TD_DIR/new.img" --size 64M \
		--mount "$TD_DIR/mnt2" --socket "$TD_DIR/admin2.sock" --pid-file "$pidfile2" \
		-o no_such_fuse_option
	echo "status $status, stderr '$stderr'" >&2
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"tagdiskd: error: "* ]]
	no_daemon_for "$TD_DIR/mnt2"
	td_not_mounted "$TD_DIR/mnt2"
	[ ! -e "$TD_DIR/admin2.sock" ]
	[ ! -e "$pidfile2" ]
	# The image it created for the attempt is gone again.
	[ ! -e "$TD_DIR/new.img" ]
	# The first daemon still serves.
	[ "$(td_status state)" = running ]
}

@test "a bad configuration exits 2 before anything starts, with or without -f" {
	local args
	for args in "--depth 0" "--mount $TD_DIR/nosuch" "--pid-file $TD_DIR/nosuch/td.pid"; do
		# shellcheck disable=SC2086 # one case, split into its words
		run --separate-stderr timeout -s KILL 60 "$TAGDISKD" --image "$TD_IMG" --size 64M \
			--mount "$TD_MNT" --socket "$TD_SOCK" $args
		echo "$args: status $status, stderr '$stderr'" >&2
		[ "$status" -eq 2 ]
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ "$stderr" == "tagdiskd: "* ]]
		[ ! -e "$TD_IMG" ]
		[ ! -e "$TD_SOCK" ]
		td_not_mounted "$TD_MNT"
	done
	no_daemon_for "$TD_MNT"
}

@test "-f stays in the foreground and writes the pid file too" {
	start_tagdiskd --size 64M --pid-file "$TD_PIDFILE"
	[ "$(cat "$TD_PIDFILE")" -eq "$TD_PID" ]
	[ "$(td_status pid)" -eq "$TD_PID" ]
	grep -q 'serving "' "$TD_LOG"
	stop_tagdiskd
	[ ! -e "$TD_PIDFILE" ]
}

@test "the detached daemon logs to syslog at each line's level" {
	[ ! -e /dev/log ] || skip "a system logger owns /dev/log"
	python3 - "$TD_DIR/syslog.txt" <<'PY' >/dev/null 2>&1 3>&- &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind('/dev/log')
with open(sys.argv[1], 'w', buffering=1) as f:
    f.write('listening\n')
    while True:
        f.write(s.recv(8192).decode(errors='replace').rstrip('\n') + '\n')
PY
	SYSLOG_PID=$!
	td_wait_until 10 grep -q listening "$TD_DIR/syslog.txt"
	# Relative paths in the file: a reload after the move to / must still see them unchanged.
	printf '[disk]\nimage = disk.img\nsize = 64M\nmountpoint = mnt\n[queue]\nelevator = deadline\n' \
		>"$TD_DIR/td.ini"
	run --separate-stderr bash -c 'cd "$1" && exec timeout -s KILL 60 "$2" -c td.ini --socket "$3" --pid-file td.pid' \
		_ "$TD_DIR" "$TAGDISKD" "$TD_SOCK"
	[ "$status" -eq 0 ]
	TD_PIDFILE=$TD_DIR/td.pid
	daemon_from_pidfile
	td_wait_until 30 grep -q 'serving "' "$TD_DIR/syslog.txt"
	kill -HUP "$TD_PID"
	td_wait_until 30 grep -q 'reload: no change' "$TD_DIR/syslog.txt"
	printf '[disk]\nimage = disk.img\nsize = 128M\nmountpoint = mnt\n[queue]\nelevator = noop\n' \
		>"$TD_DIR/td.ini"
	kill -HUP "$TD_PID"
	td_wait_until 30 grep -q 'restart to apply' "$TD_DIR/syslog.txt"
	local pid=$TD_PID
	kill -TERM "$TD_PID"
	wait_gone "$TD_PID" 60
	TD_PID=
	td_wait_until 30 grep -q 'stopped: ' "$TD_DIR/syslog.txt"
	cat "$TD_DIR/syslog.txt" >&2
	# Facility daemon (3): <29> notice, <28> warning; tagged with the name and pid.
	grep -Eq "^<29>.* tagdiskd\[$pid\]: serving \"$TD_IMG\"" "$TD_DIR/syslog.txt"
	grep -Eq "^<29>.* tagdiskd\[[0-9]+\]: reload: elevator deadline -> noop$" "$TD_DIR/syslog.txt"
	grep -Eq "^<28>.* tagdiskd\[[0-9]+\]: reload: \[disk\] size changed: restart to apply$" \
		"$TD_DIR/syslog.txt"
	grep -Eq "^<29>.* tagdiskd\[[0-9]+\]: stopped: queue drained, flushed, unmounted$" \
		"$TD_DIR/syslog.txt"
	# Only the size: the relative image and mount point compared equal.
	[ "$(grep -c 'restart to apply' "$TD_DIR/syslog.txt")" -eq 1 ]
}
