#!/usr/bin/env bats
# The admin socket and the command timeout never wait for the drive. With the default inline
# drive (workers = 0) whoever runs the queue executes the commands it dispatches; a reset, asked
# for on the socket or by the timer, must leave the requeued commands to the queue's own thread
# (td-kblockd) instead of executing them itself. Each test holds a write in an injected latency
# and shows by the order of events, not by timing, that the daemon answers and resets meanwhile.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
}
setup() { td_setup_dir; }
teardown() {
	[ -z "${BG_PIDS:-}" ] || kill $BG_PIDS 2>/dev/null || true
	td_teardown
}

# one_tag: the sector of the one command outstanding, from a "tags" reply on stdin.
one_tag() {
	python3 -c '
import json, sys
d = json.loads(sys.stdin.readline())
assert d["ok"] and len(d["tags"]) == 1, d
print(d["tags"][0]["sector"])
'
}

tags_one() {
	td_admin tags | one_tag
}

@test "with inject latency on the inline drive, reset and status answer while the write it requeued is delayed" {
	start_tagdiskd --size 64M
	[ "$(td_status workers)" -eq 0 ]
	# The write is held at its first dispatch (so the test can see it at leisure), then
	# delayed 2 s at the dispatch after the reset.
	[ "$(td_admin 'inject hang times=1' | td_json ok)" = true ]
	[ "$(td_admin 'inject latency 2000000' | td_json ok)" = true ]
	dd if=/dev/zero of="$TD_DISK" bs=4k seek=100 count=1 oflag=direct conv=notrunc status=none &
	BG_PIDS=$!
	[ "$(td_wait_for 60 "the write to be held" tags_one)" -eq 800 ]

	# One connection, answered in turn, with no client in between. The reset must answer
	# before the requeued write has waited out its 2 s in td-kblockd: the status after it still
	# counts the write (queued or in flight). Had the reset executed the write itself, it would
	# have answered only after the write, and dd's only write, had completed.
	printf 'tags\nreset\nstatus\ntags\n' | td_admin_lines 4 >"$TD_DIR/replies"
	python3 - "$TD_DIR/replies" <<'PY'
import json, sys
tags1, reset, status, tags2 = [json.loads(l) for l in open(sys.argv[1])]
assert [(t["sector"], t["retries"]) for t in tags1["tags"]] == [(800, 0)], tags1
assert reset == {"ok": True, "requeued": 1}, reset
assert status["ok"] and status["in_flight"] + status["queued"] == 1, status
assert status["resets"] == 1, status
# In flight by now or not yet: either way the same write, charged no retry by a user's reset.
assert [(t["sector"], t["retries"]) for t in tags2["tags"]] in ([(800, 0)], []), tags2
PY
	wait "$BG_PIDS"
	BG_PIDS=
	td_admin stats >"$TD_DIR/stats"
	python3 - "$TD_DIR/stats" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert (d["writes"], d["errors"], d["resets"], d["requeued"], d["timeouts"]) == (1, 0, 1, 1, 0), d
PY
	# Two dispatches: the first held by the hang, the one after the reset delayed.
	[ "$(td_admin 'inject list' | td_json rules 0 fired)" -eq 1 ]
	[ "$(td_admin 'inject list' | td_json rules 1 kind)" = latency ]
	[ "$(td_admin 'inject list' | td_json rules 1 fired)" -eq 2 ]
}

@test "with inject latency on the inline drive, command timeouts are enforced: three of them, then EIO" {
	# The write's latency (20 s) is far longer than three timeouts (1 s each) take. Each timeout
	# requeues it to td-kblockd, where it is delayed again, and the timer goes on looking; had
	# the timer executed the requeued write itself, it would have waited the 20 s out with it and
	# the write would have succeeded.
	printf '[drive]\ncommand_timeout_ms = 1000\nmax_retries = 2\n' >"$TD_DIR/td.ini"
	start_tagdiskd --size 64M -c "$TD_DIR/td.ini"
	[ "$(td_status workers)" -eq 0 ]
	[ "$(td_admin 'inject latency 20000000' | td_json ok)" = true ]
	run -1 --separate-stderr timeout 120 dd if=/dev/zero of="$TD_DISK" bs=4k seek=100 count=1 \
		oflag=direct conv=notrunc status=none
	[[ "$stderr" == *"Input/output error"* ]]
	td_admin stats >"$TD_DIR/stats"
	python3 - "$TD_DIR/stats" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert (d["timeouts"], d["resets"], d["requeued"], d["retries_exhausted"], d["errors"]) == \
    (3, 3, 2, 1, 1), d
PY
	# Still serving, and the admin socket answers: a read without the latency completes.
	td_admin 'inject clear' >/dev/null
	dd if="$TD_DISK" of=/dev/null bs=4k count=1 iflag=direct status=none
	[ "$(td_status in_flight)" -eq 0 ]
}
