#!/usr/bin/env bats
# tagdiskd as a process: start and stop, the image and its lock, readiness
# notification, SIGHUP reload, unmount from outside, and what it logs.

load helpers
bats_require_minimum_version 1.5.0

setup_file() { requires_fuse || return 0; }
setup() { td_setup_dir; }
teardown() { td_teardown; }

# Wait for the daemon to stop after signal $1 and check it cleaned up after itself.
stop_with_signal() {
	kill "-$1" "$TD_PID"
	td_wait_exit 60
	[ "$TD_RC" -eq 0 ] || { cat "$TD_LOG" >&2; return 1; }
	td_not_mounted "$TD_MNT"
	[ ! -e "$TD_SOCK" ]
	[ ! -e "$TD_DISK" ]
}

@test "SIGTERM stops the daemon with status 0, unmounts and removes the socket" {
	start_tagdiskd --size 256M
	td_is_mounted "$TD_MNT"
	[ -S "$TD_SOCK" ]
	stop_with_signal TERM
	grep -q 'signal: SIGTERM, stopping' "$TD_LOG"
	grep -q 'stopped: queue drained, flushed, unmounted' "$TD_LOG"
}

@test "SIGINT stops the daemon with status 0, unmounts and removes the socket" {
	start_tagdiskd --size 256M
	stop_with_signal INT
	grep -q 'signal: SIGINT, stopping' "$TD_LOG"
}

@test "SIGTERM while the disk is being written drains it: every acknowledged write is in the image" {
	start_tagdiskd --size 256M
	head -c 256M /dev/urandom >"$TD_DIR/data"
	# Write it in 256 KiB direct writes, printing how many were acknowledged.
	python3 - "$TD_DIR/data" "$TD_DISK" >"$TD_DIR/acked" 2>"$TD_DIR/writer.err" <<'PY' &
import mmap, os, sys
src = open(sys.argv[1], 'rb')
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 256 * 1024)
n = 0
while True:
    chunk = src.read(len(buf))
    if not chunk:
        break
    buf[:] = chunk
    os.pwrite(fd, buf, n * len(buf))
    n += 1
    print(n, flush=True)
PY
	local writer=$!
	# SIGTERM once the writer is under way: after its first acknowledged write (or its end,
	# if it failed: then writer.err says why).
	td_wait_for 120 "the writer's first acknowledged write" \
		eval '[ -s "$TD_DIR/acked" ] || ! kill -0 "$writer" 2>/dev/null'
	cat "$TD_DIR/writer.err" >&2
	[ -s "$TD_DIR/acked" ]
	kill -TERM "$TD_PID"
	wait "$writer" || true
	td_wait_exit 60
	[ "$TD_RC" -eq 0 ]
	td_not_mounted "$TD_MNT"
	cat "$TD_DIR/writer.err" >&2
	# Every acknowledged write must be in the image.
	local acked
	acked=$(tail -n 1 "$TD_DIR/acked")
	echo "acknowledged: $acked of 1024 writes" >&2
	[ -n "$acked" ]
	[ "$acked" -gt 0 ]
	cmp -n $((acked * 256 * 1024)) "$TD_DIR/data" "$TD_IMG"
}

@test "the disk file's size is the existing image's size" {
	truncate -s 200M "$TD_IMG"
	start_tagdiskd
	[ "$(stat -c %s "$TD_DISK")" -eq $((200 * 1024 * 1024)) ]
	[ "$(stat -c %F "$TD_DISK")" = "regular file" ]
	[ "$(ls "$TD_MNT")" = "disk" ]
	[ "$(td_status size)" -eq $((200 * 1024 * 1024)) ]
}

@test "--size creates a sparse image of exactly that size" {
	[ ! -e "$TD_IMG" ]
	start_tagdiskd --size 300M
	[ "$(stat -c %s "$TD_IMG")" -eq 314572800 ]
	[ "$(stat -c %s "$TD_DISK")" -eq 314572800 ]
	# Sparse: almost nothing allocated.
	[ "$(du -B1 "$TD_IMG" | cut -f1)" -lt 1048576 ]
	grep -q "image \"$TD_IMG\": created, 314572800 bytes, sparse" "$TD_LOG"
	stop_tagdiskd
	# The image stays after a clean stop.
	[ "$(stat -c %s "$TD_IMG")" -eq 314572800 ]
}

