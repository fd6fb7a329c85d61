#!/usr/bin/env bats
# The nbd backend end to end: nbdkit's file plugin serves a sparse file on a
# Unix socket and tagdiskd serves that export through FUSE ([drive] backend =
# nbd). fio verifies every block it writes through the disk file, and the
# served file must then hold what the disk file shows; ext4 on a loop device
# over the disk file stays clean; neither fio nor the drive sees an error when
# nbdkit is killed and started again under load, or when the drive is reset
# several times a second; and a write the server holds past the backend's
# answer limit still lands before a newer write to the same sectors. The work
# is counted, not timed.
#
# Without nbdkit every test skips with one line starting "NBD:"; with CI=true
# the runner counts that skip as a failure (tests/deps.sh installs nbdkit).

load helpers
load nbd_helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires_backend nbd || return 0
	command -v nbdkit >/dev/null || { td_skip_file "NBD: nbdkit is not installed (tests/deps.sh)"; return 0; }
	requires fio losetup mkfs.ext4 e2fsck fstrim cmp || return 0
}

setup() {
	td_setup_dir
	nbd_setup
}
teardown() { nbd_teardown; }

VERIFY=(--direct=1 --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0)

# run_fio NAME BYTES FIO_OPTIONS...: one fio job; it wrote BYTES, read all of them back to
# verify them, and had no error.
run_fio() {
	local name=$1 bytes=$2
	shift 2
	cd "$TD_DIR" || return 1
	run --separate-stderr timeout 900 fio --name="$name" --output-format=json \
		--output="$TD_DIR/$name.json" --verify_state_save=0 "$@"
	echo "fio status $status; stderr: $stderr" >&2
	[ "$status" -eq 0 ]
	fio_check "$name" "$bytes"
}

# fio_check NAME BYTES: the JSON of job NAME shows no error, BYTES written and as many read
# back to verify them.
fio_check() {
	python3 - "$TD_DIR/$1.json" "$2" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
r = json.loads(text[text.index('{'):])
want = int(sys.argv[2])
for j in r['jobs']:
    w, rd = j['write']['io_bytes'], j['read']['io_bytes']
    print('# %s: err=%d write=%d read(verify)=%d' % (j['jobname'], j['error'], w, rd),
          file=sys.stderr)
    assert j['error'] == 0, j['error']
    assert w == want, (w, want)
    assert rd == want, (rd, want)
PY
}

# fio_verify_bg NAME: 4 KiB random writes at QD 32 over the whole disk, each block checked
# at most 1024 writes later and the rest at the end, in the background (pid in FIO_PID).
fio_verify_bg() {
	(cd "$TD_DIR" && exec fio --name="$1" --filename="$TD_DISK" --rw=randwrite --bs=4k \
		--iodepth=32 --ioengine=libaio --size=256M --verify_backlog=1024 "${VERIFY[@]}" \
		--verify_state_save=0 --output-format=json --output="$TD_DIR/$1.json") \
		>"$TD_DIR/$1.out" 2>&1 3>&- &
	FIO_PID=$!
	BG_PIDS="$BG_PIDS $FIO_PID"
}

# fio_wait NAME: wait for the background fio, which must have passed.
fio_wait() {
	local rc=0
	wait "$FIO_PID" || rc=$?
	echo "fio $1: status $rc; $(cat "$TD_DIR/$1.out")" >&2
	[ "$rc" -eq 0 ]
	fio_check "$1" $((256 * 1024 * 1024))
}

# writes_at_least N: the drive has done at least N writes.
writes_at_least() {
	local n
	n=$(td_stats writes)
	echo "$n writes"
	[ "$n" -ge "$1" ]
}

@test "fio verify through an NBD export, one connection: 4k randwrite QD32; the served file holds the disk's bytes" {
	start_nbdkit
	start_nbd_daemon 1
	run_fio randwrite4k $((256 * 1024 * 1024)) --filename="$TD_DISK" --rw=randwrite --bs=4k \
		--iodepth=32 --ioengine=libaio --size=256M "${VERIFY[@]}"
	[ "$(td_status errors)" -eq 0 ]
	same_bytes
	stop_tagdiskd
}

@test "fio verify through an NBD export, four connections: 1M sequential and 4k randwrite QD32" {
	start_nbdkit
	start_nbd_daemon 4
	run_fio seqwrite1m $((256 * 1024 * 1024)) --filename="$TD_DISK" --rw=write --bs=1M \
		--iodepth=8 --ioengine=libaio --size=256M "${VERIFY[@]}"
	run_fio randwrite4k $((64 * 1024 * 1024)) --filename="$TD_DISK" --rw=randwrite --bs=4k \
		--iodepth=32 --ioengine=libaio --size=64M "${VERIFY[@]}"
	[ "$(td_status errors)" -eq 0 ]
	same_bytes
	stop_tagdiskd
	# Four connections, as asked.
	[ "$(grep -c 'nbd: .*4 connection(s)' "$TD_LOG")" -eq 1 ]
}

