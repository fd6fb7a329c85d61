#!/usr/bin/env bats
# Configuration errors name where they are (DESIGN.md, contract): the file and
# line for a value from the INI file, the option for one from the command
# line, then the key and the value. Each test runs the real daemon on a bad
# setting and checks the one line on stderr, exit status 2, and that nothing
# was created or mounted. No FUSE is needed: the daemon stops before it.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	[ -x "$TAGDISKD" ] || td_skip_file "tagdiskd is not built ($TAGDISKD)"
	return 0
}

setup() {
	td_setup_dir
	TD_INI=$TD_DIR/vm1.ini
}

teardown() { td_teardown; }

# Names, types, sizes, modes and times of everything under the test directory.
snapshot() {
	(cd "$TD_DIR" && find . -printf '%p %y %s %m %T@\n' | sort)
}

# refused MESSAGE ARGS...: tagdiskd ARGS exits 2 with exactly the stderr line
# "tagdiskd: MESSAGE", prints nothing on stdout, and leaves the test directory
# as it was: no image, no socket, the mount point empty and not mounted.
refused() {
	local msg=$1 before
	shift
	before=$(snapshot)
	run_tagdiskd "$@"
	echo "status $status; stdout: $output; stderr: $stderr" >&2
	[ "$status" -eq 2 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "$stderr" = "tagdiskd: $msg" ]
	[ -z "$output" ]
	[ "$(snapshot)" = "$before" ]
	[ ! -e "$TD_IMG" ]
	[ ! -e "$TD_SOCK" ]
	[ -z "$(ls -A "$TD_MNT")" ]
	td_not_mounted "$TD_MNT"
}

# A realistic file; tests append to it or change one line.
write_ini() {
	cat >"$TD_INI" <<EOF
; vm1: an HDD-like disk
[disk]
image = $TD_IMG
size = 64M
mountpoint = $TD_MNT

[queue]
elevator = deadline

[tags]
depth = 8

[admin]
socket = $TD_SOCK
EOF
}

@test "a key in the wrong section: file:line, key, value, and the section it belongs in" {
	write_ini
	sed -i 's/^elevator = deadline$/depth = 32/' "$TD_INI"
	refused "$TD_INI:8: [queue] depth = \"32\": unknown key in [queue] (it belongs in [tags])" \
		-c "$TD_INI"
}

@test "an unknown key: file:line, key and value" {
	write_ini
	sed -i 's/^size = 64M$/colour = blue/' "$TD_INI"
	refused "$TD_INI:4: [disk] colour = \"blue\": unknown key" -c "$TD_INI"
}

@test "an unknown section: file:line and the sections there are" {
	write_ini
	printf '\n[Drives]\nworkers = 2\n' >>"$TD_INI"
	refused "$TD_INI:16: [drives]: unknown section (known: disk, queue, tags, drive, rbd, nbd, admin, log)" \
		-c "$TD_INI"
}

@test "a key before the first section: file:line, and where it belongs" {
	write_ini
	sed -i '1i depth = 8' "$TD_INI"
	refused "$TD_INI:1: depth = \"8\": key outside any section (it belongs in [tags])" \
		-c "$TD_INI"
}

@test "the first bad line of the file is named, whatever order iniparser keeps" {
	write_ini
	# iniparser holds [tags] depth (first set at line 11) before [admin] socket (line 14);
	# depth turns bad at line 17, after the bad socket: line 14 is the first bad line.
	sed -i 's/^socket = .*/socket =/' "$TD_INI"
	printf '\n[tags]\ndepth = 0\n' >>"$TD_INI"
	refused "$TD_INI:14: [admin] socket = \"\": must not be empty" -c "$TD_INI"
}

@test "a new key out of range: [drive] shutdown_timeout_ms" {
	write_ini
	printf '[drive]\nshutdown_timeout_ms = 3600001\n' >>"$TD_INI"
	refused "$TD_INI:16: [drive] shutdown_timeout_ms = \"3600001\": must be between 0 and 3600000" \
		-c "$TD_INI"
}

@test "a line iniparser cannot read: file:line and the line" {
	write_ini
	sed -i 's/^\[tags\]$/[tags/' "$TD_INI"
	refused "$TD_INI:10: syntax error: \"[tags\" is not a [section], key = value or comment line" \
		-c "$TD_INI"
}

