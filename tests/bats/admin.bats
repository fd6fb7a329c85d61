#!/usr/bin/env bats
# The admin socket, spoken to raw: every command's reply, bad input, many
# clients at once, who may connect, the socket file's life, fault injection
# and the trace stream.

load helpers
bats_require_minimum_version 1.5.0

setup_file() { requires_fuse || return 0; }
setup() { td_setup_dir; }
teardown() {
	td_teardown
	td_remove_test_users
}

# check_json FILE CODE: run the Python CODE with d = the JSON object on FILE's first line.
# A failing assert prints the reply, so the TAP output shows what came back.
check_json() {
	python3 - "$1" "$2" <<'PY'
import json, sys, traceback
line = open(sys.argv[1], "rb").readline()
d = json.loads(line)
try:
    exec(sys.argv[2], {"d": d, "json": json})
except AssertionError:
    traceback.print_exc()
    sys.stderr.write("reply: %s\n" % line.decode(errors="replace"))
    sys.exit(1)
PY
}

# status_is KEY VALUE: the status field KEY is VALUE (for td_wait_until).
status_is() {
	[ "$(td_status "$1")" = "$2" ]
}

# status_when COND: poll status until the Python expression COND holds for its reply d
# (at most 60 s); print that reply. Each try prints the reply it got, so a timeout shows it.
status_when() {
	td_wait_for 60 "a status reply with $1" status_check "$1"
}

status_check() {
	local reply
	reply=$(td_admin status) || return 1
	printf '%s\n' "$reply"
	python3 -c 'import json, sys; d = json.loads(sys.argv[1]); sys.exit(not eval(sys.argv[2]))' \
		"$reply" "$1"
}

# took_at_least T0 T1 SECS: compare $EPOCHREALTIME stamps (a lower bound only: a slow
# machine only makes things take longer).
took_at_least() {
	awk -v a="$1" -v b="$2" -v s="$3" 'BEGIN { exit !(b - a >= s) }'
}

# The daemon still serves: a direct read and write go through, status answers.
still_serving() {
	kill -0 "$TD_PID"
	dd if=/dev/urandom of="$TD_DIR/probe" bs=4k count=4 status=none
	dd if="$TD_DIR/probe" of="$TD_DISK" bs=4k seek=100 oflag=direct conv=notrunc status=none
	cmp <(dd if="$TD_DISK" bs=4k skip=100 count=4 iflag=direct status=none) "$TD_DIR/probe"
	[ "$(td_status state)" = running ]
}

# ---- each command's reply ------------------------------------------------------------------

@test "help lists every command of the table, in order, each with its usage and help" {
	start_tagdiskd --size 64M
	td_admin help >"$TD_DIR/r"
	check_json "$TD_DIR/r" '
assert list(d) == ["ok", "commands"], list(d)
assert d["ok"] is True
names = [c["name"] for c in d["commands"]]
assert names == ["help", "status", "stats", "tags", "reset", "elevator", "depth", "inject",
                 "powerfail", "trace", "restart", "log", "mark"], names
for c in d["commands"]:
    assert sorted(c) == ["help", "name", "usage"], c
    assert c["usage"].split()[0] == c["name"], c
    assert len(c["help"]) > 10, c
u = {c["name"]: c["usage"] for c in d["commands"]}
assert u["elevator"] == "elevator [NAME]", u
assert u["depth"] == "depth [N]", u
assert u["inject"] == ("inject error op=read|write|any sector=S count=N [times=K] | every N | "
                      "hang [times=K] | latency US | seed N | clear | list"), u
'
}

# The ring counters follow transport on the uring transport only (docs/protocol.md).
STATUS_KEYS='(["ok", "state", "version", "pid", "uptime_s", "image", "backend", "backend_target",
  "size", "disk", "read_only",
  "logical_block_size", "mode", "elevator", "depth", "tags_in_use", "in_flight", "queued",
  "requests_used", "nr_requests", "max_sectors", "workers", "stale_calls", "fences",
  "stuck_calls", "model", "write_cache",
  "command_timeout_ms", "max_retries", "opens", "fuse_threads", "transport", "recovery",
  "fd_store", "takeovers", "resent"]
  + (["uring_requests", "uring_entries", "uring_helpers", "uring_trims", "uring_trim_kept"]
     if d["transport"] == "uring" else [])
  + ["transport_waiting", "resets", "timeouts", "errors", "rate", "log"])'

@test "status has every field of the protocol, with this daemon's values" {
	local t0 elapsed
	t0=$EPOCHREALTIME
	start_tagdiskd --size 64M
	# Up for a second, and one rate sample half a second old at least.
	status_when "d['uptime_s'] >= 1 and d['rate']['interval_s'] >= 0.5" >"$TD_DIR/r"
	# Whole seconds since before the start: the most uptime_s can be.
	elapsed=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", b - a + 1 }')
	check_json "$TD_DIR/r" "
assert list(d) == $STATUS_KEYS, list(d)
exp = dict(ok=True, state='running', version='0.1.0', pid=$TD_PID, image='$TD_IMG',
           backend='file', backend_target='$TD_IMG', size=64 << 20, disk='$TD_DISK', read_only=False, logical_block_size=512, mode='rq',
           elevator='deadline', depth=32, tags_in_use=0, in_flight=0, queued=0, requests_used=0,
           nr_requests=128, max_sectors=2048, workers=0, stale_calls=0, fences=0, stuck_calls=[],
           model='none', write_cache='writeback',
           command_timeout_ms=30000, max_retries=5, opens=0, resets=0, timeouts=0, errors=0,
           fd_store=False, takeovers=0, resent=0)
for k, v in exp.items():
    assert d[k] == v and type(d[k]) is type(v), (k, d[k], v)
assert 1 <= d['uptime_s'] <= $elapsed, (d['uptime_s'], $elapsed)
assert d['fuse_threads'] >= 1, d['fuse_threads']
# The kernel's count, where fusectl is mounted: an idle disk has nothing waiting.
assert d['transport_waiting'] in (None, 0), d['transport_waiting']
assert '$TD_TRANSPORT' in ('', d['transport']), (d['transport'], '$TD_TRANSPORT')
# The mount outlives the daemon over classic /dev/fuse only (no fd store here).
assert d['recovery'] is (d['transport'] == 'classic'), d
if d['transport'] == 'uring':
    assert len(d['uring_requests']) >= 1 and d['uring_entries'] >= 2, d
    # Helpers start with the first large request: none yet on an idle disk.
    assert d['uring_helpers'] == 0, d
r = d['rate']
assert list(r) == ['interval_s', 'read_iops', 'write_iops', 'iops', 'read_bytes_per_s',
                   'write_bytes_per_s', 'bytes_per_s'], list(r)
assert 0.5 <= r['interval_s'] <= min(7, $elapsed), r
assert all(r[k] == 0 for k in r if k != 'interval_s'), r
"
}