@test "ext4 on a loop device over an NBD export: fsck clean, data back, fstrim punches holes in the served file" {
	local dev fs=$TD_DIR/fs holes_before holes_after
	start_nbdkit
	start_nbd_daemon 2
	dev=$(td_losetup --direct-io=on)
	mkfs.ext4 -q -F "$dev"
	mkdir "$fs"
	mount "$dev" "$fs"
	head -c 64M /dev/urandom >"$TD_DIR/data"
	cp "$TD_DIR/data" "$fs/data"
	cp -a /usr/include/linux "$fs/linux"
	sync -f "$fs"
	umount "$fs"
	run e2fsck -fn "$dev"
	echo "$output" >&2
	[ "$status" -eq 0 ]

	mount "$dev" "$fs"
	cmp "$TD_DIR/data" "$fs/data"
	diff -r /usr/include/linux "$fs/linux"
	# Discard reaches the server: the freed blocks become holes in the served file.
	holes_before=$(td_hole_bytes "$NBD_IMG" 0 $((256 * 1024 * 1024)))
	rm "$fs/data"
	sync -f "$fs"
	fstrim "$fs"
	holes_after=$(td_hole_bytes "$NBD_IMG" 0 $((256 * 1024 * 1024)))
	echo "holes in the served file: $holes_before -> $holes_after" >&2
	[ "$holes_after" -ge $((holes_before + 48 * 1024 * 1024)) ]
	umount "$fs"
	run e2fsck -fn "$dev"
	[ "$status" -eq 0 ]
	losetup -d "$dev"
	[ "$(td_status errors)" -eq 0 ]
	stop_tagdiskd
}

@test "nbdkit killed with -9 and started again during fio verify: the backend reconnects, no error" {
	start_nbdkit
	start_nbd_daemon 2
	fio_verify_bg killed
	td_wait_for 300 "fio to have written 8192 blocks" writes_at_least 8192 >&2
	stop_nbdkit KILL
	td_wait_for 60 "the daemon to see the server gone" grep -q 'lost; reconnecting' "$TD_LOG"
	start_nbdkit
	fio_wait killed
	grep 'back after' "$TD_LOG" >&2
	[ "$(td_status errors)" -eq 0 ]
	same_bytes
	stop_tagdiskd
}

@test "tagdiskctl reset every 100-200 ms during fio verify on an NBD export: no error, nothing lost" {
	local round=0 resets
	start_nbdkit
	start_nbd_daemon 2
	reset_loop 3>&- &
	BG_PIDS="$BG_PIDS $!"
	# Whole verified fio runs until at least 20 resets happened during them (at most 20 runs).
	while :; do
		round=$((round + 1))
		fio_verify_bg reset-$round
		fio_wait reset-$round
		resets=$(td_stats resets)
		[ "$resets" -lt 20 ] || break
		[ "$round" -lt 20 ] || { echo "only $resets resets in $round fio runs" >&2; false; }
	done
	touch "$TD_DIR/stop"
	wait $BG_PIDS 2>/dev/null || true
	BG_PIDS=
	echo "# $round fio runs, $resets resets, $(td_stats requeued) requeued" >&3
	run ! grep FAILED "$TD_DIR/resets.log"
	[ "$(td_status errors)" -eq 0 ]
	[ "$(td_status in_flight)" -eq 0 ]
	same_bytes
	stop_tagdiskd
}


@test "a reset while the server is stopped: the sent writes go stale, nothing new starts until they return, fio verify passes" {
	local before sent
	start_nbdkit
	start_nbd_daemon 1
	fio_verify_bg fenced
	td_wait_for 300 "fio to have written 4096 blocks" writes_at_least 4096 >&2
	stop_nbdkit_pause STOP
	td_wait_for 60 "writes outstanding at the stopped server" backend_ops_at_least 1 >&2
	before=$(td_status fences)
	run "$TAGDISKCTL" -s "$TD_SOCK" reset
	assert_success
	# Every operation the server had became stale; the requeued commands wait behind them.
	sent=$(td_status stale_ops)
	[ "$sent" -ge 1 ]
	[ "$(td_status backend_ops)" -eq 0 ]
	[ "$(td_status fences)" -eq $((before + 1)) ]
	run "$TAGDISKCTL" -s "$TD_SOCK" status
	assert_output --regexp "backend io +0 outstanding, $sent stale: new commands wait"
	# Still fenced a moment later: nothing was sent in the meantime.
	td_wait_for 60 "the requeued commands to wait at the drive" drive_holds_commands >&2
	[ "$(td_status backend_ops)" -eq 0 ]
	stop_nbdkit_pause CONT
	td_wait_for 120 "the stale operations to return" stale_ops_none >&2
	fio_wait fenced
	echo "# $sent writes went stale at the reset; fio verify passed" >&3
	[ "$(td_status errors)" -eq 0 ]
	same_bytes
	stop_tagdiskd
}

# bg_dd NAME FILE SEEK: one 4 KiB O_DIRECT write of FILE at block SEEK of the disk, in the
# background; its exit status goes to $TD_DIR/NAME.rc, its messages to $TD_DIR/NAME.err.
bg_dd() {
	(
		rc=0
		dd if="$2" of="$TD_DISK" bs=4k seek="$3" count=1 oflag=direct conv=notrunc \
			status=none 2>"$TD_DIR/$1.err" || rc=$?
		echo "$rc" >"$TD_DIR/$1.rc"
	) 3>&- &
	BG_PIDS="$BG_PIDS $!"
}

