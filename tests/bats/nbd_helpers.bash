# shellcheck shell=bash
# Helpers for the nbd backend's integration tests (nbd.bats, slow/nbd_outage.bats): an nbdkit
# serving a sparse file on a Unix socket in the test's directory, and tagdiskd on that export.
#
#   nbd_setup             in setup(), after td_setup_dir: the served file, socket and URI
#   nbd_teardown          in teardown(): background jobs, then the daemon (td_teardown), then
#                         the server
#   start_nbdkit          serve $NBD_IMG on $NBD_SOCK; wait until the socket accepts
#   stop_nbdkit [SIGNAL]  stop the server (KILL by default) and reap it
#   start_nbd_daemon CONNECTIONS [TAGDISKD_OPTIONS...]
#                         tagdiskd on the export ([drive] backend = nbd in a config file)
#   same_bytes            the disk file and the served file are the same bytes

nbd_setup() {
	# The disk is the export: tagdiskd has no image file of its own.
	TD_IMG=
	NBD_IMG=$TD_DIR/served.img
	NBD_SOCK=$TD_DIR/nbd.sock
	NBD_URI="nbd+unix:///?socket=$NBD_SOCK"
	NBD_PID=
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
	cat >"$TD_DIR/nbd.ini" <<EOF
[drive]
backend = nbd
[nbd]
uri = $NBD_URI
connections = $conns
EOF
	start_tagdiskd -c "$TD_DIR/nbd.ini" "$@"
	[ "$(td_status backend)" = nbd ]
	[ "$(td_status size)" -eq $((256 * 1024 * 1024)) ]
}

# The disk file and the served file are the same bytes.
same_bytes() {
	cmp "$TD_DISK" "$NBD_IMG"
}