@test "a file written with CRLF line ends still names the right line" {
	write_ini
	sed -i 's/^depth = 8$/depth = abc/' "$TD_INI"
	sed -i 's/$/\r/' "$TD_INI"
	refused "$TD_INI:11: [tags] depth = \"abc\": not a number" -c "$TD_INI"
}

@test "a missing image set in the file: file:line of [disk] image" {
	write_ini
	sed -i '/^size = 64M$/d' "$TD_INI"
	refused "$TD_INI:3: [disk] image = \"$TD_IMG\": does not exist and no size was given" \
		-c "$TD_INI"
}

@test "a missing image given on the command line: the option, though the file sets one too" {
	write_ini
	sed -i '/^size = 64M$/d' "$TD_INI"
	refused "--image \"$TD_DIR/other.img\": does not exist and no size was given" \
		-c "$TD_INI" --image "$TD_DIR/other.img"
	[ ! -e "$TD_DIR/other.img" ]
}

@test "a mount point that is a file, set in the file: file:line of [disk] mountpoint" {
	write_ini
	touch "$TD_DIR/plain"
	sed -i "s|^mountpoint = .*|mountpoint = $TD_DIR/plain|" "$TD_INI"
	refused "$TD_INI:5: [disk] mountpoint = \"$TD_DIR/plain\": not a directory" -c "$TD_INI"
}

@test "a size that is no multiple of the block size, from the command line: the option" {
	write_ini
	refused "--size \"1000\": must be a multiple of logical_block_size (512)" \
		-c "$TD_INI" --size 1000
}

# ---- drive backends: the errors that need no Ceph cluster or NBD server ------------------------

# write_ini without [disk] image, for a network backend: ini_without_image BACKEND.
ini_without_image() {
	write_ini
	sed -i '/^image = /d' "$TD_INI"
	printf '[drive]\nbackend = %s\n' "$1" >>"$TD_INI"
}

@test "backend rbd without [rbd] image: the key it needs" {
	ini_without_image rbd
	refused "[rbd] image is not set (required with [drive] backend = rbd)" -c "$TD_INI"
}

@test "backend nbd without [nbd] uri: the key it needs" {
	ini_without_image nbd
	refused "[nbd] uri is not set (required with [drive] backend = nbd)" -c "$TD_INI"
}

@test "backend rbd with [disk] image too: file:line of the image, and the conflict" {
	write_ini
	printf '[drive]\nbackend = rbd\n[rbd]\nimage = vm1\n' >>"$TD_INI"
	refused "$TD_INI:3: [disk] image = \"$TD_IMG\": conflicts with [drive] backend = rbd (the disk is [rbd] pool/image; remove [disk] image)" \
		-c "$TD_INI"
}

@test "backend nbd with --image: the option, and the conflict" {
	ini_without_image nbd
	printf '[nbd]\nuri = nbd://localhost/vm1\n' >>"$TD_INI"
	refused "--image \"$TD_IMG\": conflicts with [drive] backend = nbd (the disk is [nbd] uri; remove [disk] image)" \
		-c "$TD_INI" --image "$TD_IMG"
}

@test "a bad backend and bad NBD URIs: file:line, key, value" {
	ini_without_image ceph
	refused "$TD_INI:15: [drive] backend = \"ceph\": must be file, rbd or nbd" -c "$TD_INI"
	ini_without_image nbd
	printf '[nbd]\nuri = http://localhost/vm1\n' >>"$TD_INI"
	refused "$TD_INI:17: [nbd] uri = \"http://localhost/vm1\": not an NBD URI (nbd://HOST[:PORT]/EXPORT or nbd+unix:///EXPORT?socket=PATH)" \
		-c "$TD_INI"
	ini_without_image nbd
	printf '[nbd]\nuri = nbd+unix:///vm1\n' >>"$TD_INI"
	refused "$TD_INI:17: [nbd] uri = \"nbd+unix:///vm1\": a unix NBD URI needs ?socket=PATH" \
		-c "$TD_INI"
	ini_without_image nbd
	printf '[nbd]\nuri = nbd://localhost/vm1\nconnections = 17\n' >>"$TD_INI"
	refused "$TD_INI:18: [nbd] connections = \"17\": must be between 1 and 16" -c "$TD_INI"
}

