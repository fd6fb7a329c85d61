#!/usr/bin/env bats
# A disk name is a file name (DESIGN.md, contract): a name that a mount option would read
# (',' or '\') is refused with exit status 2 before anything is created, and the mount
# always carries nosuid,nodev, which no -o option can lift.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	[ -x "$TAGDISKD" ] || td_skip_file "tagdiskd is not built ($TAGDISKD)"
	return 0
}
setup() { td_setup_dir; }
teardown() { td_teardown; }

# Names, types, sizes and modes of everything under the test directory.
snapshot() {
	(cd "$TD_DIR" && find . -printf '%p %y %s %m\n' | sort)
}

# refused MESSAGE ARGS...: tagdiskd ARGS (with this test's image, size, mount and socket)
# exits 2 with the one stderr line "tagdiskd: MESSAGE", and creates and mounts nothing.
refused() {
	local msg=$1 before
	shift
	before=$(snapshot)
	run_tagdiskd --image "$TD_IMG" --size 64M --mount "$TD_MNT" --socket "$TD_SOCK" "$@"
	echo "status $status; stdout: $output; stderr: $stderr" >&2
	[ "$status" -eq 2 ]
	[ "$stderr" = "tagdiskd: $msg" ]
	[ "$(snapshot)" = "$before" ]
	[ ! -e "$TD_IMG" ]
	[ ! -e "$TD_SOCK" ]
	td_not_mounted "$TD_MNT"
}

# mount_options: the options field of the mount point's line in /proc/mounts.
mount_options() {
	awk -v d="$TD_MNT" '$2 == d { print $4 }' /proc/mounts
}

@test "--name d,allow_other is refused: exit 2, nothing created or mounted" {
	refused "--name \"d,allow_other\": must not contain ',' or '\\' (a mount option would read them) (try 'tagdiskd --help')" \
		--name 'd,allow_other'
}

@test "[disk] name = f,suid,dev is refused with its file and line: exit 2, nothing created" {
	printf '[disk]\nname = f,suid,dev\n' >"$TD_DIR/vm1.ini"
	refused "$TD_DIR/vm1.ini:2: [disk] name = \"f,suid,dev\": must not contain ',' or '\\' (a mount option would read them)" \
		-c "$TD_DIR/vm1.ini"
}

@test "a backslash in the name is refused too" {
	refused "--name \"a\\\\,b\": must not contain ',' or '\\' (a mount option would read them) (try 'tagdiskd --help')" \
		--name 'a\,b'
}

@test "-o suid and -o dev are refused: exit 2, nothing created or mounted" {
	refused "-o \"suid\": suid is refused: the disk is always mounted nosuid,nodev (try 'tagdiskd --help')" \
		-o suid
	refused "-o \"ro,dev\": dev is refused: the disk is always mounted nosuid,nodev (try 'tagdiskd --help')" \
		-o ro,dev
}

@test "the mount carries nosuid and nodev, also with a name holding a space and '='" {
	requires_fuse
	TD_DISK="$TD_MNT/my disk=1"
	start_tagdiskd --size 64M --name 'my disk=1'
	local opts
	opts=$(mount_options)
	echo "options: $opts" >&2
	[[ ",$opts," == *,nosuid,* ]]
	[[ ",$opts," == *,nodev,* ]]
	[[ ",$opts," != *,allow_other,* ]]
	[ -f "$TD_MNT/my disk=1" ]
	# The fsname is the name, whole (/proc/mounts writes a space as \040).
	[ "$(awk -v d="$TD_MNT" '$2 == d { print $1 }' /proc/mounts)" = 'tagdisk:my\040disk=1' ]
	stop_tagdiskd
}

@test "the mount carries nosuid and nodev whatever -o options come before" {
	requires_fuse
	start_tagdiskd --size 64M -o nosuid,nodev -o default_permissions
	local opts
	opts=$(mount_options)
	echo "options: $opts" >&2
	[[ ",$opts," == *,nosuid,* ]]
	[[ ",$opts," == *,nodev,* ]]
	stop_tagdiskd
}
