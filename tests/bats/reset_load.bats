#!/usr/bin/env bats
# The acceptance test of drive resets: fio writes at queue depth 32 and
# verifies every block it wrote while `tagdiskctl reset` invalidates every tag
# and requeues its request several times a second. Not one byte may be lost or
# misplaced, nothing may stay outstanding, and the counters must add up. The
# same for elevator and depth switches under load. The runs are counted, not
# timed: whole fio runs, each verifying all it wrote, until 80 resets (or 30
# switches) have happened, so a slow or busy machine does the same test.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires fio || return 0
}
setup() { td_setup_dir; }
teardown() {
	[ -z "${BG_PIDS:-}" ] || kill $BG_PIDS 2>/dev/null || true
	td_teardown
}

# fio_verify NAME: 4 KiB random writes at QD 32 over the whole 256 MiB disk, each block once,
# each checked (crc32c) at most 1024 writes later, the rest at the end; a mismatch stops fio
# with an error. A fixed amount of work, not a time: fio reads back every block it wrote,
# however fast or slow the machine. JSON results in $TD_DIR/NAME.json.
fio_verify() {
	(cd "$TD_DIR" && exec fio --name="$1" --filename="$TD_DISK" --rw=randwrite --bs=4k \
		--iodepth=32 --ioengine=libaio --direct=1 --size=256M \
		--verify=crc32c --do_verify=1 --verify_fatal=1 --verify_backlog=1024 \
		--randrepeat=0 --output-format=json --output="$TD_DIR/$1.json")
}

# fio_check NAME: fio found no error, wrote each of the 65536 blocks once and verified every
# one of them: as many verifying reads as writes. Prints the counts.
fio_check() {
	python3 - "$TD_DIR/$1.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
w, r = j["write"]["total_ios"], j["read"]["total_ios"]
print("# fio %s: %d writes, %d verified, error %d" % (j["jobname"], w, r, j["error"]))
assert j["error"] == 0, j["error"]
assert w == 65536, w
assert r == w, (w, r)
PY
}

# fio_rounds NAME COUNT_CMD MIN: whole fio_verify runs (NAME-1, NAME-2, ...), each checked,
# until COUNT_CMD prints a number of at least MIN (what the background job has done meanwhile;
# it runs all the while), for at most 300 s. The JSON files of the runs in FIO_JSONS.
fio_rounds() {
	local name=$1 count_cmd=$2 min=$3 round=0 n end=$((EPOCHSECONDS + 300))
	FIO_JSONS=()
	while :; do
		round=$((round + 1))
		fio_verify "$name-$round"
		FIO_JSONS+=("$TD_DIR/$name-$round.json")
		fio_check "$name-$round" >&3
		n=$($count_cmd)
		[ "$n" -lt "$min" ] || return 0
		if [ "$EPOCHSECONDS" -ge "$end" ]; then
			echo "after $round fio runs (300 s): $n of the $min wanted ($count_cmd)" >&2
			return 1
		fi
	done
}

resets_done() {
	grep -c '^reset: ' "$TD_DIR/resets.log"
}