@test "status reports the configured settings, open files and the I/O rate" {
	printf '[queue]\nelevator = noop\nnr_requests = 64\nmax_sectors = 256\n[tags]\ndepth = 8\n[drive]\nworkers = 2\ncommand_timeout_ms = 1500\nmax_retries = 3\n' \
		>"$TD_DIR/td.ini"
	start_tagdiskd --size 32M -c "$TD_DIR/td.ini"
	exec 5<"$TD_DISK"
	# 200 direct 4 KiB reads, then the rate covers them: it runs from the oldest sample of the
	# last seconds (one from before the reads) to the moment of the status request.
	dd if="$TD_DISK" of=/dev/null bs=4k count=200 iflag=direct status=none
	td_admin status >"$TD_DIR/r"
	exec 5<&-
	check_json "$TD_DIR/r" "
exp = dict(size=32 << 20, elevator='noop', depth=8, nr_requests=64, max_sectors=256, workers=2,
           command_timeout_ms=1500, max_retries=3, opens=1)
for k, v in exp.items():
    assert d[k] == v, (k, d[k], v)
r = d['rate']
# 200 reads of 4 KiB within the last interval_s seconds.
assert abs(r['read_iops'] * r['interval_s'] - 200) < 1, r
assert abs(r['read_bytes_per_s'] * r['interval_s'] - 200 * 4096) < 4096, r
assert r['write_iops'] == 0 and r['iops'] == r['read_iops'], r
assert r['bytes_per_s'] == r['read_bytes_per_s'], r
"
	td_wait_until 60 status_is opens 0
}

@test "status in bio mode: elevator none, depth 0, no tags" {
	start_tagdiskd --size 32M --mode bio
	td_admin status >"$TD_DIR/r"
	check_json "$TD_DIR/r" "
assert list(d) == $STATUS_KEYS, list(d)
assert (d['mode'], d['elevator'], d['depth'], d['tags_in_use']) == ('bio', 'none', 0, 0), d
"
	[ "$(td_admin reset)" = '{"ok":false,"error":"reset: mode = bio has no queue or tags to reset"}' ]
	[ "$(td_admin 'elevator noop')" = '{"ok":false,"error":"elevator: mode = bio has no elevator"}' ]
	[ "$(td_admin 'depth 4')" = '{"ok":false,"error":"depth: mode = bio has no tags"}' ]
	[ "$(td_admin depth)" = '{"ok":true,"depth":0,"max":4096}' ]
}

@test "status in mq mode: one hctx entry per hardware context, whose counts add up to the I/O done" {
	start_tagdiskd --size 32M --mode mq --elevator none
	dd if=/dev/zero of="$TD_DISK" bs=4k count=16 oflag=direct conv=notrunc status=none
	dd if="$TD_DISK" of=/dev/null bs=4k count=16 iflag=direct status=none
	td_admin status >"$TD_DIR/r"
	td_admin stats >"$TD_DIR/s"
	check_json "$TD_DIR/r" "
keys = $STATUS_KEYS
i = keys.index('max_sectors') + 1
assert list(d) == keys[:i] + ['nr_hw_queues', 'hctx'] + keys[i:], list(d)
assert (d['mode'], d['elevator'], d['depth'], d['tags_in_use']) == ('mq', 'none', 32, 0), d
assert d['nr_hw_queues'] == $(nproc --all) == len(d['hctx']), d
for i, h in enumerate(d['hctx']):
    assert list(h) == ['hctx', 'queued', 'in_flight', 'dispatched', 'ctx_queued'], h
    assert (h['hctx'], h['queued'], h['in_flight']) == (i, 0, 0), h
s = json.load(open('$TD_DIR/s'))
assert sum(h['dispatched'] for h in d['hctx']) == s['reads'] + s['writes'] + s['flushes'], (d, s)
assert sum(h['ctx_queued'] for h in d['hctx']) == \
    s['reads'] + s['writes'] + s['flushes'] + s['merges']['read'] + s['merges']['write'], (d, s)
"
	[ "$(td_admin elevator)" = '{"ok":true,"elevator":"none","available":["mq-deadline","none"]}' ]
	[ "$(td_admin 'elevator deadline')" = '{"ok":true,"elevator":"mq-deadline","previous":"none"}' ]
	[ "$(td_admin 'elevator cfq')" = '{"ok":false,"error":"elevator: unknown elevator \"cfq\" (available: mq-deadline, none)"}' ]
	[ "$(td_status elevator)" = mq-deadline ]
	still_serving
}

@test "stats counts a known direct-I/O workload exactly, sysfs_stat included" {
	start_tagdiskd --size 64M
	[ "$(td_stats reads)" -eq 0 ]
	dd if="$TD_DISK" of=/dev/null bs=4k count=100 iflag=direct status=none
	dd if=/dev/zero of="$TD_DISK" bs=4k seek=1000 count=50 oflag=direct conv=notrunc status=none
	python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDWR); os.fsync(fd)' "$TD_DISK"
	td_admin stats >"$TD_DIR/r"
	check_json "$TD_DIR/r" '
assert list(d) == ["ok", "uptime_us", "reads", "writes", "flushes", "discards", "write_zeroes",
    "read_bytes", "write_bytes", "discard_bytes", "write_zeroes_bytes", "front_merges",
    "back_merges", "merges", "deferred", "killed", "errors", "requeued", "resets", "timeouts",
    "retries_exhausted", "trace_dropped", "in_flight", "io_ticks_ms", "time_in_queue_ms",
    "latency", "drive", "sysfs_stat"], list(d)
exp = dict(ok=True, reads=100, writes=50, flushes=1, discards=0, write_zeroes=0,
           read_bytes=409600, write_bytes=204800, discard_bytes=0, write_zeroes_bytes=0,
           front_merges=0, back_merges=0, merges={"read": 0, "write": 0}, deferred=0, killed=0,
           errors=0, requeued=0, resets=0, timeouts=0, retries_exhausted=0, trace_dropped=0,
           in_flight=0)
for k, v in exp.items():
    assert d[k] == v, (k, d[k], v)
