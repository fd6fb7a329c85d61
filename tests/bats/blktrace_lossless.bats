#!/usr/bin/env bats
# tagdiskctl trace --blktrace keeps up with the disk: 5 s of fio 4k randrw at
# queue depth 32, as fast as this machine goes, traced with the default
# buffers; the real blkparse reads every event back. Asserts counts and data,
# never speed: the same test passes on a machine three times slower.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires blkparse fio python3 || return 0
}
setup() { td_setup_dir; }
teardown() {
	[ -n "${TRACER:-}" ] && kill -KILL "$TRACER" 2>/dev/null
	td_teardown
}

# The marker I/O that closes the window: one direct 12 KiB read at this sector, a size
# fio (4 KiB blocks only) never uses.
MARKER_SECTOR=4096
MARKER_BYTES=12288

# marker_completed FILE: the marker's C record is in FILE (48-byte blktrace records, LE).
marker_completed() {
	python3 - "$1" "$MARKER_SECTOR" "$MARKER_BYTES" <<'PY'
import struct, sys
# bytes 16..31 of a record: sector, bytes, action (complete | read category, code 8)
needle = struct.pack("<QII", int(sys.argv[2]), int(sys.argv[3]), (0x80 | 0x01) << 16 | 8)
with open(sys.argv[1], "rb") as f:
    sys.exit(0 if needle in f.read() else 1)
PY
}

# check_balance BLKPARSE_OUT: every sector fio queued (Q) was completed (C), counting
# merged requests by the sectors their C covers; prints "Q C M" counts of 4 KiB I/Os.
CHECK_PY='
import collections, sys
out = collections.Counter()
q = c = m = 0
bad = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 10 or f[0] != "259,0" or f[6] not in ("R", "W") or f[8] != "+":
        continue
    act, rw, sector, n = f[5], f[6], int(f[7]), int(f[9])
    if act == "Q":
        if n == 8:
            q += 1
        for s in range(sector, sector + n, 8):
            out[(rw, s)] += 1
    elif act in ("M", "F"):
        m += 1
    elif act == "C":
        c += 1
        for s in range(sector, sector + n, 8):
            out[(rw, s)] -= 1
            if out[(rw, s)] < 0:
                bad.append("C without Q: " + line.strip())
left = [k for k, v in out.items() if v > 0]
for k in left[:10]:
    bad.append("Q without C: %s %d" % k)
if bad:
    print("\n".join(bad[:20]), file=sys.stderr)
    print("%d sectors queued and never completed" % len(left), file=sys.stderr)
    sys.exit(1)
print(q, c, m)
'

