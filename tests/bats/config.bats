#!/usr/bin/env bats
# Command line and configuration (DESIGN.md, contract): a bad value gives one
# line naming the key and the value, exit status 2, and changes nothing;
# command line > config file > built-in default.

load helpers
bats_require_minimum_version 1.5.0

setup_file() { requires_fuse || return 0; }
setup() {
	td_setup_dir
	TD_INI=$TD_DIR/td.ini
}
teardown() { td_teardown; }

# Everything under the test directory: names, types, sizes, modes, times, contents.
snapshot() {
	(cd "$TD_DIR" && find . -printf '%p %y %s %m %T@\n' | sort &&
		find . -type f -exec sha256sum {} + | sort)
}

# bad_config MESSAGE ARGS...: tagdiskd ARGS (with this test's image, mount point
# and socket, the image to be created at 64M) exits 2, prints exactly the one
# line "tagdiskd: MESSAGE" on stderr and nothing on stdout, and nothing changed.
bad_config() {
	local msg=$1 before after
	shift
	before=$(snapshot)
	run_tagdiskd --image "$TD_IMG" --size 64M --mount "$TD_MNT" --socket "$TD_SOCK" "$@"
	echo "status $status; stdout: $output; stderr: $stderr" >&2
	[ "$status" -eq 2 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "$stderr" = "tagdiskd: $msg" ]
	[ -z "$output" ]
	after=$(snapshot)
	[ "$before" = "$after" ]
	[ ! -e "$TD_IMG" ]
	[ ! -e "$TD_SOCK" ]
	td_not_mounted "$TD_MNT"
	[ -z "$(awk -v d="$TD_DIR" 'index($2, d) == 1' /proc/mounts)" ]
}

@test "an unknown section: exit 2, one line naming it, nothing created" {
	printf '[disk]\nname = disk\n[bogus]\ndepth = 4\n' >"$TD_INI"
	bad_config "$TD_INI:3: [bogus]: unknown section (known: disk, queue, tags, drive, rbd, nbd, admin, log)" -c "$TD_INI"
}

@test "an unknown key: exit 2, one line naming it, nothing created" {
	printf '[queue]\ncolour = blue\n' >"$TD_INI"
	bad_config "$TD_INI:2: [queue] colour = \"blue\": unknown key" -c "$TD_INI"
}

@test "a key in the wrong section is an unknown key" {
	printf '[queue]\ndepth = 8\n' >"$TD_INI"
	bad_config "$TD_INI:2: [queue] depth = \"8\": unknown key in [queue] (it belongs in [tags])" -c "$TD_INI"
}

@test "a value of the wrong type (depth = abc): exit 2, key and quoted value named" {
	printf '[tags]\ndepth = abc\n' >"$TD_INI"
	bad_config "$TD_INI:2: [tags] depth = \"abc\": not a number" -c "$TD_INI"
}

@test "a value out of range (depth = 0): exit 2, key and quoted value named" {
	printf '[tags]\ndepth = 0\n' >"$TD_INI"
	bad_config "$TD_INI:2: [tags] depth = \"0\": must be between 1 and 4096" -c "$TD_INI"
}

@test "a value out of range (nr_requests = 100000): exit 2, key and quoted value named" {
	printf '[queue]\nnr_requests = 100000\n' >"$TD_INI"
	bad_config "$TD_INI:2: [queue] nr_requests = \"100000\": must be between 4 and 65536" -c "$TD_INI"
}

@test "a bad elevator name: exit 2, key and quoted value named" {
	printf '[queue]\nelevator = cfq\n' >"$TD_INI"
	bad_config "$TD_INI:2: [queue] elevator = \"cfq\": unknown elevator (known: deadline, mq-deadline, noop, none)" -c "$TD_INI"
}

@test "a bad logical_block_size and a bad boolean: exit 2, key and quoted value named" {
	printf '[disk]\nlogical_block_size = 1024\n' >"$TD_INI"
	run_tagdiskd --image "$TD_IMG" --size 64M --mount "$TD_MNT" --socket "$TD_SOCK" -c "$TD_INI"
	[ "$status" -eq 2 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "tagdiskd: $TD_INI:2: [disk] logical_block_size = \"1024\": "* ]]
	printf '[disk]\nread_only = maybe\n' >"$TD_INI"
	run_tagdiskd --image "$TD_IMG" --size 64M --mount "$TD_MNT" --socket "$TD_SOCK" -c "$TD_INI"
	[ "$status" -eq 2 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "tagdiskd: $TD_INI:2: [disk] read_only = \"maybe\": "* ]]
	[ ! -e "$TD_IMG" ]
	td_not_mounted "$TD_MNT"
}