assert d["uptime_us"] > 0
lat = d["latency"]
assert list(lat) == ["read", "write", "flush", "discard", "write_zeroes"], list(lat)
for op, n in (("read", 100), ("write", 50), ("flush", 1), ("discard", 0), ("write_zeroes", 0)):
    l = lat[op]
    assert list(l) == ["count", "mean", "p50", "p90", "p99", "p999", "max_bucket", "max"], l
    assert l["count"] == n, (op, l)
    if n:
        # Microseconds: a read of a hole can take less than one (p50 0). The percentiles
        # never pass the largest latency, nor does the mean.
        assert 0 <= l["p50"] <= l["p90"] <= l["p99"] <= l["p999"] <= l["max"], (op, l)
        assert l["mean"] <= l["max"], (op, l)
    else:
        assert l["mean"] == l["p50"] == l["max_bucket"] == l["max"] == 0, (op, l)
    # One sample (the flush): every percentile is that sample, as is the mean.
    if n == 1:
        assert l["mean"] == l["p50"] == l["p999"] == l["max"], (op, l)
dr = d["drive"]
assert list(dr) == ["commands", "queued", "executing", "hung", "seeks", "seek_distance",
                    "mean_seek_sectors"], dr
assert dr["commands"] == 151 and dr["queued"] == dr["executing"] == dr["hung"] == 0, dr
s = d["sysfs_stat"]
assert len(s) == 17 and all(type(x) is int for x in s), s
assert s[0] == d["reads"] == 100 and s[1] == 0 and s[2] == 800, s
assert s[4] == d["writes"] == 50 and s[5] == 0 and s[6] == 400, s
assert s[8] == 0 and s[11] == 0 and s[13] == 0 and s[15] == 1, s
assert s[9] <= d["io_ticks_ms"] and s[10] == d["time_in_queue_ms"], s
'
	# A punched hole is a discard; a zeroed range is a write_zeroes, which
	# sysfs_stat counts with the writes.
	fallocate -p -o 1M -l 1M "$TD_DISK"
	fallocate -z -o 4M -l 64K "$TD_DISK"
	td_admin stats >"$TD_DIR/r"
	check_json "$TD_DIR/r" '
assert (d["discards"], d["discard_bytes"]) == (1, 1 << 20), d
assert (d["write_zeroes"], d["write_zeroes_bytes"]) == (1, 65536), d
s = d["sysfs_stat"]
assert s[4] == 51 and s[6] == 400 + 128, s
assert s[11] == 1 and s[13] == 2048, s
'
}

@test "tags during an injected hang lists each held command, oldest first, with its CDB; reset gives them back" {
	start_tagdiskd --size 64M
	[ "$(td_admin 'inject hang times=2' | td_json ok)" = true ]
	dd if="$TD_DISK" of=/dev/null bs=4k skip=256 count=1 iflag=direct status=none &
	local rpid=$!
	td_wait_until 60 status_is tags_in_use 1
	dd if=/dev/zero of="$TD_DISK" bs=4k seek=512 count=1 oflag=direct conv=notrunc status=none &
	local wpid=$!
	td_wait_until 60 status_is tags_in_use 2
	td_admin tags >"$TD_DIR/r"
	td_admin status >"$TD_DIR/s"
	check_json "$TD_DIR/r" "
assert list(d) == ['ok', 'depth', 'in_use', 'tags'], list(d)
assert (d['ok'], d['depth'], d['in_use']) == (True, 32, 2), d
r, w = d['tags']
for t in (r, w):
    assert list(t) == ['tag'] + (['hctx'] if '$TD_MODE' == 'mq' else []) + \
        ['op', 'sector', 'sectors', 'age_us', 'retries', 'pid', 'cdb'], t
assert 0 <= r['tag'] < 32 and 0 <= w['tag'] < 32 and r['tag'] != w['tag'], d
assert (r['op'], r['sector'], r['sectors'], r['retries'], r['pid']) == ('read', 2048, 8, 0, $rpid), r
assert r['cdb'] == '28 00 00 00 08 00 00 00 08 00', r
assert (w['op'], w['sector'], w['sectors'], w['retries'], w['pid']) == ('write', 4096, 8, 0, $wpid), w
assert w['cdb'] == '2a 00 00 00 10 00 00 00 08 00', w
assert r['age_us'] > w['age_us'] > 0, d
"
	check_json "$TD_DIR/s" "
assert (d['tags_in_use'], d['in_flight'], d['queued'], d['requests_used']) == (2, 2, 0, 2), d
"
	[ "$(td_admin reset)" = '{"ok":true,"requeued":2}' ]
	wait "$rpid"
	wait "$wpid"
	[ "$(td_admin tags)" = '{"ok":true,"depth":32,"in_use":0,"tags":[]}' ]
	td_admin stats >"$TD_DIR/r"
	check_json "$TD_DIR/r" '
assert (d["resets"], d["requeued"], d["timeouts"], d["errors"]) == (1, 2, 0, 0), d
assert (d["reads"], d["writes"]) == (1, 1), d
'
}

@test "elevator and depth: show, set, and the new values are in status" {
	start_tagdiskd --size 64M
	local d n
	d=$(td_elv_name deadline)
	n=$(td_elv_name noop)
	[ "$(td_admin elevator)" = '{"ok":true,"elevator":"'$d'","available":["'$d'","'$n'"]}' ]
	[ "$(td_admin 'elevator noop')" = '{"ok":true,"elevator":"'$n'","previous":"'$d'"}' ]
	[ "$(td_admin 'elevator noop')" = '{"ok":true,"elevator":"'$n'","previous":"'$n'"}' ]
	[ "$(td_admin elevator)" = '{"ok":true,"elevator":"'$n'","available":["'$d'","'$n'"]}' ]
	[ "$(td_status elevator)" = "$n" ]
	[ "$(td_admin depth)" = '{"ok":true,"depth":32,"max":4096}' ]
	[ "$(td_admin 'depth 7')" = '{"ok":true,"depth":7,"previous":32}' ]
	[ "$(td_admin 'depth 4096')" = '{"ok":true,"depth":4096,"previous":7}' ]
	[ "$(td_admin 'depth 1')" = '{"ok":true,"depth":1,"previous":4096}' ]
	[ "$(td_status depth)" -eq 1 ]
	[ "$(td_admin tags | td_json depth)" -eq 1 ]
	still_serving
	[ "$(td_admin 'elevator deadline')" = '{"ok":true,"elevator":"'$d'","previous":"'$n'"}' ]
	still_serving
}

