#!/usr/bin/env bats
# The write log (docs/tagdisk-replay.8, docs/crash-testing.md): random fio writes with
# flushes, replayed to every flush point, compared with a copy of the disk taken at that
# flush, in rq, mq and bio modes, with a volatile write cache and with 4 KiB blocks; the log, mark and status commands
# and their errors; a log stays valid through kill -9 (every fsync the writer saw returned is
# in it and counted, even with the super block's writes slowed down by wlog_slow_super.c) and
# ends with the final flush after SIGTERM; and tagdisk-replay refuses bad input
# with one line, writing nothing.

load helpers
bats_require_minimum_version 1.5.0

setup_file() { requires_fuse && requires fio jq xfs_io || return 0; }
setup() {
	td_setup_dir
	REPLAY=$TD_BUILD/tagdisk-replay
}
teardown() {
	[ -n "${WRITER:-}" ] && kill -KILL "$WRITER" 2>/dev/null
	td_teardown
}

# fsync the disk file (sync FILE): one flush, and nothing else, reaches the drive.
disk_fsync() {
	sync "$TD_DISK"
}

# The admin status, and one field of its log object.
log_field() {
	jq -r ".log.$1" <<<"$STATUS"
}

# flush_points STEPS SIZE OPTIONS...: start a daemon on a fresh (zero) disk of SIZE with
# the log recording, then STEPS times: random writes (fio at queue depth 16, and now and
# then an O_DSYNC write, a hole punched, a range zeroed), one fsync, a copy of the disk. The
# disk is idle from the fsync to the end of the copy, so the copy is the disk exactly as it
# was at that flush. Then replay the log onto zeroes, comparing at every flush.
flush_points() {
	local steps=$1 size=$2 i
	shift 2
	start_tagdiskd --size "$size" "$@"
	truncate -s "$size" "$TD_DIR/base.img"
	run td_ctl log start "$TD_DIR/fio.wlog"
	assert_success
	for ((i = 1; i <= steps; i++)); do
		fio --name="step$i" --filename="$TD_DISK" --rw=randwrite --bsrange=4k-64k \
			--ioengine=libaio --direct=1 --iodepth=16 --number_ios=150 --size="$size" \
			--randseed="$i" --output=/dev/null
		case $((i % 3)) in
		0) dd if=/dev/urandom of="$TD_DISK" bs=8k count=2 seek=$((i * 3)) conv=notrunc \
			oflag=direct,dsync status=none ;;
		1) xfs_io -c "fpunch $((i * 1048576 % (8 * 1048576))) 262144" "$TD_DISK" ;;
		2) xfs_io -c "fzero $((i * 1048576 % (8 * 1048576) + 524288)) 65536" "$TD_DISK" ;;
		esac
		disk_fsync
		dd if="$TD_DISK" of="$TD_DIR/copy.$i" bs=1M iflag=direct status=none
	done
	run td_ctl --json log stop
	assert_success
	stop_tagdiskd
	# Each step's one flush, and no other.
	run "$REPLAY" --log "$TD_DIR/fio.wlog" -v
	assert_success
	[ "$(grep -c 'flags 0x1(FLUSH)' <<<"$output")" -eq "$steps" ]
	grep -q 'FUA' <<<"$output"
	grep -q 'DISCARD' <<<"$output"
	# A flush point's state is exactly the copy taken there.
	run "$REPLAY" --log "$TD_DIR/fio.wlog" --replay "$TD_DIR/base.img" --check flush \
		--fsck "cmp \"\$TD_REPLAY_TARGET\" \"$TD_DIR/copy.\$TD_REPLAY_FLUSHES\""
	assert_success
	assert_output --partial "$steps checks passed"
	# And so is a state replayed alone, from zeroes to the third flush.
	truncate -s 0 "$TD_DIR/base.img"
	truncate -s "$size" "$TD_DIR/base.img"
	end=$("$REPLAY" --log "$TD_DIR/fio.wlog" --find --next-flush --start-entry 0)
	mid=$("$REPLAY" --log "$TD_DIR/fio.wlog" --find --next-flush --start-entry $((${end%@*} + 1)))
	run "$REPLAY" --log "$TD_DIR/fio.wlog" --replay "$TD_DIR/base.img" --limit $((${mid%@*} + 1))
	assert_success
	cmp "$TD_DIR/base.img" "$TD_DIR/copy.2"
}

@test "fio writes with flushes, rq mode: replayed to each flush point, the disk is the copy taken there" {
	flush_points 5 16M --mode rq
}

@test "the same in mq mode, two hardware queues and workers" {
	printf '[queue]\nnr_hw_queues = 2\n[drive]\nworkers = 2\n' >"$TD_DIR/mq.ini"
	flush_points 3 16M --mode mq -c "$TD_DIR/mq.ini"
}