@test "a missing image without a size: exit 2, nothing created" {
	local before
	before=$(snapshot)
	run_tagdiskd --image "$TD_IMG" --mount "$TD_MNT" --socket "$TD_SOCK"
	[ "$status" -eq 2 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "$stderr" = "tagdiskd: --image \"$TD_IMG\": does not exist and no size was given" ]
	[ "$(snapshot)" = "$before" ]
	[ ! -e "$TD_IMG" ]
	td_not_mounted "$TD_MNT"
}

@test "a mount point that is not a directory: exit 2, nothing created" {
	touch "$TD_DIR/file"
	bad_config "--mount \"$TD_DIR/file\": not a directory" --mount "$TD_DIR/file"
}

@test "a missing mount point: exit 2, it is not created" {
	bad_config "--mount \"$TD_DIR/nowhere\": does not exist" --mount "$TD_DIR/nowhere"
	[ ! -e "$TD_DIR/nowhere" ]
}

@test "an image whose size is not a multiple of the block size: exit 2, image untouched" {
	head -c 1000 /dev/urandom >"$TD_IMG"
	local before
	before=$(snapshot)
	run_tagdiskd --image "$TD_IMG" --mount "$TD_MNT" --socket "$TD_SOCK"
	[ "$status" -eq 2 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "$stderr" = "tagdiskd: --image \"$TD_IMG\": its size (1000 bytes) is not a nonzero multiple of logical_block_size (512)" ]
	[ "$(snapshot)" = "$before" ]
	[ ! -e "$TD_SOCK" ]
	td_not_mounted "$TD_MNT"
}

@test "an image of another size than --size: exit 2, image untouched" {
	truncate -s 8M "$TD_IMG"
	local before
	before=$(snapshot)
	run_tagdiskd --image "$TD_IMG" --size 16M --mount "$TD_MNT" --socket "$TD_SOCK"
	[ "$status" -eq 2 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "$stderr" = "tagdiskd: --size \"16M\": the existing image \"$TD_IMG\" is 8M (8388608 bytes)" ]
	[ "$(snapshot)" = "$before" ]
	td_not_mounted "$TD_MNT"
}

@test "a size that is not a multiple of the block size: exit 2, nothing created" {
	bad_config '--size "1000": must be a multiple of logical_block_size (512)' --size 1000
}

@test "a bad command-line value (--depth 0): exit 2, one line naming option and value" {
	bad_config "--depth \"0\": must be between 1 and 4096 (try 'tagdiskd --help')" --depth 0
}

@test "a bad command-line choice (--mode xyz): exit 2, one line naming option and value" {
	bad_config "--mode \"xyz\": must be rq, bio or mq (try 'tagdiskd --help')" --mode xyz
}

@test "an unknown command-line option: exit 2, one line naming it" {
	bad_config "unknown option --colour (try 'tagdiskd --help')" --colour blue
}

@test "an option without its value and a stray argument: exit 2, one line each" {
	bad_config "option --depth needs a value (try 'tagdiskd --help')" --depth
	bad_config "unexpected argument \"extra\" (try 'tagdiskd --help')" extra
}

@test "-c with a missing file: exit 2, one line naming the file" {
	bad_config "config file \"$TD_DIR/missing.ini\": No such file or directory" \
		-c "$TD_DIR/missing.ini"
}

@test "an INI syntax error and a key outside any section: exit 2, one line" {
	printf '[tags\ndepth = 4\n' >"$TD_INI"
	run_tagdiskd --image "$TD_IMG" --size 64M --mount "$TD_MNT" --socket "$TD_SOCK" -c "$TD_INI"
	[ "$status" -eq 2 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "tagdiskd: $TD_INI:1: syntax error: "* ]]
	printf 'depth = 4\n[tags]\n' >"$TD_INI"
	bad_config "$TD_INI:1: depth = \"4\": key outside any section (it belongs in [tags])" -c "$TD_INI"
}

@test "the file's first bad value is reported even when the command line would override it" {
	# The file is read as a whole; a bad value in it is an error on its own.
	printf '[tags]\ndepth = 0\n' >"$TD_INI"
	bad_config "$TD_INI:2: [tags] depth = \"0\": must be between 1 and 4096" -c "$TD_INI" --depth 8
}

@test "a FUSE option the kernel refuses: the daemon fails and leaves nothing behind" {
	run_tagdiskd --image "$TD_IMG" --size 64M --mount "$TD_MNT" --socket "$TD_SOCK" \
		-o no_such_fuse_option
	[ "$status" -ne 0 ]
	[ "$status" -ne 124 ]
	[[ "$stderr" == *"no_such_fuse_option"* ]]
	[ ! -e "$TD_IMG" ]
	[ ! -e "$TD_SOCK" ]
	td_not_mounted "$TD_MNT"
}

