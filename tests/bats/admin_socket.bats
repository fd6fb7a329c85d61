#!/usr/bin/env bats
# The admin socket's file gets its mode and group without following a path that someone
# who may write to its directory can swap: an LD_PRELOAD shim (tests/shims/bind_swap.c)
# puts a symlink to a victim file at the socket's path right after bind(), and the
# victim's mode and group must not change. No FUSE is needed: the daemon stops at the
# socket, or is only asked for its status.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	[ -x "$TAGDISKD" ] || { td_skip_file "tagdiskd is not built ($TAGDISKD)"; return 0; }
	[ "$(id -u)" -eq 0 ] || { td_skip_file "needs root (gives the socket a group)"; return 0; }
	requires cc || return 0
	cc -shared -fPIC -o "$BATS_FILE_TMPDIR/bind_swap.so" "$TD_ROOT/tests/shims/bind_swap.c" -ldl
	export TD_SHIM="$BATS_FILE_TMPDIR/bind_swap.so"
}
setup() {
	td_setup_dir
	# A group that is not root's, for socket_group.
	TD_GROUP=$(getent group | awk -F: '$3 != 0 { print $1; exit }')
	[ -n "$TD_GROUP" ]
	cat >"$TD_DIR/vm1.ini" <<EOF
[disk]
image = $TD_IMG
size = 64M
mountpoint = $TD_MNT

[admin]
socket = $TD_SOCK
socket_mode = 0666
socket_group = $TD_GROUP
EOF
}
teardown() { td_teardown; }

# owner_mode FILE: "user:group mode" of FILE itself (not of what it points to).
owner_mode() {
	stat -c '%U:%G %a' "$1"
}

@test "a symlink put at the socket path right after bind: the daemon exits 2, its target keeps its mode and group" {
	local victim=$TD_DIR/victim
	echo secret >"$victim"
	chmod 0600 "$victim"
	chown root:root "$victim"
	# An ASan build wants its runtime first among the libraries; the shim comes first here.
	TD_WRAPPER="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
	TD_WRAPPER+=" LD_PRELOAD=$TD_SHIM TD_SHIM_SOCKET=$TD_SOCK TD_SHIM_VICTIM=$victim"
	TD_WRAPPER=$TD_WRAPPER run_tagdiskd -c "$TD_DIR/vm1.ini"
	echo "status $status; stderr: $stderr" >&2
	[[ "$stderr" == *"bind_swap: swapped $TD_SOCK"* ]]
	[ "$(owner_mode "$victim")" = "root:root 600" ]
	[ "$(cat "$victim")" = secret ]
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"tagdiskd: error: admin socket \"$TD_SOCK\": something else appeared at this path while the socket was made; refusing to replace it"* ]]
	# The symlink is left as it was, and nothing of the daemon's is left behind.
	[ "$(readlink "$TD_SOCK")" = "$victim" ]
	[ -z "$(find "$TD_DIR" -name '.tagdiskd.*')" ]
	td_not_mounted "$TD_MNT"
}

@test "the socket appears at its path with its mode and group, and the daemon answers on it" {
	requires_fuse
	start_tagdiskd -c "$TD_DIR/vm1.ini"
	[ -S "$TD_SOCK" ]
	[ ! -L "$TD_SOCK" ]
	[ "$(owner_mode "$TD_SOCK")" = "root:$TD_GROUP 666" ]
	[ -z "$(find "$TD_DIR" -name '.tagdiskd.*')" ]
	[ "$(td_status state)" = running ]
	stop_tagdiskd
	[ ! -e "$TD_SOCK" ]
}