@test "the same in bio mode" {
	flush_points 3 16M --mode bio
}

@test "the same with a volatile write cache: what the drive acknowledged into its cache is logged" {
	printf '[drive]\nwrite_cache = volatile\ncache_size = 4M\n' >"$TD_DIR/volatile.ini"
	flush_points 3 16M -c "$TD_DIR/volatile.ini"
}

@test "the same with 4 KiB logical blocks: the log's sectors are 4 KiB" {
	printf '[disk]\nlogical_block_size = 4096\n' >"$TD_DIR/4k.ini"
	flush_points 3 16M -c "$TD_DIR/4k.ini"
	run "$REPLAY" --log "$TD_DIR/fio.wlog"
	assert_output --partial "sectorsize=4096"
}

@test "log, mark and status: paths, entry numbers, counts, and each refusal in one line" {
	start_tagdiskd --size 16M
	run td_ctl mark early
	assert_failure 1
	assert_output "tagdiskctl: mark: no write log is recording (log start FILE first)"
	run td_ctl log
	assert_success
	assert_output "log: off"
	run td_ctl log stop
	assert_failure 1
	assert_output "tagdiskctl: log stop: no write log is recording"
	# A relative FILE is this directory's.
	cd "$TD_DIR"
	run td_ctl log start rel.wlog
	assert_success
	assert_output --partial "log: on, $TD_DIR/rel.wlog, 0 entries"
	run td_ctl log start "$TD_DIR/other.wlog"
	assert_failure 1
	assert_output --partial "already recording to \"$TD_DIR/rel.wlog\""
	dd if=/dev/urandom of="$TD_DISK" bs=4k count=3 oflag=direct conv=notrunc status=none
	disk_fsync
	run td_ctl mark after-fsync
	assert_success
	assert_output "mark after-fsync: entry 4"
	STATUS=$(td_ctl --json status)
	[ "$(log_field entries)" = 5 ]
	[ "$(log_field writes)" = 3 ]
	[ "$(log_field flushes)" = 1 ]
	[ "$(log_field marks)" = 1 ]
	[ "$(log_field bytes)" = $((512 + 3 * 4608 + 2 * 512)) ]
	[ "$(log_field path)" = "$TD_DIR/rel.wlog" ]
	run td_ctl status
	assert_output --regexp "write log +on, $TD_DIR/rel.wlog, 5 entries \(3 writes, 0 discards, 1 flushes, 0 FUA, 1 marks\)"
	run td_ctl mark "$(printf 'x%.0s' $(seq 480))"
	assert_failure 1
	assert_output "tagdiskctl: mark: a name is 1..479 bytes"
	run td_ctl log stop
	assert_success
	assert_output "log: stopped $TD_DIR/rel.wlog: 5 entries, 15.0 KiB"
	run "$REPLAY" --log "$TD_DIR/rel.wlog" --find --end-mark after-fsync
	assert_output "4@30"
	# Files the daemon must not write: on its own mount, the image, a directory.
	run td_ctl log start "$TD_MNT/x.wlog"
	assert_failure 1
	assert_output --partial "is on the disk's own mount"
	run td_ctl log start "$TD_IMG"
	assert_failure 1
	assert_output --partial "is the disk's image"
	run td_ctl log start "$TD_DIR"
	assert_failure 1
	assert_output --partial "not a regular file"
	run td_ctl log start "$TD_DIR/no/such/dir/x.wlog"
	assert_failure 1
	assert_output --partial "No such file or directory"
	run td_admin "log start relative.wlog"
	assert_output --partial "is not an absolute path"
	run td_admin "log frobnicate"
	assert_output '{"ok":false,"error":"usage: log [start FILE | stop]"}'
	STATUS=$(td_ctl --json status)
	[ "$(log_field state)" = off ]
	stop_tagdiskd
}

