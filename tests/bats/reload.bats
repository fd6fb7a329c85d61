#!/usr/bin/env bats
# SIGHUP: the configuration file is read again. A live key (elevator, depth,
# the deadline tunables, command_timeout_ms, max_retries, shutdown_timeout_ms)
# is applied when its value in the file changed since the last load, so what
# was set over the admin socket survives a reload that does not touch it.
# Every other key that changed is named in one warning as needing a restart.
# A file that does not load changes nothing.

load helpers
bats_require_minimum_version 1.5.0

setup_file() { requires_fuse || return 0; }
setup() {
	td_setup_dir
	TD_INI=$TD_DIR/td.ini
}
teardown() { td_teardown; }

# hup PATTERN: SIGHUP, then wait until the log has one more line matching PATTERN.
hup() {
	HUP_PATTERN=$1
	HUP_BEFORE=$(grep -c -- "$1" "$TD_LOG" || true)
	kill -HUP "$TD_PID"
	if ! td_wait_until 30 hup_seen; then
		echo "no new line matching '$1' after SIGHUP; the log:" >&2
		cat "$TD_LOG" >&2
		return 1
	fi
}

hup_seen() {
	[ "$(grep -c -- "$HUP_PATTERN" "$TD_LOG" || true)" -gt "$HUP_BEFORE" ]
}

# The lines logged since the last "signal: SIGHUP" line.
last_reload_lines() {
	awk '/signal: SIGHUP/ { n = 0; delete l } { l[n++] = $0 } END { for (i = 1; i < n; i++) print l[i] }' \
		"$TD_LOG"
}

elevator_is() {
	[ "$(td_ctl elevator)" = "elevator: $1 (available: deadline, noop)" ]
}

up() {
	[ -S "$TD_SOCK" ] && mountpoint -q "$TD_MNT"
}

@test "an elevator changed in the file is applied on SIGHUP" {
	printf '[queue]\nelevator = deadline\n' >"$TD_INI"
	start_tagdiskd --size 64M -c "$TD_INI"
	run -0 td_ctl elevator
	[ "$output" = "elevator: deadline (available: deadline, noop)" ]
	printf '[queue]\nelevator = noop\n' >"$TD_INI"
	kill -HUP "$TD_PID"
	td_wait_until 30 elevator_is noop
	grep -q 'reload: elevator deadline -> noop' "$TD_LOG"
	dd if=/dev/urandom of="$TD_DIR/data" bs=4k count=64 status=none
	dd if="$TD_DIR/data" of="$TD_DISK" bs=4k oflag=direct conv=notrunc status=none
	cmp -n $((64 * 4096)) "$TD_DIR/data" "$TD_DISK"
	stop_tagdiskd
}

@test "a depth set over the socket survives a reload that does not change depth in the file" {
	printf '[queue]\nelevator = deadline\n[tags]\ndepth = 32\n' >"$TD_INI"
	start_tagdiskd --size 64M -c "$TD_INI"
	td_ctl depth 8 >/dev/null
	td_ctl elevator noop >/dev/null
	# The file is unchanged: nothing to apply.
	hup 'reload: no change'
	[ "$(td_status depth)" -eq 8 ]
	[ "$(td_status elevator)" = noop ]
	# Another key changes: depth stays the socket's.
	printf '[queue]\nelevator = deadline\nfifo_batch = 8\n[tags]\ndepth = 32\n' >"$TD_INI"
	hup 'reload: deadline tunables'
	[ "$(td_status depth)" -eq 8 ]
	[ "$(td_status elevator)" = noop ]
	grep -q 'reload: deadline tunables read_expire_ms 500, write_expire_ms 5000, fifo_batch 8, writes_starved 2' "$TD_LOG"
	run grep -E 'reload: (depth|elevator)' "$TD_LOG"
	[ "$status" -eq 1 ]
	# depth changes in the file: the file wins.
	printf '[queue]\nelevator = deadline\nfifo_batch = 8\n[tags]\ndepth = 16\n' >"$TD_INI"
	hup 'reload: depth 8 -> 16'
	[ "$(td_status depth)" -eq 16 ]
	[ "$(td_status elevator)" = noop ]
	stop_tagdiskd
}

@test "keys that cannot change live are named in one warning, and nothing changes" {
	printf '[disk]\nsize = 64M\n[queue]\nnr_requests = 128\n[drive]\nworkers = 0\n' >"$TD_INI"
	start_tagdiskd -c "$TD_INI"
	printf '[disk]\nsize = 128M\n[queue]\nnr_requests = 64\n[drive]\nworkers = 2\n' >"$TD_INI"
	hup 'restart to apply'
	last_reload_lines >&2
	[ "$(last_reload_lines | grep -c 'reload:')" -eq 1 ]
	last_reload_lines | grep -qx \
		'tagdiskd: warning: reload: \[disk\] size, \[queue\] nr_requests, \[drive\] workers changed: restart to apply'
	[ "$(td_status size)" -eq $((64 * 1024 * 1024)) ]
	[ "$(stat -c %s "$TD_DISK")" -eq $((64 * 1024 * 1024)) ]
	[ "$(td_status nr_requests)" -eq 128 ]
	[ "$(td_status workers)" -eq 0 ]
	# Still different at the next reload: said again.
	hup 'restart to apply'
	[ "$(grep -c 'restart to apply' "$TD_LOG")" -eq 2 ]
	stop_tagdiskd
}