@test "5 s of fio randrw 4k QD32 at full speed: 0 dropped, every Q has its C, blkparse counts every I/O" {
	start_tagdiskd --size 256M
	"$TAGDISKCTL" -s "$TD_SOCK" trace --blktrace "$TD_DIR/run.blktrace.0" 2>"$TD_DIR/tracer.err" &
	TRACER=$!
	td_wait_until 60 grep -q "^tagdiskctl: trace: writing $TD_DIR/run.blktrace.0" "$TD_DIR/tracer.err"

	# The whole of fio's I/O lies inside the trace: it starts after the stream and ends
	# before the marker, whose completion in the file closes the window.
	run -0 --separate-stderr timeout 600 fio --name=lossless --filename="$TD_DISK" \
		--rw=randrw --bs=4k --iodepth=32 --ioengine=libaio --direct=1 --size=256M \
		--time_based --runtime=5 --output-format=json
	local ios
	ios=$(python3 -c 'import json, sys
s = sys.stdin.read()
j = json.loads(s[s.index("{"):])["jobs"][0]
print(j["read"]["total_ios"] + j["write"]["total_ios"])' <<<"$output")
	[ "$ios" -gt 0 ]
	td_dio read "$TD_DISK" "$MARKER_BYTES" $((MARKER_SECTOR * 512)) | grep -q ' ok$'
	td_wait_for 120 "the marker read's C in the trace file" marker_completed "$TD_DIR/run.blktrace.0"
	kill -INT "$TRACER"
	local rc=0
	wait "$TRACER" || rc=$?
	TRACER=
	cat "$TD_DIR/tracer.err" >&2
	[ "$rc" -eq 0 ]
	[ "$(grep -c 'dropped' "$TD_DIR/tracer.err")" -eq 0 ]
	[ "$(td_stats trace_dropped)" -eq 0 ]

	(cd "$TD_DIR" && blkparse -i run) >"$TD_DIR/blkparse.out"
	[ "$(grep -c 'tagdisk: dropped events' "$TD_DIR/blkparse.out")" -eq 0 ]
	grep -q '^Skips: 0 forward' "$TD_DIR/blkparse.out"
	local counts q c m
	counts=$(python3 -c "$CHECK_PY" "$TD_DIR/blkparse.out")
	read -r q c m <<<"$counts"
	echo "# fio: $ios I/Os; blkparse: $q Q, $c C, $m merges of 4 KiB I/Os" >&3
	# Every one of fio's I/Os was queued in the trace, and the marker too.
	[ "$q" -eq "$ios" ]
	[ "$((c + m))" -eq "$((ios + 1))" ]
	stop_tagdiskd
}

# burst_until_dropped FILE: one second of fio at QD32, then succeed once the daemon has
# said in FILE that it dropped events.
burst_until_dropped() {
	timeout 600 fio --name=burst --filename="$TD_DISK" --rw=randrw --bs=4k --iodepth=32 \
		--ioengine=libaio --direct=1 --size=64M --time_based --runtime=1 \
		--output=/dev/null || return 2
	grep -qa 'tagdisk: dropped events: ' "$1"
}

@test "drops are never silent: the file notes them, blkparse shows them, tagdiskctl exits 1, stats counts them" {
	start_tagdiskd --size 64M
	# One 1 KiB buffer per thread (32 events): a busy disk overflows it.
	"$TAGDISKCTL" -s "$TD_SOCK" trace -b 1 -n 1 --blktrace "$TD_DIR/run.blktrace.0" \
		2>"$TD_DIR/tracer.err" &
	TRACER=$!
	td_wait_until 60 grep -q "^tagdiskctl: trace: writing" "$TD_DIR/tracer.err"
	td_wait_for 600 "the daemon to note dropped events in the file" \
		burst_until_dropped "$TD_DIR/run.blktrace.0"
	kill -INT "$TRACER"
	local rc=0
	wait "$TRACER" || rc=$?
	TRACER=
	cat "$TD_DIR/tracer.err" >&2
	[ "$rc" -eq 1 ]
	local said
	said=$(sed -n 's/^tagdiskctl: trace: You have dropped events: \([0-9]*\) lost.*/\1/p' \
		"$TD_DIR/tracer.err")
	[ "$said" -gt 0 ]

	# blkparse prints each note; they add up to what tagdiskctl said.
	(cd "$TD_DIR" && blkparse -i run) >"$TD_DIR/blkparse.out"
	local noted
	noted=$(awk '$6 == "m" && $8 == "tagdisk:" { n += $11 } END { print n + 0 }' \
		"$TD_DIR/blkparse.out")
	[ "$noted" -eq "$said" ]
	# Read as a stream, blkparse also counts the gaps in the sequence as skips (its own
	# tally of them, which need not equal the notes: it is not asserted).
	blkparse -i - <"$TD_DIR/run.blktrace.0" >"$TD_DIR/stream.out"
	local skipped
	skipped=$(sed -n 's/^Skips: [0-9]* forward (\([0-9]*\) .*/\1/p' "$TD_DIR/stream.out")
	echo "# dropped: tagdiskctl $said, notes $noted, blkparse -i - skips $skipped" >&3
	[ "$skipped" -gt 0 ]
	# stats counts every drop, also those after the last note the stream carried.
	[ "$(td_stats trace_dropped)" -ge "$said" ]
	stop_tagdiskd
}

@test "trace -b and -n are checked: by tagdiskctl, and their product by the daemon" {
	start_tagdiskd --size 64M
	run td_ctl trace -b 0 -w 1 -o "$TD_DIR/x.blktrace.0"
	[ "$status" -eq 2 ]
	[[ "$output" == *'-b: "0" is not a number of KiB from 1 to 65536'* ]]
	run td_ctl trace -b 65537 -w 1
	[ "$status" -eq 2 ]
	run td_ctl trace -n 1025 -w 1
	[ "$status" -eq 2 ]
	[[ "$output" == *'-n: "1025" is not a number of buffers from 1 to 1024'* ]]
	run td_ctl trace -b 65536 -n 2 -w 1
	[ "$status" -eq 1 ]
	[[ "$output" == *'trace: buffer_kib x buffers is 131072 KiB, over 65536 KiB'* ]]
	# The daemon checks them for any client.
	[ "$(td_admin 'trace buffer_kib=0')" = \
		'{"ok":false,"error":"trace: buffer_kib: 0 is out of range (1..65536)"}' ]
	[ "$(td_admin 'trace blktrace buffers=x')" = \
		'{"ok":false,"error":"trace: buffers: \"x\" is not a number"}' ]
	[ "$(td_admin 'trace bogus')" = '{"ok":false,"error":"usage: trace"}' ]
	# The reply says what was asked, then what the stream got: 128 KiB is 3276 events,
	# rounded up to 4096, for each thread that may emit.
	local reply
	reply=$(td_admin 'trace blktrace buffer_kib=64 buffers=2')
	[[ "$reply" == '{"ok":true,"trace":"started","format":"blktrace","buffer_kib":64,"buffers":2,"events_per_thread":4096,"threads":'* ]]
	[ "$(td_json bytes <<<"$reply")" -ge $((4096 * 40 * $(td_json threads <<<"$reply"))) ]
	# The JSON stream takes them too, and its plain reply is what old clients know.
	[ "$(td_admin 'trace')" = '{"ok":true,"trace":"started"}' ]
	run --separate-stderr td_ctl trace -b 64 -n 2 -w 0.5
	[ "$status" -eq 0 ]
	stop_tagdiskd
}
