#!/usr/bin/env bats
# tagdiskctl trace --blktrace: the real blkparse and btt (Debian's blktrace
# package) read what it writes, and what they print is the known workload:
# 16 direct 4 KiB writes at known sectors, an fsync, 8 direct reads.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires blkparse btt python3 || return 0
}
setup() { td_setup_dir; }
teardown() {
	[ -n "${TRACER:-}" ] && kill -KILL "$TRACER" 2>/dev/null
	[ -n "${WL_BG:-}" ] && kill -KILL "$WL_BG" 2>/dev/null
	td_teardown
}

# Write i (0..15) goes to sector 2048 + 128 i; read i (0..7) comes back from
# the same sector as write i. Prints "PID COMM" first and "done" after the I/O,
# then stays alive until the file $2 exists (at most 600 s): the trace names the
# process from /proc/PID/comm when it first sees the pid, however busy the
# machine is.
WORKLOAD_PY='
import mmap, os, sys, time
with open("/proc/self/comm") as f:
    print(os.getpid(), f.read().strip(), flush=True)
fd = os.open(sys.argv[1], os.O_RDWR | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
buf.write(b"\xab" * 4096)
for i in range(16):
    assert os.pwritev(fd, [buf], (2048 + 128 * i) * 512) == 4096
os.fsync(fd)
for i in range(8):
    assert os.preadv(fd, [buf], (2048 + 128 * i) * 512) == 4096
os.close(fd)
print("done", flush=True)
end = time.monotonic() + 600
while not os.path.exists(sys.argv[2]) and time.monotonic() < end:
    time.sleep(0.01)
'

# start_tracer FILE [OPTIONS...]: trace into FILE in the background (TRACER is
# tagdiskctl's own pid, for signals); return once the daemon streams to it
# (tagdiskctl says "writing" only after the daemon's ok).
start_tracer() {
	local file=$1
	shift
	"$TAGDISKCTL" -s "$TD_SOCK" trace "$@" --blktrace "$file" 2>"$TD_DIR/tracer.err" &
	TRACER=$!
	td_wait_until 60 grep -q "^tagdiskctl: trace: writing $file" "$TD_DIR/tracer.err"
}

# run_workload: run the workload; return once its I/O is done (the process lingers
# until release_workload).
run_workload() {
	python3 -c "$WORKLOAD_PY" "$TD_DISK" "$TD_DIR/release" >"$TD_DIR/workload.out" &
	WL_BG=$!
	td_wait_until 60 grep -qx done "$TD_DIR/workload.out"
	read -r WL_PID WL_COMM <"$TD_DIR/workload.out"
	[ -n "$WL_PID" ]
}

release_workload() {
	touch "$TD_DIR/release"
	wait "$WL_BG"
	WL_BG=
}

# fit_again W: the workload did not fit in `trace -w W` on this machine (the last read's C
# is not in the trace), so the run proves nothing: clean up for another one, with W tripled
# (in W_NEXT), up to 135 s.
fit_again() {
	echo "# the workload did not fit in trace -w $1 here; again with -w $(($1 * 3))" >&3
	rm -f "$TD_DIR/release" "$TD_DIR"/run.blktrace.* "$TD_DIR/blkparse.out"
	W_NEXT=$(($1 * 3))
	[ "$W_NEXT" -le 135 ]
}

# count_events FILE ACTION RWBS [SECTOR]: blkparse lines of that action and RWBS (and sector).
count_events() {
	awk -v a="$2" -v r="$3" -v s="${4:-}" \
		'$1 == "259,0" && $6 == a && $7 == r && (s == "" || $8 == s) { n++ } END { print n + 0 }' "$1"
}

# check_blkparse OUT: the workload, as blkparse printed it in OUT.
check_blkparse() {
	local out=$1 i a flushes
	for i in $(seq 0 15); do
		for a in Q G I D C; do
			[ "$(count_events "$out" "$a" W $((2048 + 128 * i)))" -eq 1 ] ||
				{ echo "write $i: not one $a event" >&2; return 1; }
		done
	done
	for i in $(seq 0 7); do
		for a in Q G I D C; do
			[ "$(count_events "$out" "$a" R $((2048 + 128 * i)))" -eq 1 ] ||
				{ echo "read $i: not one $a event" >&2; return 1; }
		done
	done
	[ "$(count_events "$out" C W)" -eq 16 ]
	[ "$(count_events "$out" C R)" -eq 8 ]
	flushes=$(count_events "$out" C FN)
	[ "$flushes" -ge 1 ]
	# Every data event is 8 sectors, from the workload's process, named on Q lines.
	awk -v p="$WL_PID" '$1 == "259,0" && ($7 == "W" || $7 == "R") && ($5 != p || $10 != 8) {
		print "unexpected: " $0; bad = 1 } END { exit bad }' "$out"
	[ "$(awk -v c="[$WL_COMM]" '$1 == "259,0" && $6 == "Q" && $11 == c' "$out" | wc -l)" -eq 24 ]
	# blkparse's own summary; a flush is a read of no bytes to it, as on a real disk.
	grep -q 'Writes Queued:  *16,  *64KiB' "$out"
	grep -q 'Writes Completed:  *16,  *64KiB' "$out"
	grep -q "Reads Completed:  *$((8 + flushes)),  *32KiB" "$out"
	grep -q '^Skips: 0 forward' "$out"
	echo "# blkparse: 16 writes, 8 reads, $flushes flush(es), pid $WL_PID [$WL_COMM]" >&3
}