@test "inject: each reply lists the armed rules exactly; list shows what fired; clear disarms" {
	start_tagdiskd --size 64M
	[ "$(td_admin 'inject list')" = '{"ok":true,"seed":1,"rules":[]}' ]
	local e1='{"kind":"error","op":"write","sector":100,"count":8,"times_left":3,"fired":0}'
	local e2='{"kind":"error","op":"any","sector":0,"count":1,"times_left":null,"fired":0}'
	[ "$(td_admin 'inject error op=write sector=100 count=8 times=3')" = \
		"{\"ok\":true,\"seed\":1,\"rules\":[$e1]}" ]
	[ "$(td_admin 'inject error count=1 sector=0 op=any')" = \
		"{\"ok\":true,\"seed\":1,\"rules\":[$e1,$e2]}" ]
	[ "$(td_admin 'inject latency 100')" = \
		"{\"ok\":true,\"seed\":1,\"rules\":[$e1,$e2,{\"kind\":\"latency\",\"latency_us\":100,\"fired\":0}]}" ]
	# every comes after the errors and hangs, latency last, whatever the order armed.
	[ "$(td_admin 'inject every 1000')" = \
		"{\"ok\":true,\"seed\":1,\"rules\":[$e1,$e2,{\"kind\":\"every\",\"every\":1000,\"fired\":0},{\"kind\":\"latency\",\"latency_us\":100,\"fired\":0}]}" ]
	[ "$(td_admin 'inject seed 99' | td_json seed)" -eq 99 ]
	# One write into the first rule's range: it fails, the rule and the latency fire.
	run td_dio write "$TD_DISK" 4096 51200
	[ "$output" = "51200 EIO" ]
	[ "$(td_admin 'inject list')" = \
		"{\"ok\":true,\"seed\":99,\"rules\":[{\"kind\":\"error\",\"op\":\"write\",\"sector\":100,\"count\":8,\"times_left\":2,\"fired\":1},$e2,{\"kind\":\"every\",\"every\":1000,\"fired\":0},{\"kind\":\"latency\",\"latency_us\":100,\"fired\":1}]}" ]
	[ "$(td_admin 'inject clear')" = '{"ok":true,"seed":99,"rules":[]}' ]
	[ "$(td_admin 'inject list')" = '{"ok":true,"seed":99,"rules":[]}' ]
	run td_dio write "$TD_DISK" 4096 51200
	[ "$output" = "51200 ok" ]
	[ "$(td_stats errors)" -eq 1 ]
}

# ---- bad input -------------------------------------------------------------------------------

@test "malformed lines on one connection: each gets its exact error, in order, and later lines are served" {
	start_tagdiskd --size 64M
	python3 - "$TD_SOCK" <<'PY'
import json, socket, sys
def E(msg):
    return json.dumps({"ok": False, "error": msg}, separators=(",", ":"))
OK = None
cases = [
    (b"x" * 5000, E("line too long (over 4096 bytes)")),
    (b"help", OK),
    (b"\xff\xfe", E("line is not valid UTF-8")),
    (b"\xc0\xaf", E("line is not valid UTF-8")),      # an overlong "/"
    (b"\xed\xa0\x80", E("line is not valid UTF-8")),  # a surrogate
    (b"stat\xc3", E("line is not valid UTF-8")),      # a cut sequence
    (b"st\x00atus", E("line contains a NUL byte")),
    (b"foo", E('unknown command "foo" (try "help")')),
    (b'fo"o\\', E('unknown command "fo\"o\\" (try "help")')),
    # A name cut at 64 bytes inside a character: the reply stays valid UTF-8.
    (("a" * 63 + "\u00e9").encode(), E('unknown command "%s\ufffd" (try "help")' % ("a" * 63))),
    (b"", E('empty command (try "help")')),
    (b" \t ", E('empty command (try "help")')),
    (b"x" * 4096, E('unknown command "%s" (try "help")' % ("x" * 64))),
    (b"x" * 4097, E("line too long (over 4096 bytes)")),
    (b"status\r", OK),
    (b"STATUS", E('unknown command "STATUS" (did you mean "status" or "stats"?)')),
    (b"stat", E('unknown command "stat" (did you mean "stats" or "status"?)')),
    (b"tgas", E('unknown command "tgas" (did you mean "tags"?)')),
    (b"  depth\t", '{"ok":true,"depth":32,"max":4096}'),
    (b"depth " + b" ".join(b"%d" % i for i in range(1, 18)), E("too many arguments (at most 16)")),
    (b"status", OK),
]
s = socket.socket(socket.AF_UNIX)
s.settimeout(60)
s.connect(sys.argv[1])
s.sendall(b"".join(c[0] + b"\n" for c in cases))
f = s.makefile("rb")
bad = 0
for i, (line, want) in enumerate(cases):
    raw = f.readline()
    assert raw.endswith(b"\n"), (i, raw)
    got = raw[:-1].decode()
    d = json.loads(got)
    if want is OK:
        ok = d["ok"] is True and list(d)[1] == ("commands" if line == b"help" else "state")
    else:
        ok = got == want
    if not ok:
        print("case %d (%r...): got %s, want %s" % (i, line[:20], got, want))
        bad += 1
sys.exit(bad != 0)
PY
	still_serving
}