@test "--size with an existing image of that size serves it unchanged" {
	dd if=/dev/urandom of="$TD_IMG" bs=1M count=8 status=none
	local sum
	sum=$(sha256sum <"$TD_IMG")
	start_tagdiskd --size 8M
	[ "$(sha256sum <"$TD_DISK")" = "$sum" ]
}

@test "a second daemon on the same image exits 2 and names the first one's pid" {
	start_tagdiskd --size 256M
	mkdir "$TD_DIR/mnt2"
	run_tagdiskd --image "$TD_IMG" --mount "$TD_DIR/mnt2" --socket "$TD_DIR/admin2.sock"
	[ "$status" -eq 2 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"image \"$TD_IMG\" is in use: locked by process $TD_PID"* ]]
	td_not_mounted "$TD_DIR/mnt2"
	[ ! -e "$TD_DIR/admin2.sock" ]
	# The first one still serves.
	dd if="$TD_DISK" of=/dev/null bs=1M count=1 status=none
	[ "$(td_status state)" = running ]
	stop_tagdiskd
}

@test "a missing socket directory is made and logged, and removed again on exit unless another socket is in it" {
	# start_tagdiskd gives --socket "$TD_SOCK": put it one level down, in a directory that
	# does not exist yet.
	TD_SOCK=$TD_DIR/run/admin.sock
	start_tagdiskd --size 64M
	[ -S "$TD_SOCK" ]
	grep -qF "admin: created the socket directory \"$TD_DIR/run\" (removed again on exit)" "$TD_LOG"
	stop_tagdiskd
	[ ! -e "$TD_DIR/run" ]
	# Another socket (another daemon's) in it at the exit: it stays.
	start_tagdiskd
	touch "$TD_DIR/run/other.sock"
	stop_tagdiskd
	[ -e "$TD_DIR/run/other.sock" ]
	# A directory the daemon did not make is never removed.
	rm "$TD_DIR/run/other.sock"
	start_tagdiskd
	run -1 grep -q "created the socket directory" "$TD_LOG"
	stop_tagdiskd
	[ -d "$TD_DIR/run" ]
}

@test "a second daemon is refused in read-only mode too" {
	start_tagdiskd --size 64M
	mkdir "$TD_DIR/mnt2"
	run_tagdiskd --image "$TD_IMG" --mount "$TD_DIR/mnt2" --socket "$TD_DIR/admin2.sock" \
		--read-only
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"locked by process $TD_PID"* ]]
	td_not_mounted "$TD_DIR/mnt2"
}

@test "after the first daemon stops, the image can be served again" {
	start_tagdiskd --size 64M
	stop_tagdiskd
	start_tagdiskd
	[ "$(stat -c %s "$TD_DISK")" -eq $((64 * 1024 * 1024)) ]
}

@test "an unmount from outside (fusermount3 -u) makes the daemon drain and exit 0" {
	start_tagdiskd --size 256M
	dd if=/dev/urandom of="$TD_DISK" bs=64k count=16 oflag=direct conv=notrunc status=none
	fusermount3 -u "$TD_MNT"
	td_wait_exit 60
	[ "$TD_RC" -eq 0 ]
	grep -q "fuse: $TD_MNT was unmounted, stopping" "$TD_LOG"
	td_not_mounted "$TD_MNT"
	[ ! -e "$TD_SOCK" ]
}

# A datagram listener for NOTIFY_SOCKET: each message is written to $2 as
# "--" then its lines; on READY=1 it also records whether the disk file and
# the admin socket exist at that moment. It ends after STOPPING=1.
notify_listener() {
	python3 - "$@" <<'PY' &
import os, socket, stat, sys
path, out, disk, sock = sys.argv[1:5]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
s.settimeout(60)
with open(out, 'w', buffering=1) as f:
    f.write('listening\n')
    while True:
        try:
            msg = s.recv(4096).decode()
        except socket.timeout:
            break
        f.write('--\n' + msg + '\n')
        lines = msg.split('\n')
        if 'READY=1' in lines:
            f.write('disk_exists=%d\n' % os.path.isfile(disk))
            f.write('socket_exists=%d\n' % (os.path.exists(sock) and
                                            stat.S_ISSOCK(os.stat(sock).st_mode)))
        if 'STOPPING=1' in lines:
            break
PY
	NOTIFY_PID=$!
	td_wait_until 60 grep -q listening "$2"
}