@test "an NBD URI naming a socket nobody listens on: one error naming the URI, exit 1, nothing mounted" {
	local before uri
	uri="nbd+unix:///vm1?socket=$TD_DIR/nbd.sock"
	ini_without_image nbd
	printf '[nbd]\nuri = %s\n' "$uri" >>"$TD_INI"
	before=$(snapshot)
	run_tagdiskd -c "$TD_INI"
	echo "status $status; stdout: $output; stderr: $stderr" >&2
	[ "$status" -eq 1 ]
	[ -z "$output" ]
	# The error line names the export; the log may say more around it.
	grep -qF "NBD export \"$uri\": " <<<"$stderr"
	[[ $stderr != *"serving"* ]]
	[ "$(snapshot)" = "$before" ]
	[ ! -e "$TD_SOCK" ]
	[ -z "$(ls -A "$TD_MNT")" ]
	td_not_mounted "$TD_MNT"
}

# ---- the admin socket's place, checked before anything is created (issue 32) -----------------

# listen_on PATH [MODE]: something listening on the Unix socket PATH, in the background
# (LISTENER is its pid); MODE (octal) lets other users connect.
listen_on() {
	python3 - "$1" "${2:-0755}" <<'PY' &
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], int(sys.argv[2], 8))
s.listen(8)
time.sleep(600)
PY
	LISTENER=$!
	td_wait_until 60 test -S "$1"
}

@test "a socket directory missing two levels deep: exit 2, and nothing created (the image neither)" {
	refused "--socket \"$TD_DIR/run/td/admin.sock\": directory \"$TD_DIR/run/td\" does not exist, nor \"$TD_DIR/run\" (create them, or choose another socket)" \
		--image "$TD_IMG" --size 64M --mount "$TD_MNT" --socket "$TD_DIR/run/td/admin.sock"
	[ ! -e "$TD_DIR/run" ]
}

@test "a socket path that is a file, or whose directory is a file: exit 2 before the image is created" {
	echo keep >"$TD_DIR/file.sock"
	refused "--socket \"$TD_DIR/file.sock\": exists and is not a socket; refusing to replace it" \
		--image "$TD_IMG" --size 64M --mount "$TD_MNT" --socket "$TD_DIR/file.sock"
	[ "$(cat "$TD_DIR/file.sock")" = keep ]
	touch "$TD_DIR/run"
	refused "--socket \"$TD_DIR/run/admin.sock\": \"$TD_DIR/run\" is not a directory" \
		--image "$TD_IMG" --size 64M --mount "$TD_MNT" --socket "$TD_DIR/run/admin.sock"
}

@test "a socket another process listens on: exit 2 before the image is created" {
	listen_on "$TD_DIR/other.sock"
	refused "--socket \"$TD_DIR/other.sock\": another process is listening on it (another tagdiskd?)" \
		--image "$TD_IMG" --size 64M --mount "$TD_MNT" --socket "$TD_DIR/other.sock"
	kill "$LISTENER"
}

@test "a second disk by hand with only its own image and mount point: exit 2 saying what to add, nothing created" {
	# As a user the default socket is NAME.sock next to the mount point (as root
	# /run/tagdisk/NAME.sock, shared by every disk): the first disk, named disk as the
	# second, holds $TD_DIR/disk.sock.
	chmod 1777 "$TD_DIR"
	mkdir -m 0777 "$TD_DIR/mnt2"
	listen_on "$TD_DIR/disk.sock" 0777
	local before
	before=$(snapshot)
	run --separate-stderr setpriv --reuid=nobody --regid=nogroup --clear-groups \
		"$TAGDISKD" -f --image "$TD_DIR/second.img" --size 64M --mount "$TD_DIR/mnt2"
	echo "status $status; stderr: $stderr" >&2
	[ "$status" -eq 2 ]
	[ "$stderr" = "tagdiskd: the default admin socket \"$TD_DIR/disk.sock\" is taken: another process (a tagdiskd of a disk also named \"disk\"?) is listening on it; give this disk another name (--name NAME or [disk] name) or its own socket (--socket PATH or [admin] socket)" ]
	[ "$(snapshot)" = "$before" ]
	[ ! -e "$TD_DIR/second.img" ]
	kill "$LISTENER"
}