# resets_under_fio ELEVATOR: the acceptance test with that elevator.
resets_under_fio() {
	start_tagdiskd --size 256M --elevator "$1"
	[ "$(td_status elevator)" = "$(td_elv_name "$1")" ]
	: >"$TD_DIR/resets.log"
	reset_loop &
	BG_PIDS=$!
	# As many whole verified fio runs as it takes to see at least 80 resets.
	fio_rounds "resets-$1" resets_done 80
	# Let the loop finish its last reset, so the log has every one the daemon counted.
	touch "$TD_DIR/stop"
	wait "$BG_PIDS"
	BG_PIDS=

	# Every reset was answered; the daemon counted each one and each requeue it reported.
	run grep -v '^reset: [0-9]* requests requeued$' "$TD_DIR/resets.log"
	[ "$status" -eq 1 ]
	local nr_resets requeued
	nr_resets=$(wc -l <"$TD_DIR/resets.log")
	requeued=$(awk '{ n += $2 } END { print n + 0 }' "$TD_DIR/resets.log")
	echo "# ${#FIO_JSONS[@]} fio runs; $nr_resets resets requeued $requeued requests" >&3
	[ "$nr_resets" -ge 80 ]
	[ "$requeued" -gt 0 ]
	td_admin stats >"$TD_DIR/stats.json"
	python3 - "$TD_DIR/stats.json" "$nr_resets" "$requeued" "${FIO_JSONS[@]}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
nr_resets, requeued = int(sys.argv[2]), int(sys.argv[3])
jobs = [json.load(open(p))["jobs"][0] for p in sys.argv[4:]]
fio_writes = sum(j["write"]["total_ios"] for j in jobs)
fio_reads = sum(j["read"]["total_ios"] for j in jobs)
assert d["resets"] == nr_resets, (d["resets"], nr_resets)
assert d["requeued"] == requeued, (d["requeued"], requeued)
assert (d["errors"], d["timeouts"], d["killed"], d["retries_exhausted"]) == (0, 0, 0, 0), d
assert d["in_flight"] == 0 and d["drive"]["executing"] == 0 and d["drive"]["queued"] == 0, d
# Each of fio's I/Os completed exactly once, requeued or not: as a request of its own, or
# merged into another one (fio's reads are its verification).
assert d["writes"] + d["merges"]["write"] == fio_writes, (d, fio_writes)
assert d["reads"] + d["merges"]["read"] == fio_reads, (d, fio_reads)
PY
	# Nothing stays outstanding.
	run -0 td_ctl tags
	[ "$output" = "no outstanding tags (depth 32)" ]
	[ "$(td_status tags_in_use)" -eq 0 ]
	[ "$(td_status queued)" -eq 0 ]
	[ "$(td_status requests_used)" -eq 0 ]
	run -0 td_ctl stats
	sed 's/^/# /' <<<"$output" >&3
	stop_tagdiskd
}

@test "fio randwrite QD32 with crc32c verify while tagdiskctl reset runs every 100-200 ms: no error, counters add up, nothing outstanding (deadline)" {
	resets_under_fio deadline
}

@test "fio randwrite QD32 with crc32c verify while tagdiskctl reset runs every 100-200 ms: no error, counters add up, nothing outstanding (noop)" {
	resets_under_fio noop
}

switches_done() {
	grep -c '^depth' "$TD_DIR/switch.log"
}

@test "elevator and depth switched every ~100 ms during fio verify runs, 30 times each at least: no error" {
	start_tagdiskd --size 256M
	: >"$TD_DIR/switch.log"
	local e1 e2
	e1=$(td_elv_name noop)
	e2=$(td_elv_name deadline)
	(
		elevators=("$e1" "$e2")
		depths=(1 4 32 128)
		i=0
		while [ ! -e "$TD_DIR/stop" ]; do
			"$TAGDISKCTL" -s "$TD_SOCK" elevator "${elevators[i % 2]}" >>"$TD_DIR/switch.log" 2>&1 ||
				echo FAILED >>"$TD_DIR/switch.log"
			"$TAGDISKCTL" -s "$TD_SOCK" depth "${depths[i % 4]}" >>"$TD_DIR/switch.log" 2>&1 ||
				echo FAILED >>"$TD_DIR/switch.log"
			i=$((i + 1))
			sleep 0.1 # the pace of the switches, not a wait for anything
		done
	) &
	BG_PIDS=$!
	fio_rounds switch switches_done 30
	touch "$TD_DIR/stop"
	wait "$BG_PIDS"
	BG_PIDS=
	run grep -vE "^(elevator: ($e1|$e2) -> ($e1|$e2)|depth: (1|4|32|128) -> (1|4|32|128))\$" \
		"$TD_DIR/switch.log"
	[ "$status" -eq 1 ]
	local n
	n=$(grep -c '^depth' "$TD_DIR/switch.log")
	echo "# ${#FIO_JSONS[@]} fio runs; $n elevator and $n depth switches" >&3
	[ "$n" -ge 30 ]
	[ "$(grep -c '^elevator' "$TD_DIR/switch.log")" -eq "$n" ]
	# Each switch took effect: the last ones are what status shows.
	[ "$(td_status elevator)" = "$(grep '^elevator' "$TD_DIR/switch.log" | tail -1 | awk '{ print $4 }')" ]
	[ "$(td_status depth)" -eq "$(grep '^depth' "$TD_DIR/switch.log" | tail -1 | awk '{ print $4 }')" ]
	[ "$(td_stats errors)" -eq 0 ]
	[ "$(td_status tags_in_use)" -eq 0 ]
	stop_tagdiskd
}
