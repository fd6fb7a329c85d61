#!/usr/bin/env bats
# Modelled latency never caps the queue. With the default workers = 0 the thread that runs the
# queue executes the commands itself; an injected latency used to be slept out in that thread,
# so the tags in flight were capped at the number of threads that receive FUSE requests: over
# FUSE io_uring (one ring thread per CPU) fio at queue depth 32 saw 1 or 2 of 32 (the classic
# transport hid it by starting a thread per waiting request). Now a delayed command waits on
# the drive's own timer, as null_blk's timer completion does, and fio at QD 32 fills every
# tag on either transport, with no request left waiting in the transport. The ssd and hdd
# models, which run on threads of their own, must do the same. Each case waits (with a
# deadline) until status shows 32 tags in flight while fio runs, then stops cleanly.
# tests/run-tests.sh runs this file over io_uring too.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires fio || return 0
}
setup() {
	td_setup_dir
	fusectl_mounted
}
teardown() {
	stop_fio
	td_teardown
}

# fio_qd32: random 4 KiB O_DIRECT reads at queue depth 32 on the disk file, in the background,
# until stop_fio.
fio_qd32() {
	(cd "$TD_DIR" && exec fio --name=qd32 --filename="$TD_DISK" --rw=randread --bs=4k \
		--iodepth=32 --ioengine=libaio --direct=1 --time_based --runtime=600 \
		--output="$TD_DIR/fio.out") &
	FIO_PID=$!
}

stop_fio() {
	[ -n "${FIO_PID:-}" ] || return 0
	kill "$FIO_PID" 2>/dev/null || true
	wait "$FIO_PID" 2>/dev/null || true
	FIO_PID=
}

# fusectl_mounted: the fusectl file system, through which status counts the requests waiting
# in the transport, is mounted: the system's, or one of this test's own.
fusectl_mounted() {
	awk '$3 == "fusectl" { found = 1 } END { exit !found }' /proc/mounts && return 0
	mkdir "$TD_DIR/fusectl"
	mount -t fusectl fusectl "$TD_DIR/fusectl"
}

# all_tags_in_flight: status shows every one of the 32 tags in use, 32 requests in flight and
# none waiting in the transport (prints what it saw).
all_tags_in_flight() {
	td_admin status | python3 -c '
import json, sys
d = json.loads(sys.stdin.readline())
print("tags %d/%d, in flight %d, queued %d, waiting in the transport %s" %
      (d["tags_in_use"], d["depth"], d["in_flight"], d["queued"], d["transport_waiting"]))
sys.exit(0 if d["tags_in_use"] == d["depth"] == 32 and d["in_flight"] == 32 and
         d["transport_waiting"] == 0 else 1)'
}

# printer_shows_all_tags: tagdiskctl status prints every tag in use and 32 in flight.
printer_shows_all_tags() {
	local out
	out=$(td_ctl status) || return 1
	echo "$out"
	grep -Eq '^tags +32/32$' <<<"$out" && grep -Eq '^in flight +32$' <<<"$out"
}

# qd32_fills_the_tags: with fio at QD 32 running, status reaches 32 tags in flight, and the
# printer shows it too; fio then stops and the daemon stops cleanly. Each is waited for: a
# completion leaves 31 in flight until fio sends the next read, so two samples in a row
# need not both see 32 (under TSan on the ring, they did not).
qd32_fills_the_tags() {
	local seen
	fio_qd32
	seen=$(td_wait_for 120 "32 tags in flight under fio at QD 32" all_tags_in_flight)
	echo "# $seen" >&3
	td_wait_for 120 "tagdiskctl status printing 32 tags in flight" printer_shows_all_tags \
		>/dev/null
	stop_fio
}

@test "inject latency with workers = 0: fio at QD 32 keeps all 32 tags in flight" {
	start_tagdiskd --size 64M
	[ "$(td_status workers)" -eq 0 ]
	run -0 td_ctl inject latency 500000
	qd32_fills_the_tags
	run -0 td_ctl inject clear
	stop_tagdiskd
}

@test "the ssd model with workers = 0: fio at QD 32 keeps all 32 tags in flight" {
	printf '[drive]\nmodel = ssd\nssd_latency_us = 50000\n' >"$TD_DIR/td.ini"
	start_tagdiskd -c "$TD_DIR/td.ini" --size 64M
	[ "$(td_status model)" = ssd ]
	qd32_fills_the_tags
	stop_tagdiskd
}

@test "the hdd model: fio at QD 32 keeps all 32 tags in flight" {
	printf '[drive]\nmodel = hdd\nhdd_overhead_us = 50000\n' >"$TD_DIR/td.ini"
	start_tagdiskd -c "$TD_DIR/td.ini" --size 64M
	[ "$(td_status model)" = hdd ]
	qd32_fills_the_tags
	stop_tagdiskd
}