# dd_done NAME: the background write NAME has ended.
dd_done() {
	[ -s "$TD_DIR/$1.rc" ]
}

# newer_settled: the newer write has ended, or the backend is draining the silent connection.
newer_settled() {
	dd_done newer || grep -q 'draining it' "$TD_LOG"
}

@test "a write the server holds past the answer limit is not sent again: it lands before a newer write to the same sectors" {
	# The old write fails at once (its command times out, no retry) but stays with the
	# server; the newer one, with no timeout left, must wait for it behind the fence.
	head -c 4096 /dev/urandom >"$TD_DIR/old"
	printf HOLD | dd of="$TD_DIR/old" conv=notrunc status=none
	head -c 4096 /dev/urandom >"$TD_DIR/newer"
	printf NEWW | dd of="$TD_DIR/newer" conv=notrunc status=none
	start_nbdkit_holding
	NBD_DRIVE_INI=$'command_timeout_ms = 1000\nmax_retries = 0'
	TAGDISK_NBD_ANSWER_LIMIT_MS=2000 start_nbd_daemon 1

	bg_dd old "$TD_DIR/old" 256
	td_wait_for 60 "the server to hold the old write" test -d "$TD_DIR/hold/held"
	td_wait_for 60 "the old write to time out" dd_done old
	[ "$(cat "$TD_DIR/old.rc")" -ne 0 ]
	grep -q 'Input/output error' "$TD_DIR/old.err"
	[ "$(td_status stale_ops)" -eq 1 ]
	NBD_DRIVE_INI=$'command_timeout_ms = 0\nmax_retries = 0'
	nbd_write_ini 1
	kill -HUP "$TD_PID"
	td_wait_until 60 grep -q 'reload: command_timeout_ms 0' "$TD_LOG"

	bg_dd newer "$TD_DIR/newer" 256
	td_wait_for 60 "the backend to give up waiting for an answer" \
		grep -q 'no answer for 2 s' "$TD_LOG"
	td_wait_for 120 "the newer write to end, or the backend to drain" newer_settled
	nbd_release
	td_wait_for 60 "the newer write to end" dd_done newer
	echo "server's writes: $(tr '\n' ' ' <"$TD_DIR/hold/pwrites")" >&2
	grep . "$TD_DIR/newer.err" >&2 || true
	[ "$(cat "$TD_DIR/newer.rc")" -eq 0 ]
	# The served file ends with the newer data, and the old write reached it once, first.
	cmp "$TD_DIR/newer" <(dd if="$NBD_IMG" bs=4k skip=256 count=1 status=none)
	[ "$(cat "$TD_DIR/hold/pwrites")" = "1048576 HOLD
1048576 NEWW" ]
	grep -q 'drained after' "$TD_LOG"
	[ "$(td_status stale_ops)" -eq 0 ]
	stop_tagdiskd
}

backend_ops_at_least() {
	local n
	n=$(td_status backend_ops)
	echo "$n outstanding"
	[ "$n" -ge "$1" ]
}

stale_ops_none() {
	[ "$(td_status stale_ops)" -eq 0 ]
}

# drive_holds_commands: requests are in flight at the queue but none at the backend.
drive_holds_commands() {
	local f b
	f=$(td_status in_flight)
	b=$(td_status backend_ops)
	echo "in_flight $f, backend_ops $b"
	[ "$f" -gt 0 ] && [ "$b" -eq 0 ]
}

# stop_nbdkit_pause STOP|CONT: freeze or thaw the server without losing its connections.
stop_nbdkit_pause() {
	kill -"$1" "$NBD_PID"
}

@test "the daemon killed with -9 four times during fio verify on an NBD export is taken over: no error" {
	start_nbdkit
	nbd_write_ini 1
	td_harness_start -c "$TD_DIR/nbd.ini"
	[ "$(td_status backend)" = nbd ]
	(cd "$TD_DIR" && timeout 900 fio --name=takeover --output-format=json \
		--output="$TD_DIR/takeover.json" --verify_state_save=0 --filename="$TD_DISK" \
		--rw=randwrite --bs=4k --iodepth=32 --ioengine=libaio --size=64M "${VERIFY[@]}" \
		>/dev/null 2>&1; echo $? >"$TD_DIR/fio.rc") &
	local fio=$! i
	BG_PIDS=$fio
	for i in 1 2 3 4; do
		td_wait_until 120 test -s "$TD_DIR/events"
		python3 -c 'import random, time; time.sleep(random.uniform(0.2, 0.8))'
		td_harness_kill9 >/dev/null
	done
	wait "$fio"
	BG_PIDS=
	[ "$(cat "$TD_DIR/fio.rc")" -eq 0 ]
	fio_check takeover $((64 * 1024 * 1024))
	[ "$(grep -c 'took over' "$TD_LOG")" -eq 4 ]
	[ "$(td_status backend)" = nbd ]
	same_bytes
}
