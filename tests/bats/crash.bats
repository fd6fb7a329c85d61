#!/usr/bin/env bats
# kill -9 the daemon while a writer fsyncs now and then: after a restart on the
# same image, everything written before the last completed fsync is there.

load helpers
bats_require_minimum_version 1.5.0

setup_file() { requires_fuse || return 0; }
setup() { td_setup_dir; }
teardown() {
	[ -n "${WRITER:-}" ] && kill -KILL "$WRITER" 2>/dev/null
	td_teardown
}

NREC=65536       # 4 KiB records: the whole 256 MiB disk
FSYNC_EVERY=16

# The writers: THREADS threads, thread t writing records t, t + THREADS, ...;
# record i at i * 4096 holds (run, i) and bytes derived from them. After each
# of its fsyncs completes, a thread prints "t i": i is the last record it wrote
# before that fsync.
WRITER_PY='
import hashlib, os, struct, sys, threading
disk, run, nrec, every, nthreads = sys.argv[1], *map(int, sys.argv[2:6])
out = threading.Lock()

def record(i):
    head = struct.pack("<8sQQ", b"TDCRASH1", run, i)
    seed = hashlib.sha256(head).digest()
    return head + (seed * (4096 // len(seed) + 1))[:4096 - len(head)]

failed = []

def writer(t):
    try:
        fd = os.open(disk, os.O_RDWR)
        for n, i in enumerate(range(t, nrec, nthreads)):
            os.pwrite(fd, record(i), i * 4096)
            if (n + 1) % every == 0:
                os.fsync(fd)
                with out:
                    print(t, i, flush=True)
    except OSError as e:
        failed.append(e)

threads = [threading.Thread(target=writer, args=(t,), daemon=True) for t in range(nthreads)]
for th in threads:
    th.start()
for th in threads:
    th.join()
if failed:
    print(failed[0], file=sys.stderr)
    sys.exit(1)
'

# Check: for each thread, its records up to the last one it saw fsynced.
CHECK_PY='
import hashlib, os, struct, sys
disk, run, nthreads, acked = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def record(i):
    head = struct.pack("<8sQQ", b"TDCRASH1", run, i)
    seed = hashlib.sha256(head).digest()
    return head + (seed * (4096 // len(seed) + 1))[:4096 - len(head)]

last = {}
for line in open(acked):
    t, i = map(int, line.split())
    last[t] = max(last.get(t, -1), i)
assert len(last) == nthreads, last
fd = os.open(disk, os.O_RDONLY)
total = 0
for t, lt in sorted(last.items()):
    idx = range(t, lt + 1, nthreads)
    bad = [i for i in idx if os.pread(fd, 4096, i * 4096) != record(i)]
    assert not bad, "thread %d: %d of %d fsynced records lost or damaged, first %d" % (
        t, len(bad), len(idx), bad[0])
    total += len(idx)
print("%d fsynced records of %d threads intact" % (total, nthreads), file=sys.stderr)
'

# crash_cycles CYCLES THREADS TAGDISKD_OPTIONS...: write, kill -9, restart, check.
crash_cycles() {
	local n=$1 nthreads=$2 cycle rc
	shift 2
	for ((cycle = 1; cycle <= n; cycle++)); do
		if [ "$cycle" -eq 1 ]; then
			start_tagdiskd --size 256M "$@"
		else
			start_tagdiskd "$@"
		fi
		# Empty it here: the background job's own redirection may come too late.
		: >"$TD_DIR/acked"
		python3 -c "$WRITER_PY" "$TD_DISK" "$cycle" "$NREC" "$FSYNC_EVERY" "$nthreads" \
			>"$TD_DIR/acked" 2>"$TD_DIR/writer.err" &
		WRITER=$!
		# Let them get going, then pull the plug in the middle of their writes.
		td_wait_for 120 "150 fsyncs acknowledged (or the writer's end)" \
			eval '[ "$(wc -l <"$TD_DIR/acked")" -ge 150 ] || ! kill -0 "$WRITER"' >/dev/null
		[ "$(wc -l <"$TD_DIR/acked")" -ge 150 ] || { cat "$TD_DIR/writer.err" >&2; false; }
		td_kill9
		rc=0
		wait "$WRITER" || rc=$?
		WRITER=
		echo "cycle $cycle: writer status $rc, $(wc -l <"$TD_DIR/acked") fsyncs seen" >&2
		# The crash hit the writers mid-run.
		[ "$rc" -ne 0 ]
		[ "$(wc -l <"$TD_DIR/acked")" -lt $((NREC / FSYNC_EVERY)) ]

		start_tagdiskd "$@"
		python3 -c "$CHECK_PY" "$TD_DISK" "$cycle" "$nthreads" "$TD_DIR/acked"
		stop_tagdiskd
	done
}

@test "kill -9 three times in rq mode, 8 writers: every record before each one's last fsync survives" {
	crash_cycles 3 8 --mode rq --elevator deadline
}

@test "kill -9 three times in bio mode, 4 writers: every record before each one's last fsync survives" {
	crash_cycles 3 4 --mode bio
}

@test "kill -9 once with a single sequential writer in rq mode with noop" {
	crash_cycles 1 1 --mode rq --elevator noop
}