@test "bad arguments each get their exact error, and the daemon keeps serving" {
	start_tagdiskd --size 64M
	python3 - "$TD_SOCK" <<'PY'
import socket, sys
U = 18446744073709551615
cases = {
    "depth 0": "depth: 0 is out of range (1..4096)",
    "depth abc": 'depth: \\"abc\\" is not a number',
    "depth 99999": "depth: 99999 is out of range (1..4096)",
    "depth -1": 'depth: \\"-1\\" is not a number',
    "depth 4097": "depth: 4097 is out of range (1..4096)",
    "depth 1 2": "usage: depth [N]",
    "elevator nosuch": 'elevator: unknown elevator \\"nosuch\\" (available: deadline, noop)',
    "elevator noop deadline": "usage: elevator [NAME]",
    "help me": "usage: help",
    "status now": "usage: status",
    "reset all": "usage: reset",
    "inject": "usage: inject error op=read|write|any sector=S count=N [times=K] | every N | "
              "hang [times=K] | latency US | seed N | clear | list",
    "inject bogus": 'inject: unknown fault \\"bogus\\" (error, every, hang, latency, seed, clear, list)',
    "inject error op=foo sector=1 count=1": 'inject error: op=\\"foo\\" is not read, write or any',
    "inject error op=read sector=1": "usage: inject error op=read|write|any sector=S count=N [times=K]",
    "inject error sector=1 count=1": "usage: inject error op=read|write|any sector=S count=N [times=K]",
    "inject error op=read sector=1 count=1 bar=2": 'inject error: unknown argument \\"bar\\"',
    "inject error op=read sector=1 count=1 op=write": 'inject error: argument \\"op\\" given twice',
    "inject error op=read sector= count=1": 'inject error: argument \\"sector\\" has no value',
    "inject error op=read 5 count=1": 'inject error: argument \\"5\\" is not key=value',
    "inject error op=read sector=x count=1": 'inject error: sector: \\"x\\" is not a number',
    "inject error op=read sector=1 count=0": "inject error: count: 0 is out of range (1..%d)" % U,
    "inject error op=read sector=1 count=1 times=0": "inject error: times: 0 is out of range (1..%d)" % (U - 1),
    "inject every 0": "inject every: 0 is out of range (1..4294967295)",
    "inject every": "usage: inject every N",
    "inject every 2 3": "usage: inject every N",
    "inject every x": 'inject every: \\"x\\" is not a number',
    "inject hang times=0": "inject hang: times: 0 is out of range (1..%d)" % (U - 1),
    "inject hang count=1": 'inject hang: unknown argument \\"count\\"',
    "inject latency 60000001": "inject latency: 60000001 is out of range (0..60000000)",
    "inject latency": "usage: inject latency US",
    "inject seed abc": 'inject seed: \\"abc\\" is not a number',
    "inject clear now": "usage: inject clear",
    "inject list all": "usage: inject list",
    "powerfail": "powerfail: needs write_cache = volatile (this drive is writeback)",
    "powerfail keep=1 seed=2 x=3": "usage: powerfail [keep=PCT] [seed=N]",
    "trace now": "usage: trace",
}
bad = 0
for line, err in cases.items():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(sys.argv[1])
    s.sendall(line.encode() + b"\n")
    got = s.makefile("rb").readline().decode().rstrip("\n")
    want = '{"ok":false,"error":"%s"}' % err
    if got != want:
        print("%r: got %s\n%s  want %s" % (line, got, " " * len(repr(line)), want))
        bad += 1
    s.close()
sys.exit(bad != 0)
PY
	# Nothing was armed or changed by the refused commands.
	[ "$(td_admin 'inject list')" = '{"ok":true,"seed":1,"rules":[]}' ]
	[ "$(td_status depth)" -eq 32 ]
	[ "$(td_status elevator)" = deadline ]
	still_serving
}

@test "several commands on one connection are answered in order, also when the client half-closes at once" {
	start_tagdiskd --size 64M
	printf 'depth 5\ndepth\nelevator noop\nbogus\nelevator\ndepth 32\n' | td_admin_lines 6 >"$TD_DIR/out"
	diff - "$TD_DIR/out" <<'EOF'
{"ok":true,"depth":5,"previous":32}
{"ok":true,"depth":5,"max":4096}
{"ok":true,"elevator":"noop","previous":"deadline"}
{"ok":false,"error":"unknown command \"bogus\" (try \"help\")"}
{"ok":true,"elevator":"noop","available":["deadline","noop"]}
{"ok":true,"depth":32,"previous":5}
EOF
	# Send, shut down the sending side, then read: every line still gets its reply.
	python3 - "$TD_SOCK" <<'PY'
import json, socket, sys
for i in range(50):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(sys.argv[1])
    s.sendall(b"help\nstatus\nstats\ntags\n")
    s.shutdown(socket.SHUT_WR)
    data = b""
    while True:
        b = s.recv(1 << 16)
        if not b:
            break
        data += b
    lines = data.split(b"\n")
    assert lines[-1] == b"" and len(lines) == 5, (i, data[:200])
    keys = [list(json.loads(l))[1] for l in lines[:4]]
    assert keys == ["commands", "state", "uptime_us", "depth"], (i, keys)
    s.close()
PY
	still_serving
}

@test "clients that send garbage and disconnect mid-line, or go before their reply, do not disturb the daemon" {
	start_tagdiskd --size 64M
	python3 - "$TD_SOCK" <<'PY'
import os, socket, sys
def client(data, read=False):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    if data:
        s.sendall(data)
    s.close()
for i in range(20):
    client(b"")                              # connect, nothing, close
    client(b"stat")                          # mid-line
    client(os.urandom(3000).replace(b"\n", b"x"))   # binary garbage, no newline
    client(b"y" * 9000)                      # inside an over-long line
    client(b"status\nstats\ntags\nhelp\nsta")  # replies pending when it goes
    client(b"trace\n")                       # a trace stream abandoned at once
PY
	still_serving
	td_admin stats >"$TD_DIR/r"
	check_json "$TD_DIR/r" 'assert d["ok"] is True'
	run grep -E 'error|warning: admin' "$TD_LOG"
	[ "$status" -eq 1 ]
}

@test "50 concurrent clients each sending status, stats and tags all get valid replies" {
	start_tagdiskd --size 64M
	# Some I/O meanwhile, so the replies have something to show.
	dd if="$TD_DISK" of=/dev/null bs=4k count=20000 iflag=direct status=none &
	local reader=$!
	python3 - "$TD_SOCK" <<'PY'
import json, socket, sys, threading
N = 50
barrier = threading.Barrier(N)
results = [None] * N
def client(i):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(60)
        s.connect(sys.argv[1])
        barrier.wait()
        s.sendall(b"status\nstats\ntags\n")
        f = s.makefile("rb")
        replies = [json.loads(f.readline()) for _ in range(3)]
        results[i] = [(r["ok"], list(r)[1]) for r in replies]
    except Exception as e:
        results[i] = repr(e)
threads = [threading.Thread(target=client, args=(i,)) for i in range(N)]
for t in threads:
    t.start()
for t in threads:
    t.join()
want = [(True, "state"), (True, "uptime_us"), (True, "depth")]
bad = [(i, r) for i, r in enumerate(results) if r != want]
assert not bad, bad[:5]
print("150 replies, all ok")
PY
	wait "$reader"
	still_serving
}

# ---- who may connect -----------------------------------------------------------------------

# as_user SETPRIV_ARGS...: run a client under setpriv; it sends "status" and prints
# "pid N", then everything the daemon sent until it closed (or "connect: ERRNO").
as_user() {
	setpriv "$@" /usr/bin/python3 -c '
import errno, os, socket, sys
print("pid", os.getpid(), flush=True)
s = socket.socket(socket.AF_UNIX)
s.settimeout(60)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect:", errno.errorcode[e.errno]); sys.exit(0)
try:
    s.sendall(b"status\n")
except OSError as e:
    pass
data = b""
try:
    s.shutdown(socket.SHUT_WR)
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
except ConnectionResetError:
    pass  # a refusing daemon closed with our command unread: its line came first
sys.stdout.write(data.decode())
' "$TD_SOCK"
}