@test "blkparse -i NAME reads NAME.blktrace.0 written by trace --blktrace -w: Q G I D C per I/O, right sectors, sizes, pid" {
	start_tagdiskd --size 64M
	local w=5
	while :; do
		start_tracer "$TD_DIR/run.blktrace.0" -w "$w"
		run_workload
		# -w ends it by itself, with status 0 and a summary.
		wait "$TRACER"
		TRACER=
		release_workload
		# Conclusive once the whole workload came before -w ran out: its last event is there.
		[ "$(cd "$TD_DIR" && blkparse -i run 2>/dev/null |
			count_events - C R $((2048 + 128 * 7)))" -eq 0 ] || break
		fit_again "$w"
		w=$W_NEXT
	done
	grep -Eq "^tagdiskctl: trace: [0-9]+ events \([0-9]+ bytes\) written to $TD_DIR/run.blktrace.0$" \
		"$TD_DIR/tracer.err"

	(cd "$TD_DIR" && blkparse -i run) >"$TD_DIR/blkparse.out"
	check_blkparse "$TD_DIR/blkparse.out"
	# The file is records of 48 bytes plus one 64-byte process note per pid: here one.
	local events
	events=$(awk '/^tagdiskctl: trace:.*written/ { print $3 }' "$TD_DIR/tracer.err")
	[ "$(stat -c %s "$TD_DIR/run.blktrace.0")" -eq $((events * 48 + 64)) ]
	[ "$events" -eq "$(awk '$1 == "259,0"' "$TD_DIR/blkparse.out" | wc -l)" ]
	stop_tagdiskd
}

@test "btt reads blkparse -d output of a trace ended by SIGINT: Q2C and D2C over every I/O" {
	local out rc
	start_tagdiskd --size 64M
	start_tracer "$TD_DIR/run.blktrace.0"
	run_workload
	# The file is pushed out whenever the stream goes idle: wait for the last read's C.
	td_wait_until 60 bash -c "cd '$TD_DIR' && blkparse -i run 2>/dev/null |
		awk '\$6 == \"C\" && \$7 == \"R\" && \$8 == $((2048 + 128 * 7))' | grep -q ."
	release_workload
	kill -INT "$TRACER"
	# Not `run wait`: run's subshell cannot wait for this shell's child.
	rc=0
	wait "$TRACER" || rc=$?
	TRACER=
	[ "$rc" -eq 0 ]
	grep -q '^tagdiskctl: trace: [0-9]* events' "$TD_DIR/tracer.err"

	(cd "$TD_DIR" && blkparse -i run -d run.bin) >"$TD_DIR/blkparse.out"
	check_blkparse "$TD_DIR/blkparse.out"
	# btt leaves per-device .dat files in its working directory.
	out=$(cd "$TD_DIR" && btt -i run.bin)
	echo "$out" | sed -n '1,12p' | sed 's/^/# /' >&3
	# btt leaves out the zero-byte flush: N is the 24 data I/Os at each stage.
	local stage
	for stage in Q2G G2I I2D D2C Q2C; do
		echo "$out" | awk -v s="$stage" '$1 == s { n = $5 } END { exit !(n == 24) }' ||
			{ echo "$stage: N is not 24" >&2; echo "$out" >&2; return 1; }
	done
	stop_tagdiskd
}

@test "trace -o - streams into blkparse -i - as it happens" {
	start_tagdiskd --size 64M
	local w=5
	while :; do
		td_ctl trace -w "$w" -o - 2>"$TD_DIR/tracer.err" | blkparse -i - >"$TD_DIR/blkparse.out" &
		TRACER=$!
		td_wait_until 60 grep -q '^tagdiskctl: trace: writing -' "$TD_DIR/tracer.err"
		run_workload
		wait "$TRACER"
		TRACER=
		release_workload
		# Conclusive once the whole workload came before -w ran out: its last event is there.
		[ "$(count_events "$TD_DIR/blkparse.out" C R $((2048 + 128 * 7)))" -eq 0 ] || break
		fit_again "$w"
		w=$W_NEXT
	done
	check_blkparse "$TD_DIR/blkparse.out"
	stop_tagdiskd
}

@test "trace options are checked: -w needs a positive number, -o a file that can be created" {
	start_tagdiskd --size 64M
	run td_ctl trace -w 0 -o "$TD_DIR/x.blktrace.0"
	[ "$status" -eq 2 ]
	[[ "$output" == *'-w: "0" is not a positive number of seconds'* ]]
	run td_ctl trace -w soon
	[ "$status" -eq 2 ]
	run td_ctl trace -o
	[ "$status" -eq 2 ]
	[[ "$output" == *"needs a value"* ]]
	run td_ctl trace --blktrace "$TD_DIR/x.blktrace.0" extra
	[ "$status" -eq 2 ]
	run td_ctl trace -i 1
	[ "$status" -eq 2 ]
	run td_ctl trace -w 1 -o "$TD_DIR/no/such/dir/x.blktrace.0"
	[ "$status" -eq 2 ]
	[[ "$output" == *"cannot create $TD_DIR/no/such/dir/x.blktrace.0"* ]]
	# -w alone bounds the readable trace as well.
	run --separate-stderr td_ctl trace -w 0.5
	[ "$status" -eq 0 ]
	stop_tagdiskd
}