@test "[log] path in the configuration: recorded from the start; after SIGTERM the log ends with the last flush and replays to the image" {
	printf '[log]\npath = %s\n' "$TD_DIR/start.wlog" >"$TD_DIR/log.ini"
	start_tagdiskd --size 32M -c "$TD_DIR/log.ini"
	STATUS=$(td_ctl --json status)
	[ "$(log_field state)" = on ]
	fio --name=w --filename="$TD_DISK" --rw=randwrite --bsrange=4k-32k --ioengine=libaio \
		--direct=1 --iodepth=8 --number_ios=300 --size=32M --output=/dev/null
	stop_tagdiskd
	grep -q 'write log: stopped' "$TD_LOG"
	run "$REPLAY" --log "$TD_DIR/start.wlog" -v
	assert_success
	# No flush before the stop's own: that is the last entry.
	[ "$(grep -c 'FLUSH' <<<"$output")" -eq 1 ]
	assert_line --index $((${#lines[@]} - 1)) --regexp 'flags 0x1\(FLUSH\)$'
	truncate -s 32M "$TD_DIR/zero.img"
	run "$REPLAY" --log "$TD_DIR/start.wlog" --replay "$TD_DIR/zero.img"
	assert_success
	cmp "$TD_DIR/zero.img" "$TD_IMG"
}

@test "[log] path inside the mountpoint, or in a missing directory, is a configuration error" {
	printf '[log]\npath = %s/x.wlog\n' "$TD_MNT" >"$TD_DIR/in.ini"
	printf '[log]\npath = %s/none/x.wlog\n' "$TD_DIR" >"$TD_DIR/none.ini"
	run_tagdiskd --image "$TD_IMG" --size 16M --mount "$TD_MNT" --socket "$TD_SOCK" \
		-c "$TD_DIR/in.ini"
	[ "$status" -eq 2 ]
	[[ $stderr == *"[log] path = \"$TD_MNT/x.wlog\": inside the mountpoint"* ]]
	run_tagdiskd --image "$TD_IMG" --size 16M --mount "$TD_MNT" --socket "$TD_SOCK" \
		-c "$TD_DIR/none.ini"
	[ "$status" -eq 2 ]
	[[ $stderr == *"directory \"$TD_DIR/none\" does not exist"* ]]
	[ ! -e "$TD_IMG" ]
}

# The writer: record i (4 KiB at i * 4096, bytes derived from i), fsync, then print i.
WRITER_PY='
import hashlib, os, sys
disk = sys.argv[1]
fd = os.open(disk, os.O_RDWR)
for i in range(1 << 30):
    seed = hashlib.sha256(b"%d" % i).digest()
    os.pwrite(fd, (seed * 128)[:4096], (i % 4096) * 4096)
    os.fsync(fd)
    print(i, flush=True)
'

# Start WRITER_PY on the disk while a log records into $TD_DIR/$1.wlog, kill -9 the daemon
# once $2 fsyncs have returned, replay the log (with the replay options after $2) onto a zeroed
# image and check that it holds the last 4096 records the writer saw fsynced.
kill_writer_and_replay() {
	local name=$1 fsyncs=$2 last
	shift 2
	truncate -s 16M "$TD_DIR/zero.img"
	run td_ctl log start "$TD_DIR/$name.wlog"
	assert_success
	python3 -c "$WRITER_PY" "$TD_DISK" >"$TD_DIR/acked" 2>/dev/null &
	WRITER=$!
	td_wait_for 120 "$fsyncs fsyncs acknowledged" \
		eval '[ "$(wc -l <"$TD_DIR/acked")" -ge '"$fsyncs"' ]' >/dev/null
	td_kill9
	wait "$WRITER" || true
	WRITER=
	last=$(tail -n 1 "$TD_DIR/acked")
	run "$REPLAY" --log "$TD_DIR/$name.wlog" --replay "$TD_DIR/zero.img" "$@"
	assert_success
	python3 - "$TD_DIR/zero.img" "$last" <<'PY'
import hashlib, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
last = int(sys.argv[2])
for i in range(max(0, last - 4095), last + 1):
    want = (hashlib.sha256(b"%d" % i).digest() * 128)[:4096]
    assert os.pread(fd, 4096, (i % 4096) * 4096) == want, "record %d (fsynced) missing" % i
print("records up to %d intact" % last, file=sys.stderr)
PY
}

@test "kill -9 in the middle of fsyncing writes: the log replays, and holds every write whose fsync returned" {
	start_tagdiskd --size 16M
	kill_writer_and_replay kill 300 --check flush --fsck true
}

@test "kill -9 right after fsyncs return, the super block's writes slowed down: every fsynced write is counted" {
	# wlog_slow_super.c: each write of the log's super block waits 100 ms first, so a count
	# that lags its flush would be caught by the kill.
	cc -shared -fPIC -o "$TD_DIR/slow_super.so" "$BATS_TEST_DIRNAME/wlog_slow_super.c" -ldl
	# An ASan build checks that its runtime comes first; the shim only wraps pwritev.
	TD_WRAPPER="env LD_PRELOAD=$TD_DIR/slow_super.so WLOG_SUPER_DELAY_US=100000
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		start_tagdiskd --size 16M
	kill_writer_and_replay slow 20
}

@test "tagdisk-replay refuses bad input in one line, exit 2, and writes nothing" {
	start_tagdiskd --size 16M
	run td_ctl log start "$TD_DIR/good.wlog"
	dd if=/dev/urandom of="$TD_DISK" bs=64k count=4 oflag=direct conv=notrunc status=none
	disk_fsync
	run td_ctl log stop
	stop_tagdiskd
	dd if=/dev/urandom of="$TD_DIR/target.img" bs=1M count=16 status=none
	cp "$TD_DIR/target.img" "$TD_DIR/before.img"
	size=$(stat -c %s "$TD_DIR/good.wlog")
	head -c $((size - 1000)) "$TD_DIR/good.wlog" >"$TD_DIR/truncated.wlog"
	{ printf 'NOTALOG!'; tail -c +9 "$TD_DIR/good.wlog"; } >"$TD_DIR/magic.wlog"
	truncate -s 8M "$TD_DIR/small.img"

	run --separate-stderr "$REPLAY" --log "$TD_DIR/truncated.wlog" --replay "$TD_DIR/target.img"
	[ "$status" -eq 2 ]
	[[ $stderr == *"truncated.wlog is truncated: entry 3 at byte "*" has 65536 bytes of data and the file ends at byte $((size - 1000))" ]]
	[ "$(wc -l <<<"$stderr")" -eq 1 ]
	run --separate-stderr "$REPLAY" --log "$TD_DIR/magic.wlog" --replay "$TD_DIR/target.img"
	[ "$status" -eq 2 ]
	[[ $stderr == *"magic.wlog: not a write log (magic 0x2147"* ]]
	run --separate-stderr "$REPLAY" --log "$TD_DIR/good.wlog" --replay "$TD_DIR/small.img"
	[ "$status" -eq 2 ]
	[[ $stderr == *"small.img is 8388608 bytes, but the log is of a disk of 16777216 bytes" ]]
	# A log without the disk's size (as the kernel writes it): the entries' reach decides.
	python3 - "$TD_DIR/good.wlog" "$TD_DIR/kernel.wlog" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[32:48] = bytes(16)
open(sys.argv[2], "wb").write(b)
PY
	truncate -s 128k "$TD_DIR/tiny.img"
	run --separate-stderr "$REPLAY" --log "$TD_DIR/kernel.wlog" --replay "$TD_DIR/tiny.img"
	[ "$status" -eq 2 ]
	[[ $stderr == *"tiny.img is 131072 bytes, but entry 2 writes up to byte 196608" ]]
	[ "$(stat -c %s "$TD_DIR/tiny.img")" -eq 131072 ]
	run --separate-stderr "$REPLAY" --log "$TD_DIR/good.wlog" --replay "$TD_DIR/target.img" \
		--end-mark nope
	[ "$status" -eq 2 ]
	[[ $stderr == *'no mark "nope" after entry 0 (--end-mark)' ]]
	run --separate-stderr "$REPLAY" --log "$TD_DIR/good.wlog" --check flush
	[ "$status" -eq 2 ]
	[[ $stderr == *"--fsck CMD goes with --check or --crash-states, and they need it" ]]
	run --separate-stderr "$REPLAY" --log "$TD_DIR/good.wlog" --limit x
	[ "$status" -eq 2 ]
	[[ $stderr == *'--limit "x": not a number' ]]
	cmp "$TD_DIR/target.img" "$TD_DIR/before.img"
	[ "$(tr -d '\0' <"$TD_DIR/small.img" | wc -c)" -eq 0 ]
	# The untouched log replays.
	run "$REPLAY" --log "$TD_DIR/kernel.wlog" --replay "$TD_DIR/target.img"
	assert_success
}

@test "a powerfail while logging marks the log where the disk lost its unflushed writes" {
	printf '[drive]\nwrite_cache = volatile\n' >"$TD_DIR/volatile.ini"
	start_tagdiskd --size 16M -c "$TD_DIR/volatile.ini"
	run td_ctl log start "$TD_DIR/pf.wlog"
	assert_success
	dd if=/dev/urandom of="$TD_DISK" bs=4k count=4 oflag=direct conv=notrunc status=none
	disk_fsync
	dd if=/dev/urandom of="$TD_DISK" bs=4k count=2 seek=8 oflag=direct conv=notrunc status=none
	run td_ctl --json powerfail keep=0
	assert_success
	# Entries 0-3 the writes, 4 the flush, 5-6 the unflushed writes, 7 the mark.
	[ "$(jq -r .log_entry <<<"$output")" = 7 ]
	[ "$(jq -r .lost_writes <<<"$output")" = 2 ]
	run td_ctl log stop
	assert_success
	run "$REPLAY" --log "$TD_DIR/pf.wlog" --find --end-mark tagdisk-powerfail
	assert_output "7@57"
	stop_tagdiskd
}
