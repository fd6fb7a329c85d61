#!/usr/bin/env bats
# tagdiskctl iostat: iostat -x rows from the stats counters; the stats reply's
# sysfs_stat in the kernel's order; the volatile write cache in `stats`.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires python3 fallocate || return 0
}
setup() { td_setup_dir; }
teardown() {
	local p
	for p in ${IOSTATS:-}; do kill -KILL "$p" 2>/dev/null; done
	td_teardown
}

# dio_writes FILE OFFSET...: one direct 4 KiB write at each byte OFFSET.
dio_writes() {
	python3 -c '
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
for off in sys.argv[2:]:
    assert os.pwritev(fd, [buf], int(off)) == 4096
' "$@"
}

# paced_writes FILE N: N direct 4 KiB writes, one every millisecond or so, at 0, 4096, ...
# (spread over several iostat intervals; nothing waits on that pace)
paced_writes() {
	python3 -c '
import mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
for i in range(int(sys.argv[2])):
    assert os.pwritev(fd, [buf], i * 4096) == 4096
    time.sleep(0.001)
' "$@"
}

# rows_min: the fewer rows of iostat.json and iostat.txt (not counting the table's headers).
rows_min() {
	local j t
	j=$(wc -l <"$TD_DIR/iostat.json") || true
	t=$(grep -cv 'r/s' "$TD_DIR/iostat.txt") || true
	echo $((j < t ? j : t))
}

# rows_at_least N: both have N rows or more; prints how many they have.
rows_at_least() {
	local n
	n=$(rows_min)
	echo "$n rows"
	[ "$n" -ge "$1" ]
}

@test "iostat during 1000 paced direct 4 KiB writes: w/s > 0, wKiB/s = 4 w/s, no reads, rows add up to 1000 writes" {
	start_tagdiskd --size 64M
	"$TAGDISKCTL" -s "$TD_SOCK" --json iostat 0.25 >"$TD_DIR/iostat.json" &
	IOSTATS=$!
	"$TAGDISKCTL" -s "$TD_SOCK" iostat 0.25 >"$TD_DIR/iostat.txt" &
	IOSTATS="$IOSTATS $!"
	# Both have printed their first row before the writes start.
	td_wait_until 60 rows_at_least 1
	paced_writes "$TD_DISK" 1000
	# Two more rows each after the last write: the second of them was sampled after the first
	# was printed, so after the writes, whatever the pace (and four rows at least). Then
	# Ctrl-C: status 0.
	local n
	n=$(rows_min)
	td_wait_for 60 "two more iostat rows after the writes (each file had $n)" \
		rows_at_least $((n + 2 > 4 ? n + 2 : 4))
	local p
	for p in $IOSTATS; do
		kill -INT "$p"
		wait "$p"
	done
	IOSTATS=

	# The JSON rows: interval x rate gives back the exact counts.
	python3 - "$TD_DIR/iostat.json" <<'PY' >&3
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) >= 4, rows
writes = sum(r["w_s"] * r["interval_s"] for r in rows)
kib = sum(r["wKiB_s"] * r["interval_s"] for r in rows)
assert abs(writes - 1000) < 1e-3, writes
assert abs(kib - 4000) < 1e-3, kib
busy = [r for r in rows if r["w_s"] > 0]
assert busy, rows
for r in rows:
    assert r["r_s"] == 0 and r["rKiB_s"] == 0 and r["rrqm_s"] == 0, r
    assert abs(r["wKiB_s"] - 4 * r["w_s"]) <= 1e-6 * max(1, r["wKiB_s"]), r
    assert 0 <= r["util_pct"] <= 100, r
    assert r["aqu_sz"] >= 0 and r["w_await_ms"] >= 0 and r["tags_in_use"] >= 0, r
print("# iostat --json: %d rows, %d busy, peak %.1f w/s, %.1f writes in all"
      % (len(rows), len(busy), max(r["w_s"] for r in rows), writes))
PY

	# The table: iostat -x column names, and the same relations at two decimals.
	sed 's/^/# /' "$TD_DIR/iostat.txt" | head -8 >&3
	python3 - "$TD_DIR/iostat.txt" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
header = lines[0].split()
assert header == ["r/s", "w/s", "rKiB/s", "wKiB/s", "rrqm/s", "wrqm/s", "r_await(ms)", "w_await(ms)",
                  "aqu-sz", "tags", "%util"], header
rows = [dict(zip(header, map(float, l.split()))) for l in lines[1:] if l.split() != header]
assert len(rows) >= 4, rows
assert any(r["w/s"] > 0 for r in rows), rows
for r in rows:
    assert r["r/s"] == 0 and r["rKiB/s"] == 0, r
    # Each shown to two decimals: 4 x (w/s +- 0.005) against wKiB/s +- 0.005.
    assert abs(r["wKiB/s"] - 4 * r["w/s"]) <= 0.026, r
    assert 0 <= r["%util"] <= 100, r
PY
	stop_tagdiskd
}

@test "iostat INTERVAL COUNT: the first row covers the time since the daemon started, then COUNT rows in all" {
	start_tagdiskd --size 64M
	paced_writes "$TD_DISK" 200
	run --separate-stderr td_ctl --json iostat 0.2 3
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 3 ]
	python3 - "${lines[0]}" "$(td_admin stats | td_json uptime_us)" <<'PY'