@test "with NOTIFY_SOCKET it sends READY=1 once the disk file is up, STATUS= lines, RELOADING=1 on SIGHUP and STOPPING=1 on SIGTERM" {
	local msgs=$TD_DIR/notify.txt
	notify_listener "$TD_DIR/notify.sock" "$msgs" "$TD_DISK" "$TD_SOCK"
	export NOTIFY_SOCKET=$TD_DIR/notify.sock
	start_tagdiskd --size 256M
	unset NOTIFY_SOCKET
	td_wait_until 60 grep -q '^disk_exists=' "$msgs"
	# A reload says so, and says when it is ready again.
	kill -HUP "$TD_PID"
	td_wait_until 60 grep -qx 'STATUS=serving (configuration reloaded)' "$msgs"
	kill -TERM "$TD_PID"
	td_wait_exit 60
	[ "$TD_RC" -eq 0 ]
	wait "$NOTIFY_PID"
	cat "$msgs" >&2
	grep -qx 'READY=1' "$msgs"
	grep -qx 'disk_exists=1' "$msgs"
	grep -qx 'socket_exists=1' "$msgs"
	grep -qx "STATUS=serving $TD_IMG at $TD_MNT/disk (rq, deadline, depth 32)" "$msgs"
	grep -qx 'STOPPING=1' "$msgs"
	grep -qx 'RELOADING=1' "$msgs"
	[ "$(grep -cx 'READY=1' "$msgs")" -eq 2 ]
	grep -q '^STATUS=' <(sed -n '/^STOPPING=1$/,$p' "$msgs")
	# READY comes before STOPPING.
	[ "$(grep -nx 'READY=1' "$msgs" | head -1 | cut -d: -f1)" -lt \
		"$(grep -nx 'STOPPING=1' "$msgs" | cut -d: -f1)" ]
}

@test "SIGHUP reloads the elevator and the depth from the config file" {
	local ini=$TD_DIR/td.ini
	printf '[queue]\nelevator = deadline\n[tags]\ndepth = 32\n' >"$ini"
	start_tagdiskd --size 256M -c "$ini"
	[ "$(td_status elevator)" = deadline ]
	[ "$(td_status depth)" -eq 32 ]
	printf '[queue]\nelevator = noop\n[tags]\ndepth = 8\n' >"$ini"
	kill -HUP "$TD_PID"
	td_wait_until 60 grep -q 'reload: depth 32 -> 8' "$TD_LOG"
	[ "$(td_status elevator)" = noop ]
	[ "$(td_status depth)" -eq 8 ]
	grep -q 'reload: elevator deadline -> noop' "$TD_LOG"
	# It still serves, through the new settings.
	dd if=/dev/urandom of="$TD_DIR/data" bs=4k count=256 status=none
	dd if="$TD_DIR/data" of="$TD_DISK" bs=4k oflag=direct conv=notrunc status=none
	cmp -n $((256 * 4096)) "$TD_DIR/data" "$TD_DISK"
	stop_tagdiskd
}

@test "SIGHUP with an invalid config keeps the old settings and keeps serving" {
	local ini=$TD_DIR/td.ini
	printf '[queue]\nelevator = noop\n[tags]\ndepth = 16\n' >"$ini"
	start_tagdiskd --size 256M -c "$ini"
	printf '[queue]\nelevator = deadline\n[tags]\ndepth = abc\n' >"$ini"
	kill -HUP "$TD_PID"
	td_wait_until 60 grep -q 'keeping the current settings' "$TD_LOG"
	grep -q 'reload: .*\[tags\] depth = "abc": .*; keeping the current settings' "$TD_LOG"
	[ "$(td_status elevator)" = noop ]
	[ "$(td_status depth)" -eq 16 ]
	# An unknown elevator is refused the same way.
	printf '[queue]\nelevator = nosuch\n' >"$ini"
	kill -HUP "$TD_PID"
	td_wait_until 60 grep -q 'elevator = "nosuch"' "$TD_LOG"
	[ "$(td_status elevator)" = noop ]
	[ "$(td_status depth)" -eq 16 ]
	dd if=/dev/urandom of="$TD_DIR/data" bs=4k count=64 status=none
	dd if="$TD_DIR/data" of="$TD_DISK" bs=4k oflag=direct conv=notrunc status=none
	cmp -n $((64 * 4096)) "$TD_DIR/data" "$TD_DISK"
	stop_tagdiskd
}