@test "the socket is mode 0660 and the daemon's group by default; other users cannot connect" {
	td_test_user tdtest
	chmod 0755 "$TD_DIR"
	start_tagdiskd --size 64M
	[ "$(stat -c '%a %U %G %F' "$TD_SOCK")" = "660 root root socket" ]
	run as_user --reuid tdtest --regid tdtest --clear-groups
	[ "${lines[1]}" = "connect: EACCES" ]
	[ "${#lines[@]}" -eq 2 ]
}

@test "a peer that is not root, the daemon's user or in the socket's group gets one error line and is logged" {
	td_test_user tdtest
	chmod 0755 "$TD_DIR"
	printf '[admin]\nsocket_mode = 0666\n' >"$TD_DIR/td.ini"
	start_tagdiskd --size 64M -c "$TD_DIR/td.ini"
	[ "$(stat -c '%a' "$TD_SOCK")" = 666 ]
	run as_user --reuid tdtest --regid tdtest --clear-groups
	[ "${#lines[@]}" -eq 2 ]
	[ "${lines[1]}" = '{"ok":false,"error":"permission denied: not root, the daemon'"'"'s user, or a member of the socket'"'"'s group"}' ]
	local pid=${lines[0]#pid }
	grep -qx "tagdiskd: warning: admin: refused uid $(id -u tdtest) (pid $pid): not root, the daemon's user or in the socket's group" "$TD_LOG"
	# The peer's own supplementary groups count: with the daemon's group, the same user is let in.
	run as_user --reuid tdtest --regid tdtest --groups 0
	[ "$(printf '%s\n' "${lines[1]}" | td_json ok)" = true ]
	still_serving
}

@test "members of socket_group are accepted, by primary or supplementary group" {
	td_test_user tdtest
	chmod 0755 "$TD_DIR"
	printf '[admin]\nsocket_group = tdtest\n' >"$TD_DIR/td.ini"
	start_tagdiskd --size 64M -c "$TD_DIR/td.ini"
	[ "$(stat -c '%a %G' "$TD_SOCK")" = "660 tdtest" ]
	run as_user --reuid tdtest --regid tdtest --clear-groups
	[ "$(printf '%s\n' "${lines[1]}" | td_json state)" = running ]
	# nobody is in group tdtest only through its process credentials.
	run as_user --reuid nobody --regid nogroup --groups "$(getent group tdtest | cut -d: -f3)"
	[ "$(printf '%s\n' "${lines[1]}" | td_json state)" = running ]
	run as_user --reuid nobody --regid nogroup --clear-groups
	[ "${lines[1]}" = "connect: EACCES" ]
	run grep 'refused' "$TD_LOG"
	[ "$status" -eq 1 ]
}

# ---- the socket file -----------------------------------------------------------------------

@test "a regular file at the socket path is not replaced: the daemon exits 2 and says why" {
	truncate -s 64M "$TD_IMG"
	echo keep >"$TD_SOCK"
	run_tagdiskd --image "$TD_IMG" --mount "$TD_MNT" --socket "$TD_SOCK"
	[ "$status" -eq 2 ]
	# Found with the configuration, before anything is opened or created: one line.
	[ "$stderr" = "tagdiskd: --socket \"$TD_SOCK\": exists and is not a socket; refusing to replace it" ]
	[ "$(cat "$TD_SOCK")" = keep ]
	td_not_mounted "$TD_MNT"
}

@test "a stale socket is replaced; the socket is removed on exit" {
	python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$TD_SOCK"
	[ -S "$TD_SOCK" ]
	start_tagdiskd --size 64M
	grep -q "admin: removing the stale socket \"$TD_SOCK\"" "$TD_LOG"
	[ "$(td_status pid)" -eq "$TD_PID" ]
	stop_tagdiskd
	[ ! -e "$TD_SOCK" ]
}

@test "the live socket of another daemon is refused and left working" {
	start_tagdiskd --size 64M
	mkdir "$TD_DIR/mnt2"
	run_tagdiskd --image "$TD_DIR/other.img" --size 64M --mount "$TD_DIR/mnt2" --socket "$TD_SOCK"
	[ "$status" -eq 2 ]
	[ "$stderr" = "tagdiskd: --socket \"$TD_SOCK\": another process is listening on it (another tagdiskd?)" ]
	td_not_mounted "$TD_DIR/mnt2"
	# Refused before its image was created.
	[ ! -e "$TD_DIR/other.img" ]
	# The first daemon's socket is still there and still its own.
	[ -S "$TD_SOCK" ]
	[ "$(td_status pid)" -eq "$TD_PID" ]
	stop_tagdiskd
	[ ! -e "$TD_SOCK" ]
}

@test "on exit the daemon leaves alone a socket that another process put at its path" {
	start_tagdiskd --size 64M
	rm "$TD_SOCK"
	python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$TD_SOCK"
	local ino
	ino=$(stat -c %i "$TD_SOCK")
	stop_tagdiskd
	[ -S "$TD_SOCK" ]
	[ "$(stat -c %i "$TD_SOCK")" = "$ino" ]
}

# ---- fault injection -----------------------------------------------------------------------

@test "inject error op=read fails exactly the reads overlapping the range, times=K fires K times, clear restores" {
	start_tagdiskd --size 64M
	td_admin 'inject error op=read sector=1000 count=16' >/dev/null
	# 512-byte reads at sectors 998..1017, then 4 KiB reads across the edges.
	# shellcheck disable=SC2046 # one offset per word
	run td_dio read "$TD_DISK" 512 $(for s in $(seq 998 1017); do echo $((s * 512)); done)
	local expect=() s
	for s in $(seq 998 1017); do
		if ((s >= 1000 && s < 1016)); then expect+=("$((s * 512)) EIO"); else expect+=("$((s * 512)) ok"); fi
	done
	[ "$output" = "$(printf '%s\n' "${expect[@]}")" ]
	run td_dio read "$TD_DISK" 4096 $((992 * 512)) $((996 * 512)) $((1012 * 512)) $((1016 * 512))
	[ "$output" = "$(printf '%s\n' "$((992 * 512)) ok" "$((996 * 512)) EIO" "$((1012 * 512)) EIO" "$((1016 * 512)) ok")" ]
	# A read rule leaves writes alone.
	run td_dio write "$TD_DISK" 4096 $((1000 * 512))
	[ "$output" = "$((1000 * 512)) ok" ]
	[ "$(td_admin 'inject list' | td_json rules 0 fired)" -eq 18 ]
	[ "$(td_stats errors)" -eq 18 ]
	[ "$(td_admin 'inject clear' | td_json rules)" = '[]' ]
	run td_dio read "$TD_DISK" 512 $((1000 * 512)) $((1015 * 512))
	[ "$output" = "$(printf '%s\n' "$((1000 * 512)) ok" "$((1015 * 512)) ok")" ]

	# times=3: the first three matching reads fail, then it is spent.
	td_admin 'inject error op=any sector=4096 count=8 times=3' >/dev/null
	run td_dio read "$TD_DISK" 4096 $((4096 * 512)) $((4088 * 512)) $((4096 * 512)) $((4096 * 512)) $((4096 * 512))
	[ "$output" = "$(printf '%s\n' "$((4096 * 512)) EIO" "$((4088 * 512)) ok" "$((4096 * 512)) EIO" "$((4096 * 512)) EIO" "$((4096 * 512)) ok")" ]
	[ "$(td_admin 'inject list')" = '{"ok":true,"seed":1,"rules":[{"kind":"error","op":"any","sector":4096,"count":8,"times_left":0,"fired":3}]}' ]
	# op=write fails writes only.
	td_admin 'inject error op=write sector=8192 count=8' >/dev/null
	run td_dio write "$TD_DISK" 4096 $((8192 * 512))
	[ "$output" = "$((8192 * 512)) EIO" ]
	run td_dio read "$TD_DISK" 4096 $((8192 * 512))
	[ "$output" = "$((8192 * 512)) ok" ]
}

@test "inject every N with a seed fails some reads, fired equals the failed reads, and the seed repeats them" {
	start_tagdiskd --size 64M
	td_admin 'inject seed 7' >/dev/null
	td_admin 'inject every 4' >/dev/null
	local offs
	offs=$(for i in $(seq 0 299); do echo $((i * 4096)); done)
	# shellcheck disable=SC2086
	td_dio read "$TD_DISK" 4096 $offs >"$TD_DIR/run1"
	local failed fired
	failed=$(grep -c ' EIO$' "$TD_DIR/run1")
	fired=$(td_admin 'inject list' | td_json rules 0 fired)
	echo "failed $failed of 300, fired $fired" >&2
	[ "$failed" -eq "$fired" ]
	[ "$(grep -c ' ok$' "$TD_DIR/run1")" -eq $((300 - failed)) ]
	# 1 in 4 of 300: far from 0 and from 300.
	[ "$failed" -ge 40 ] && [ "$failed" -le 120 ]
	[ "$(td_stats errors)" -eq "$failed" ]
	# The same seed and the same commands fail the same reads.
	td_admin 'inject seed 7' >/dev/null
	# shellcheck disable=SC2086
	td_dio read "$TD_DISK" 4096 $offs >"$TD_DIR/run2"
	diff "$TD_DIR/run1" "$TD_DIR/run2"
	[ "$(td_admin 'inject list' | td_json rules 0 fired)" -eq $((2 * failed)) ]
	td_admin 'inject clear' >/dev/null
	# shellcheck disable=SC2086
	run td_dio read "$TD_DISK" 4096 $offs
	[ "$(grep -c ' ok$' <<<"$output")" -eq 300 ]
}

@test "inject latency delays every command by that much, and latency 0 removes it" {
	start_tagdiskd --size 64M
	[ "$(td_admin 'inject latency 100000' | td_json rules 0 latency_us)" -eq 100000 ]
	local t0 t1
	t0=$EPOCHREALTIME
	run td_dio read "$TD_DISK" 4096 0 4096 8192 12288 16384
	t1=$EPOCHREALTIME
	[ "$(grep -c ' ok$' <<<"$output")" -eq 5 ]
	took_at_least "$t0" "$t1" 0.5
	[ "$(td_admin 'inject list' | td_json rules 0 fired)" -eq 5 ]
	[ "$(td_stats latency read p50)" -ge 90000 ]
	[ "$(td_admin 'inject latency 0')" = '{"ok":true,"seed":1,"rules":[]}' ]
	# Removed means no command waits for it any more. A latency far beyond what any machine
	# needs for a read makes that plain without timing anything: 20 s (below the 30 s
	# command timeout), armed and removed; then the daemon's own latency figures show that
	# none of the next reads waited it out.
	[ "$(td_admin 'inject latency 20000000' | td_json rules 0 latency_us)" -eq 20000000 ]
	[ "$(td_admin 'inject latency 0')" = '{"ok":true,"seed":1,"rules":[]}' ]
	run td_dio read "$TD_DISK" 4096 0 4096 8192 12288 16384
	[ "$(grep -c ' ok$' <<<"$output")" -eq 5 ]
	[ "$(td_stats latency read count)" -eq 10 ]
	[ "$(td_stats latency read max)" -lt 10000000 ]
}

@test "inject hang with a short command_timeout_ms recovers by itself: timeout, reset, requeue, the read completes" {
	# 1 s: short, yet far beyond what an unhung read takes on any machine (only the hung
	# command may time out, or the counts below are off).
	printf '[drive]\ncommand_timeout_ms = 1000\n' >"$TD_DIR/td.ini"
	start_tagdiskd --size 64M -c "$TD_DIR/td.ini"
	td_admin 'inject hang' >/dev/null
	local t0 t1
	t0=$EPOCHREALTIME
	timeout 120 dd if="$TD_DISK" of=/dev/null bs=4k skip=256 count=1 iflag=direct status=none
	t1=$EPOCHREALTIME
	took_at_least "$t0" "$t1" 1
	td_admin stats >"$TD_DIR/r"
	check_json "$TD_DIR/r" '
assert (d["timeouts"], d["resets"], d["requeued"], d["retries_exhausted"], d["errors"]) == \
    (1, 1, 1, 0, 0), d
assert d["reads"] == 1 and d["drive"]["hung"] == 0, d
'
	[ "$(td_admin 'inject list')" = '{"ok":true,"seed":1,"rules":[{"kind":"hang","times_left":0,"fired":1}]}' ]
	grep -qE 'queue: tag [0-9]+ \(read, sector 2048\) timed out after [0-9]+ ms' "$TD_LOG"
	grep -q 'drive reset after a command timeout, 1 command requeued' "$TD_LOG"
	still_serving
}

@test "a permanent hang with max_retries = 2 ends in EIO for the reader after three timeouts" {
	printf '[drive]\ncommand_timeout_ms = 1000\nmax_retries = 2\n' >"$TD_DIR/td.ini"
	start_tagdiskd --size 64M -c "$TD_DIR/td.ini"
	td_admin 'inject hang times=100' >/dev/null
	run -1 --separate-stderr timeout 120 dd if="$TD_DISK" of=/dev/null bs=4k skip=256 count=1 iflag=direct status=none
	[[ "$stderr" == *"Input/output error"* ]]
	td_admin stats >"$TD_DIR/r"
	check_json "$TD_DIR/r" '
assert (d["timeouts"], d["resets"], d["requeued"], d["retries_exhausted"], d["errors"]) == \
    (3, 3, 2, 1, 1), d
'
	[ "$(td_admin 'inject list')" = '{"ok":true,"seed":1,"rules":[{"kind":"hang","times_left":97,"fired":3}]}' ]
	[ "$(td_admin tags | td_json in_use)" -eq 0 ]
	td_admin 'inject clear' >/dev/null
	dd if="$TD_DISK" of=/dev/null bs=4k skip=256 count=1 iflag=direct status=none
	still_serving
}

# ---- trace ---------------------------------------------------------------------------------

@test "trace streams Q G I D C for one direct read, with the reader's pid and one tag on D and C" {
	start_tagdiskd --size 64M
	python3 - "$TD_SOCK" "$TD_DISK" <<'PY'
import json, socket, subprocess, sys, time
s = socket.socket(socket.AF_UNIX)
s.settimeout(60)
s.connect(sys.argv[1])
s.sendall(b"trace\n")
f = s.makefile("rb")
assert f.readline() == b'{"ok":true,"trace":"started"}\n'

def run(args):
    p = subprocess.Popen(args, stderr=subprocess.DEVNULL)
    rc = p.wait()
    return p.pid, rc

def events_of(pid):
    evs = []
    while not evs or evs[-1]["action"] != "C":
        e = json.loads(f.readline())
        assert list(e) == ["time_ns", "pid", "action", "op", "fua", "sector", "sectors", "tag",
                           "error"], e
        if e["pid"] == pid:
            evs.append(e)
    return evs

dd = ["dd", "bs=4k", "count=1", "status=none"]
pid, rc = run(dd + ["if=" + sys.argv[2], "of=/dev/null", "skip=3", "iflag=direct"])
assert rc == 0
evs = events_of(pid)
assert "".join(e["action"] for e in evs) == "QGIDC", evs
for e in evs:
    assert (e["op"], e["fua"], e["sector"], e["sectors"]) == ("read", False, 24, 8), e
assert [e["tag"] for e in evs[:3]] == [-1, -1, -1], evs
assert evs[3]["tag"] == evs[4]["tag"] >= 0, evs
assert [e["error"] for e in evs] == [0] * 5, evs
t = [e["time_ns"] for e in evs]
assert t == sorted(t) and 0 < t[0] <= time.clock_gettime_ns(time.CLOCK_MONOTONIC), t

pid, rc = run(dd + ["if=/dev/zero", "of=" + sys.argv[2], "seek=5", "oflag=direct", "conv=notrunc"])
assert rc == 0
evs = events_of(pid)
assert "".join(e["action"] for e in evs) == "QGIDC", evs
assert all((e["op"], e["sector"], e["sectors"]) == ("write", 40, 8) for e in evs), evs

# A failed command completes with its error.
s2 = socket.socket(socket.AF_UNIX)
s2.connect(sys.argv[1])
s2.sendall(b"inject error op=read sector=80 count=8 times=1\n")
assert json.loads(s2.makefile("rb").readline())["ok"] is True
pid, rc = run(dd + ["if=" + sys.argv[2], "of=/dev/null", "skip=10", "iflag=direct"])
assert rc == 1
evs = events_of(pid)
assert evs[-1]["action"] == "C" and evs[-1]["error"] == -5, evs
PY
}

@test "a trace client that never reads costs events, not I/O: fio does all its I/O, status answers, {\"dropped\":N} follows" {
	requires fio
	start_tagdiskd --size 64M
	# The slow reader: subscribes, reads nothing until told to, then looks for the drop count.
	# It says "subscribed" once the daemon's reply is there (peeked at, left unread), so every
	# event from then on is for it.
	python3 - "$TD_SOCK" "$TD_DIR/go" >"$TD_DIR/slow.out" <<'PY' &
import json, os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.settimeout(60)
s.connect(sys.argv[1])
s.sendall(b"trace\n")
while b"\n" not in s.recv(4096, socket.MSG_PEEK):
    time.sleep(0.01)
print("subscribed", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
f = s.makefile("rb")
print(f.readline().decode().strip())
nbytes = 0
while nbytes < (256 << 20):
    line = f.readline()
    nbytes += len(line)
    d = json.loads(line)
    if "dropped" in d:
        print("dropped", d["dropped"], "after", nbytes, "bytes", flush=True)
        break
PY
	local slow=$!
	td_wait_until 60 grep -q subscribed "$TD_DIR/slow.out"
	# A fixed amount of I/O, twice over the disk: 32768 I/Os of about five events each, far
	# more than the reader's ring (65536 events) and buffers hold. If the stuck reader held
	# up I/O, fio would never finish.
	timeout 600 fio --name=traced --filename="$TD_DISK" --rw=randrw --bs=4k --iodepth=16 \
		--ioengine=libaio --direct=1 --size=64M --loops=2 --randrepeat=0 \
		--output-format=json --output="$TD_DIR/traced.json" &
	local fio_pid=$! n=0 reply
	# The daemon answers on other connections all the while (and at least five times).
	while kill -0 "$fio_pid" 2>/dev/null || [ "$n" -lt 5 ]; do
		reply=$(timeout 60 "$TAGDISKCTL" -s "$TD_SOCK" --json status)
		[[ "$reply" == '{"ok":true,"state":"running",'* ]]
		n=$((n + 1))
		sleep 0.2 # the pace of the status requests, not a wait for anything
	done
	wait "$fio_pid"
	python3 - "$TD_DIR/traced.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
print("fio with a stuck trace reader: %d I/Os, error %d" % (ios, j["error"]), file=sys.stderr)
assert j["error"] == 0, j["error"]
assert ios == 2 * (64 << 20) // 4096, ios
PY
	touch "$TD_DIR/go"
	wait "$slow"
	cat "$TD_DIR/slow.out" >&2
	[ "$(sed -n 2p "$TD_DIR/slow.out")" = '{"ok":true,"trace":"started"}' ]
	local n
	n=$(sed -n 's/^dropped \([0-9]*\) after .*/\1/p' "$TD_DIR/slow.out")
	[ -n "$n" ] && [ "$n" -gt 0 ]
	still_serving
}