import json, sys
r, uptime_s = json.loads(sys.argv[1]), int(sys.argv[2]) / 1e6
assert abs(r["w_s"] * r["interval_s"] - 200) < 1e-3, r
assert r["interval_s"] <= uptime_s, (r, uptime_s)
PY
	run td_ctl iostat 0 1
	[ "$status" -eq 2 ]
	run td_ctl iostat 1 0
	[ "$status" -eq 2 ]
	stop_tagdiskd
}

@test "stats sysfs_stat: 17 integers in the order of /sys/block/<dev>/stat, matching the named counters" {
	start_tagdiskd --size 64M
	# 24 writes and 8 reads of 4 KiB, three fsyncs, one 64 KiB discard (the kernel may add a
	# flush of its own to the discard, so only "at least 3" is known of the flushes).
	python3 -c '
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
for i in range(24):
    os.pwritev(fd, [buf], (2048 + 64 * i) * 512)
    if i % 8 == 7:
        os.fsync(fd)
for i in range(8):
    os.preadv(fd, [buf], (2048 + 64 * i) * 512)
' "$TD_DISK"
	fallocate --punch-hole --keep-size --offset $((8 << 20)) --length 65536 "$TD_DISK"
	td_admin stats >"$TD_DIR/stats.json"
	python3 - "$TD_DIR/stats.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
f = s["sysfs_stat"]
assert len(f) == 17 and all(isinstance(x, int) and x >= 0 for x in f), f
# Documentation/admin-guide/iostats.rst, fields 1..17.
(reads, rmerges, rsect, rticks, writes, wmerges, wsect, wticks, inflight, ioticks, tiq,
 discards, dmerges, dsect, dticks, flushes, fticks) = f
assert (reads, rmerges, rsect) == (8, 0, 64), f
assert (writes, wmerges, wsect) == (24, 0, 192), f
assert inflight == 0, f
assert (discards, dmerges, dsect) == (1, 0, 128), f
assert flushes >= 3, f
# The same counters under their names.
assert reads == s["reads"] and writes == s["writes"] + s["write_zeroes"], s
assert rsect * 512 == s["read_bytes"] and wsect * 512 == s["write_bytes"], s
assert discards == s["discards"] and dsect * 512 == s["discard_bytes"], s
assert flushes == s["flushes"], s
assert rmerges == s["merges"]["read"] and wmerges == s["merges"]["write"], s
assert ioticks == s["io_ticks_ms"] and tiq == s["time_in_queue_ms"], s
# Busy time cannot exceed the uptime; the in-flight integral cannot be below the busy time.
assert ioticks <= s["uptime_us"] // 1000, s
assert tiq >= ioticks, s
print("# sysfs_stat", f)
PY
	python3 -c 'import json, sys; print("# sysfs_stat", json.load(open(sys.argv[1]))["sysfs_stat"])' \
		"$TD_DIR/stats.json" >&3
	stop_tagdiskd
}

@test "stats shows the volatile write cache: held, written back on fsync, lost on powerfail; no section without one" {
	printf '[drive]\nwrite_cache = volatile\ncache_size = 16M\n' >"$TD_DIR/volatile.ini"
	start_tagdiskd -c "$TD_DIR/volatile.ini" --size 64M
	# 16 writes of 4 KiB, not flushed: all in the cache.
	dio_writes "$TD_DISK" $(seq 0 4096 61440)
	run td_ctl stats
	[ "$status" -eq 0 ]
	echo "$output" | sed 's/^/# /' >&3
	[[ "$output" == *$'\nwrite cache (volatile)\n'* ]]
	echo "$output" | grep -Eq '^  cached +64\.0 KiB \(65536 bytes\)$'
	echo "$output" | grep -Eq '^  lines +16$'
	echo "$output" | grep -Eq '^  writes +16$'
	echo "$output" | grep -Eq '^  powerfails +0$'
	# The existing sections are still there, in their order.
	[ "$(echo "$output" | grep -nE '^(queue|drive|write cache \(volatile\))$' | cut -d: -f2 | tr '\n' ,)" = \
		"queue,drive,write cache (volatile)," ]

	# fsync writes them back.
	python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDWR); os.fsync(fd)' "$TD_DISK"
	run td_ctl stats
	echo "$output" | grep -Eq '^  cached +0 B \(0 bytes\)$'
	echo "$output" | grep -Eq '^  written back +64\.0 KiB \(65536 bytes\)$'

	# 8 more, then the power fails: they are lost, and counted.
	dio_writes "$TD_DISK" $(seq 65536 4096 94208)
	run td_ctl powerfail keep=0
	[ "$status" -eq 0 ]
	[ "$output" = "powerfail: lost 8 writes (64 sectors), kept 0 writes" ]
	run td_ctl stats
	echo "$output" | grep -Eq '^  powerfails +1$'
	echo "$output" | grep -Eq '^  lost writes +8$'
	echo "$output" | grep -Eq '^  lost sectors +64$'
	echo "$output" | grep -Eq '^  cached +0 B \(0 bytes\)$'
	stop_tagdiskd

	# The default drive (writeback) has no cache section.
	start_tagdiskd
	run td_ctl stats
	[ "$status" -eq 0 ]
	[[ "$output" != *"write cache"* ]]
	[[ "$output" == *$'\ndrive\n'* ]]
	stop_tagdiskd
}
