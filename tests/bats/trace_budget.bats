#!/usr/bin/env bats
# Trace streams share one memory budget ([admin] trace_budget): each stream's buffers are
# taken when it starts, a stream that does not fit is refused with an error line, and the
# daemon's locked and resident memory stays within the budget however many streams ask for
# however much, with the disk busy.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires fio python3 || return 0
}
setup() { td_setup_dir; }
teardown() { td_teardown; }

# The documented default of [admin] trace_budget: these tests run with it.
BUDGET_KIB=$((128 * 1024))
# Memory the daemon may gain besides the trace buffers while fio runs: FUSE threads that
# start again after the warm-up (each maps an 8 MiB stack, which mlockall counts in VmLck),
# the request pool, json-c and socket buffers of 32 admin connections. A blktrace stream's
# reorder window (up to 4 MiB each) is not slack: the budget counts it.
SLACK_KIB=$((64 * 1024))

# busy_disk SECONDS: 4 KiB random I/O at queue depth 32, so that many threads emit events.
busy_disk() {
	timeout 600 fio --name=busy --filename="$TD_DISK" --rw=randrw --bs=4k --iodepth=32 \
		--ioengine=libaio --direct=1 --size=32M --time_based --runtime="$1" \
		--output=/dev/null
}

# vm_kib FIELD: FIELD (VmLck, VmRSS) of the daemon's /proc/PID/status, in KiB.
vm_kib() {
	awk -v f="$1:" '$1 == f { print $2 }' "/proc/$TD_PID/status"
}

# STREAMS_PY SOCKET COUNT LINE...: open COUNT connections, send each line of LINE... in turn
# on them (COUNT per line), print each first reply line, then hold every connection open
# until stdin closes (a stream ends when its connection does).
STREAMS_PY='
import socket, sys
path, count, lines = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
held = []
for line in lines:
    for _ in range(count):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(120)
        s.connect(path)
        s.sendall(line.encode() + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = s.recv(1)
            if not chunk:
                break
            reply += chunk
        print(reply.decode().rstrip("\n"), flush=True)
        held.append(s)
sys.stdin.read()
'

@test "16 streams asking for the most, then 16 asking for less: memory stays within trace_budget" {
	start_tagdiskd --size 64M
	# Warm up: the FUSE threads the load needs exist before the baseline is taken.
	busy_disk 1
	local lck0 rss0
	lck0=$(vm_kib VmLck)
	rss0=$(vm_kib VmRSS)

	# The streams stay open (nobody reads them) while the disk is busy again.
	coproc STREAMS { python3 -c "$STREAMS_PY" "$TD_SOCK" 16 \
		'trace blktrace buffer_kib=65536 buffers=1' 'trace blktrace buffer_kib=64 buffers=1'; }
	local i line replies=()
	for i in $(seq 32); do
		read -r -t 300 line <&"${STREAMS[0]}"
		replies+=("$line")
	done
	busy_disk 2
	local lck1 rss1
	lck1=$(vm_kib VmLck)
	rss1=$(vm_kib VmRSS)
	eval "exec ${STREAMS[1]}>&-"
	wait "$STREAMS_PID" || true

	echo "# VmLck ${lck0} -> ${lck1} KiB, VmRSS ${rss0} -> ${rss1} KiB" \
		"(budget ${BUDGET_KIB} KiB, slack ${SLACK_KIB} KiB)" >&3
	[ "$lck1" -le $((lck0 + BUDGET_KIB + SLACK_KIB)) ]
	[ "$rss1" -le $((rss0 + BUDGET_KIB + SLACK_KIB)) ]
	# The largest buffers need 40 MiB for each thread that may emit: no stream fits.
	local refused='^\{"ok":false,"error":"trace: over the trace memory budget: this stream needs [0-9]+ KiB \(a buffer for each of [0-9]+ threads and a [0-9]+ KiB reorder window\), [0-9]+ KiB of trace_budget 131072 KiB is left"\}$'
	for i in $(seq 0 15); do
		[[ "${replies[$i]}" =~ $refused ]] || { echo "stream $i: ${replies[$i]}"; false; }
	done
	# The small ones fit until the budget is spent; the rest are refused the same way.
	local ok=0 no=0 bytes=0 b
	for i in $(seq 16 31); do
		if [[ "${replies[$i]}" == '{"ok":true,"trace":"started"'* ]]; then
			b=$(td_json bytes <<<"${replies[$i]}")
			bytes=$((bytes + b))
			ok=$((ok + 1))
		elif [[ "${replies[$i]}" =~ $refused ]]; then
			no=$((no + 1))
		else
			echo "stream $i: ${replies[$i]}"
			false
		fi
	done
	echo "# small streams: $ok started ($((bytes >> 10)) KiB), $no refused" >&3
	[ "$ok" -ge 1 ]
	[ "$no" -ge 1 ]
	[ "$bytes" -le $((BUDGET_KIB * 1024)) ]
	# One more would not have fitted either.
	[ $((bytes + b)) -gt $((BUDGET_KIB * 1024)) ]

	# Streams that ended gave their memory back: the same request fits again.
	[[ "$(td_admin 'trace blktrace buffer_kib=64 buffers=1')" == '{"ok":true,"trace":"started"'* ]]
	stop_tagdiskd
}

@test "a refused trace leaves the connection taking commands" {
	start_tagdiskd --size 64M
	run python3 - "$TD_SOCK" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(60)
s.connect(sys.argv[1])
s.sendall(b"trace blktrace buffer_kib=65536 buffers=2\nhelp\n")
f = s.makefile("rb")
print(f.readline().decode().rstrip())
print(f.readline().decode()[:12])
PY
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = '{"ok":false,"error":"trace: buffer_kib x buffers is 131072 KiB, over 65536 KiB"}' ]
	[ "${lines[1]}" = '{"ok":true,"' ]
	stop_tagdiskd
}