@test "the backend keys cannot change live: named as needing a restart, the disk stays a file" {
	printf '[disk]\nsize = 64M\n[drive]\nbackend = file\n' >"$TD_INI"
	start_tagdiskd -c "$TD_INI"
	[ "$(td_status backend)" = file ]
	printf '[disk]\nsize = 64M\n[drive]\nbackend = file\n[rbd]\nid = tagdisk\n[nbd]\nconnections = 2\n' \
		>"$TD_INI"
	hup 'restart to apply'
	last_reload_lines | grep -qx \
		'tagdiskd: warning: reload: \[rbd\] id, \[nbd\] connections changed: restart to apply'
	# A relative keyring as well: named too (made absolute first), and nothing changes.
	printf '[disk]\nsize = 64M\n[drive]\nbackend = file\n[rbd]\nid = tagdisk\nkeyring = k\n[nbd]\nconnections = 2\n' \
		>"$TD_INI"
	hup 'restart to apply'
	last_reload_lines | grep -qx \
		'tagdiskd: warning: reload: \[rbd\] id, \[rbd\] keyring, \[nbd\] connections changed: restart to apply'
	[ "$(td_status backend)" = file ]
	[ "$(td_status backend_target)" = "$TD_IMG" ]
	stop_tagdiskd
}

@test "a relative image path in the file that did not change gives no warning" {
	printf '[disk]\nimage = disk.img\nsize = 64M\nmountpoint = mnt/\n[queue]\nelevator = deadline\n' \
		>"$TD_INI"
	(cd "$TD_DIR" && exec "$TAGDISKD" -f -c td.ini --socket "$TD_SOCK") >"$TD_LOG" 2>&1 &
	TD_PID=$!
	td_wait_until 30 up
	[ "$(td_status image)" = "$TD_IMG" ]
	hup 'reload: no change'
	# A live change next to it is applied, still without a warning.
	printf '[disk]\nimage = disk.img\nsize = 64M\nmountpoint = mnt\n[queue]\nelevator = noop\n' \
		>"$TD_INI"
	hup 'reload: elevator deadline -> noop'
	run grep 'restart to apply' "$TD_LOG"
	[ "$status" -eq 1 ]
	# A relative path that does change is named.
	printf '[disk]\nimage = other.img\nsize = 64M\nmountpoint = mnt\n[queue]\nelevator = noop\n' \
		>"$TD_INI"
	hup 'restart to apply'
	last_reload_lines | grep -qx 'tagdiskd: warning: reload: \[disk\] image changed: restart to apply'
	[ ! -e "$TD_DIR/other.img" ]
	[ "$(td_status image)" = "$TD_IMG" ]
	stop_tagdiskd
}

@test "a broken file is reported in one line and changes nothing; the daemon keeps serving" {
	printf '[queue]\nelevator = noop\n[tags]\ndepth = 16\n' >"$TD_INI"
	start_tagdiskd --size 64M -c "$TD_INI"
	local broken
	for broken in '[queue]\nelevator = deadline\n[tags]\ndepth = abc\n' \
		'[queue]\nelevator = deadline\n[tags\ndepth = 8\n' \
		'[queue]\nelevator = deadline\nbogus = 1\n'; do
		# shellcheck disable=SC2059 # the cases are formats
		printf "$broken" >"$TD_INI"
		hup 'keeping the current settings'
		last_reload_lines >&2
		[ "$(last_reload_lines | wc -l)" -eq 1 ]
		last_reload_lines | grep -q "^tagdiskd: error: reload: $TD_INI:[0-9]*: .*; keeping the current settings$"
		[ "$(td_status elevator)" = noop ]
		[ "$(td_status depth)" -eq 16 ]
	done
	grep -q 'depth = "abc"' "$TD_LOG"
	dd if=/dev/urandom of="$TD_DIR/data" bs=4k count=64 status=none
	dd if="$TD_DIR/data" of="$TD_DISK" bs=4k oflag=direct conv=notrunc status=none
	cmp -n $((64 * 4096)) "$TD_DIR/data" "$TD_DISK"
	# Back to the file as it was loaded: nothing to do.
	printf '[queue]\nelevator = noop\n[tags]\ndepth = 16\n' >"$TD_INI"
	hup 'reload: no change'
	stop_tagdiskd
}

@test "timeouts change live: command_timeout_ms, max_retries and shutdown_timeout_ms" {
	printf '[drive]\ncommand_timeout_ms = 30000\n' >"$TD_INI"
	start_tagdiskd --size 64M -c "$TD_INI"
	printf '[drive]\ncommand_timeout_ms = 5000\nmax_retries = 2\nshutdown_timeout_ms = 1000\n' \
		>"$TD_INI"
	hup 'reload: shutdown_timeout_ms 1000'
	grep -q 'reload: command_timeout_ms 5000, max_retries 2' "$TD_LOG"
	[ "$(td_status command_timeout_ms)" -eq 5000 ]
	[ "$(td_status max_retries)" -eq 2 ]
	run grep 'restart' "$TD_LOG"
	[ "$status" -eq 1 ]
	stop_tagdiskd
}