@test "built-in defaults: rq, deadline, depth 32" {
	start_tagdiskd --size 64M
	[ "$(td_status mode)" = rq ]
	[ "$(td_status elevator)" = deadline ]
	[ "$(td_status depth)" -eq 32 ]
	[ "$(td_status nr_requests)" -eq 128 ]
	[ "$(td_status workers)" -eq 0 ]
	[ "$(td_status logical_block_size)" -eq 512 ]
	[ "$(td_status read_only)" = false ]
}

@test "the config file beats the defaults" {
	printf '[queue]\nelevator = noop\nnr_requests = 64\n[tags]\ndepth = 8\n[drive]\nworkers = 2\n' \
		>"$TD_INI"
	start_tagdiskd --size 64M -c "$TD_INI"
	[ "$(td_status mode)" = rq ]
	[ "$(td_status elevator)" = noop ]
	[ "$(td_status depth)" -eq 8 ]
	[ "$(td_status nr_requests)" -eq 64 ]
	[ "$(td_status workers)" -eq 2 ]
}

@test "the command line beats the config file" {
	# The file's paths are wrong on purpose: the command line's must win.
	cat >"$TD_INI" <<EOF
[disk]
image = $TD_DIR/not-this.img
mountpoint = $TD_DIR/not-here
name = filename
[queue]
mode = bio
elevator = noop
[tags]
depth = 8
[admin]
socket = $TD_DIR/not-this.sock
EOF
	TD_DISK=$TD_MNT/cmdname
	start_tagdiskd --size 64M -c "$TD_INI" --mode rq --depth 16 --name cmdname
	[ "$(td_status mode)" = rq ]
	[ "$(td_status elevator)" = noop ]
	[ "$(td_status depth)" -eq 16 ]
	[ "$(td_status image)" = "$TD_IMG" ]
	[ "$(td_status disk)" = "$TD_MNT/cmdname" ]
	[ ! -e "$TD_DIR/not-this.img" ]
	[ ! -e "$TD_DIR/not-this.sock" ]
	stop_tagdiskd
	start_tagdiskd -c "$TD_INI" --mode bio --elevator deadline --name cmdname
	[ "$(td_status mode)" = bio ]
	[ "$(td_status elevator)" = none ]
	[ "$(td_status depth)" -eq 0 ]
}

@test "the config file alone can name the image, mount point and socket" {
	cat >"$TD_INI" <<EOF
[disk]
image = $TD_IMG
size = 64M
mountpoint = $TD_MNT
[admin]
socket = $TD_SOCK
EOF
	"$TAGDISKD" -f -c "$TD_INI" >"$TD_LOG" 2>&1 &
	TD_PID=$!
	td_wait_until 60 test -S "$TD_SOCK"
	td_wait_until 60 test -f "$TD_DISK"
	[ "$(stat -c %s "$TD_DISK")" -eq $((64 * 1024 * 1024)) ]
	[ "$(td_status image)" = "$TD_IMG" ]
	stop_tagdiskd
}

@test "another backend's keys are accepted with backend file and logged once as unused" {
	printf '[drive]\nbackend = file\n[rbd]\npool = ssd\nimage = vm1\n[nbd]\nuri = nbd://localhost/vm1\n' \
		>"$TD_INI"
	start_tagdiskd --size 64M -c "$TD_INI"
	[ "$(td_status backend)" = file ]
	[ "$(td_status backend_target)" = "$TD_IMG" ]
	[ "$(td_status image)" = "$TD_IMG" ]
	[ "$(grep -c 'not used with' "$TD_LOG")" -eq 1 ]
	grep -qx 'tagdiskd: notice: config: \[rbd\] pool, \[rbd\] image, \[nbd\] uri not used with \[drive\] backend = file' \
		"$TD_LOG"
	stop_tagdiskd
}

@test "an option replacing a value of the config file says so in the log (the unit's --socket over [admin] socket)" {
	printf '[disk]\nsize = 64M\n[admin]\nsocket = %s\n' "$TD_DIR/from-file.sock" >"$TD_INI"
	# start_tagdiskd passes --socket "$TD_SOCK", as the unit passes its own.
	start_tagdiskd -c "$TD_INI"
	[ -S "$TD_SOCK" ]
	[ ! -e "$TD_DIR/from-file.sock" ]
	grep -qxF "tagdiskd: notice: config: --socket replaces [admin] socket of $TD_INI:4" "$TD_LOG"
	# A key the file does not set is not mentioned.
	run -1 grep -F "replaces [disk] mountpoint" "$TD_LOG"
	stop_tagdiskd
}