@test "SIGHUP in bio mode neither claims nor makes an elevator or depth change" {
	local ini=$TD_DIR/td.ini
	printf '[queue]\nmode = bio\n[tags]\ndepth = 32\n' >"$ini"
	start_tagdiskd --size 256M -c "$ini"
	printf '[queue]\nmode = bio\nelevator = noop\n[tags]\ndepth = 8\n[drive]\nmax_retries = 3\n' >"$ini"
	kill -HUP "$TD_PID"
	td_wait_until 60 grep -q 'reload: command_timeout_ms 30000, max_retries 3' "$TD_LOG"
	run grep -E 'reload: (depth|elevator)' "$TD_LOG"
	[ "$status" -eq 1 ]
	[ "$(td_status mode)" = bio ]
	[ "$(td_status elevator)" = none ]
	[ "$(td_status depth)" -eq 0 ]
	[ "$(td_status max_retries)" -eq 3 ]
	dd if=/dev/urandom of="$TD_DIR/data" bs=4k count=64 status=none
	dd if="$TD_DIR/data" of="$TD_DISK" bs=4k oflag=direct conv=notrunc status=none
	cmp -n $((64 * 4096)) "$TD_DIR/data" "$TD_DISK"
	stop_tagdiskd
}

@test "SIGHUP while fio writes and verifies: settings change under load, no data lost" {
	requires fio
	local ini=$TD_DIR/td.ini i
	printf '[queue]\nelevator = deadline\n[tags]\ndepth = 32\n' >"$ini"
	start_tagdiskd --size 256M -c "$ini"
	(cd "$TD_DIR" && exec fio --name=hup --filename="$TD_DISK" --rw=randwrite --bs=4k \
		--iodepth=32 --ioengine=libaio --direct=1 --size=256M --verify=crc32c \
		--do_verify=1 --verify_fatal=1 --randrepeat=0 --output="$TD_DIR/fio.out") &
	local fio_pid=$!
	for ((i = 0; i < 10; i++)); do
		if ((i % 2)); then
			printf '[queue]\nelevator = deadline\n[tags]\ndepth = 64\n' >"$ini"
		else
			printf '[queue]\nelevator = noop\n[tags]\ndepth = 2\n' >"$ini"
		fi
		kill -HUP "$TD_PID"
		# Signals do not queue: let this reload finish before the next one.
		td_wait_for 60 "reload $((i + 1)) in the log" \
			eval '[ "$(grep -c "reload: depth" "$TD_LOG")" -eq $((i + 1)) ]'
	done
	# The reloads happened while fio was still running.
	kill -0 "$fio_pid"
	wait "$fio_pid"
	grep -q 'err= 0' "$TD_DIR/fio.out"
	[ "$(grep -c 'reload: depth' "$TD_LOG")" -eq 10 ]
	[ "$(td_status depth)" -eq 64 ]
	[ "$(td_status elevator)" = deadline ]
	[ "$(td_status errors)" -eq 0 ]
	stop_tagdiskd
}

@test "logs have one line per event and no per-I/O lines at the default level" {
	start_tagdiskd --size 256M
	local before after
	before=$(wc -l <"$TD_LOG")
	dd if=/dev/urandom of="$TD_DISK" bs=4k count=100 oflag=direct conv=notrunc status=none
	dd if="$TD_DISK" of=/dev/null bs=4k count=100 iflag=direct status=none
	sync "$TD_DISK"
	after=$(wc -l <"$TD_LOG")
	[ "$before" -eq "$after" ]
	stop_tagdiskd
	cat "$TD_LOG" >&2
	# Every line is one whole message: program, level, text.
	run grep -cvE '^tagdiskd: (debug|info|notice|warning|error): [^ ].*' "$TD_LOG"
	[ "$output" -eq 0 ]
	[ "$(grep -c 'serving "' "$TD_LOG")" -eq 1 ]
	[ "$(grep -c 'signal: SIGTERM, stopping' "$TD_LOG")" -eq 1 ]
	[ "$(grep -c 'stopped: ' "$TD_LOG")" -eq 1 ]
	[ "$(wc -l <"$TD_LOG")" -le $((after + 3)) ]
}
