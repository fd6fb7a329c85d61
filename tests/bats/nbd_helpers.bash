# shellcheck shell=bash
# Helpers for the nbd backend's integration tests (nbd.bats, slow/nbd_outage.bats): an nbdkit
# serving a sparse file on a Unix socket in the test's directory, and tagdiskd on that export.
#
#   nbd_setup             in setup(), after td_setup_dir: the served file, socket and URI
#   nbd_teardown          in teardown(): background jobs, then the daemon (td_teardown), then
#                         the server
#   start_nbdkit          serve $NBD_IMG on $NBD_SOCK; wait until the socket accepts
#   start_nbdkit_holding  the same through a shell plugin that holds the first write whose
#                         data starts with HOLD until the test lets it go (nbd_release)
#   stop_nbdkit [SIGNAL]  stop the server (KILL by default) and reap it
#   start_nbd_daemon CONNECTIONS [TAGDISKD_OPTIONS...]
#                         tagdiskd on the export ([drive] backend = nbd in a config file,
#                         with the lines of $NBD_DRIVE_INI added to [drive])
#   nbd_write_ini CONNECTIONS
#                         write that config file again (to change it for a SIGHUP)
#   same_bytes            the disk file and the served file are the same bytes

nbd_setup() {
	# The disk is the export: tagdiskd has no image file of its own.
	TD_IMG=
	NBD_IMG=$TD_DIR/served.img
	NBD_SOCK=$TD_DIR/nbd.sock
	NBD_URI="nbd+unix:///?socket=$NBD_SOCK"
	NBD_PID=
	NBD_DRIVE_INI=
	BG_PIDS=
	truncate -s 256M "$NBD_IMG"
}

nbd_teardown() {
	[ -z "${BG_PIDS:-}" ] || kill $BG_PIDS 2>/dev/null || true
	# A test that failed with the server frozen: thaw it, or the daemon's stop waits for it.
	[ -z "${NBD_PID:-}" ] || kill -CONT "$NBD_PID" 2>/dev/null || true
	# The daemon before the server: its last flush goes to the server.
	td_teardown
	stop_nbdkit
}

# start_nbdkit: serve $NBD_IMG on $NBD_SOCK (foreground, as a background job), and wait until
# the socket accepts connections.
start_nbdkit() {
	# A killed nbdkit leaves its socket behind, and a new one would not bind.
	rm -f "$NBD_SOCK"
	nbdkit -f -U "$NBD_SOCK" file "$NBD_IMG" >>"$TD_DIR/nbdkit.log" 2>&1 3>&- &
	NBD_PID=$!
	td_wait_for 60 "nbdkit to accept connections on $NBD_SOCK" nbd_accepts
}

# start_nbdkit_holding: like start_nbdkit, through nbdkit's shell plugin. The first write whose
# data starts with "HOLD" is held: the plugin makes $TD_DIR/hold/held, and writes it only once
# $TD_DIR/hold/release exists (nbd_release). Each write that reached the served file is a line
# "OFFSET FIRST-4-BYTES" of $TD_DIR/hold/pwrites, in that order.
start_nbdkit_holding() {
	mkdir -p "$TD_DIR/hold"
	cat >"$TD_DIR/hold.sh" <<EOF
#!/bin/bash
img='$NBD_IMG'
dir='$TD_DIR/hold'
EOF
	cat >>"$TD_DIR/hold.sh" <<'EOF'
case "$1" in
thread_model) echo parallel ;;
get_size) stat -L -c %s "$img" ;;
can_write | can_flush | can_multi_conn) ;;
pread) exec dd if="$img" iflag=skip_bytes,count_bytes skip="$4" count="$3" status=none ;;
pwrite)
	tmp=$(mktemp "$dir/w.XXXXXX") || exit 1
	cat >"$tmp"
	if [ "$(head -c 4 "$tmp")" = HOLD ] && mkdir "$dir/held" 2>/dev/null; then
		# A stalled disk under the server: it lets go when told to, or when nbdkit is gone.
		while [ ! -e "$dir/release" ] && kill -0 $PPID 2>/dev/null; do sleep 0.01; done
	fi
	dd if="$tmp" of="$img" oflag=seek_bytes conv=notrunc seek="$4" status=none || exit 1
	echo "$4 $(head -c 4 "$tmp")" >>"$dir/pwrites"
	rm -f "$tmp"
	;;
flush) ;;
*) exit 2 ;;
esac
EOF
	chmod +x "$TD_DIR/hold.sh"
	rm -f "$NBD_SOCK"
	nbdkit -f -U "$NBD_SOCK" sh "$TD_DIR/hold.sh" >>"$TD_DIR/nbdkit.log" 2>&1 3>&- &
	NBD_PID=$!
	td_wait_for 60 "nbdkit to accept connections on $NBD_SOCK" nbd_accepts
}

# nbd_release: let the held write go.
nbd_release() {
	touch "$TD_DIR/hold/release"
}

nbd_accepts() {
	kill -0 "$NBD_PID" || { echo "nbdkit exited:"; cat "$TD_DIR/nbdkit.log"; return 1; }
	python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
' "$NBD_SOCK"
}

# stop_nbdkit [SIGNAL]: stop the server (KILL by default) and reap it.
stop_nbdkit() {
	[ -n "${NBD_PID:-}" ] || return 0
	kill -"${1:-KILL}" "$NBD_PID" 2>/dev/null || true
	wait "$NBD_PID" 2>/dev/null || true
	NBD_PID=
}

# start_nbd_daemon CONNECTIONS [TAGDISKD_OPTIONS...]: tagdiskd on the export, with a config
# file naming it.
start_nbd_daemon() {
	local conns=$1
	shift
	nbd_write_ini "$conns"
	start_tagdiskd -c "$TD_DIR/nbd.ini" "$@"
	[ "$(td_status backend)" = nbd ]
	[ "$(td_status size)" -eq $((256 * 1024 * 1024)) ]
}

# nbd_write_ini CONNECTIONS: the daemon's config file, $TD_DIR/nbd.ini.
nbd_write_ini() {
	cat >"$TD_DIR/nbd.ini" <<EOF
[drive]
backend = nbd
$NBD_DRIVE_INI
[nbd]
uri = $NBD_URI
connections = $1
EOF
}

# The disk file and the served file are the same bytes.
same_bytes() {
	cmp "$TD_DISK" "$NBD_IMG"
}
