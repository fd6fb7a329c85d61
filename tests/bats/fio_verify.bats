#!/usr/bin/env bats
# fio writes with checksums and reads everything back (verify=crc32c), on the
# disk file and on a direct-I/O loop device over it, in each queue mode.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires fio losetup || return 0
}
setup() { td_setup_dir; }
teardown() { td_teardown; }

VERIFY=(--direct=1 --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0)

# run_fio NAME BYTES_PER_JOB FIO_OPTIONS...: run one fio job (or group), then check
# that every job wrote BYTES_PER_JOB, read all of it back to verify, and had no error.
run_fio() {
	local name=$1 bytes=$2
	shift 2
	# In the test directory, where fio leaves its files, and without verify state files.
	cd "$TD_DIR"
	# timeout only guards against a hang: a fixed amount of work, however slow the machine.
	run --separate-stderr timeout 900 fio --name="$name" --output-format=json \
		--output="$TD_DIR/$name.json" --verify_state_save=0 "$@"
	echo "fio status $status; stderr: $stderr" >&2
	[ "$status" -eq 0 ]
	python3 - "$TD_DIR/$name.json" "$bytes" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
# fio may put warnings ("multiple writers may overwrite...") before the JSON.
r = json.loads(text[text.index('{'):])
want = int(sys.argv[2])
assert r['jobs'], 'no jobs'
for j in r['jobs']:
    w, rd = j['write']['io_bytes'], j['read']['io_bytes']
    print('%s: err=%d write=%d read(verify)=%d' % (j['jobname'], j['error'], w, rd),
          file=sys.stderr)
    assert j['error'] == 0, j['error']
    assert w == want, (w, want)
    assert rd == want, (rd, want)
PY
}

randwrite_4k_qd32() { # target
	run_fio randwrite4k $((64 * 1024 * 1024)) --filename="$1" --rw=randwrite --bs=4k \
		--iodepth=32 --ioengine=libaio --size=64M "${VERIFY[@]}"
}

seqwrite_1m() { # target
	run_fio seqwrite1m $((256 * 1024 * 1024)) --filename="$1" --rw=write --bs=1M \
		--iodepth=8 --ioengine=libaio --size=256M "${VERIFY[@]}"
}

@test "fio verify on the disk file, rq mode with noop: 4k randwrite QD32 and 1M sequential" {
	start_tagdiskd --size 256M --mode rq --elevator noop
	randwrite_4k_qd32 "$TD_DISK"
	seqwrite_1m "$TD_DISK"
	[ "$(td_status elevator)" = "$(td_elv_name noop)" ]
	[ "$(td_status errors)" -eq 0 ]
	stop_tagdiskd
}

@test "fio verify on the disk file, rq mode with deadline: 4k randwrite QD32 and 1M sequential" {
	start_tagdiskd --size 256M --mode rq --elevator deadline
	randwrite_4k_qd32 "$TD_DISK"
	seqwrite_1m "$TD_DISK"
	[ "$(td_status elevator)" = "$(td_elv_name deadline)" ]
	[ "$(td_status errors)" -eq 0 ]
	stop_tagdiskd
}

@test "fio verify on the disk file, bio mode: 4k randwrite QD32 and 1M sequential" {
	[ -z "$TD_MODE" ] || skip "bio mode: runs in the pass without TD_MODE"
	start_tagdiskd --size 256M --mode bio
	randwrite_4k_qd32 "$TD_DISK"
	seqwrite_1m "$TD_DISK"
	[ "$(td_status mode)" = bio ]
	[ "$(td_status errors)" -eq 0 ]
	stop_tagdiskd
}

@test "fio verify on a direct-I/O loop device, rq mode: 4k randwrite QD32 and 1M sequential" {
	start_tagdiskd --size 256M --mode rq
	local dev
	dev=$(td_losetup --direct-io=on)
	[ "$(losetup -n -O DIO "$dev" | tr -d ' ')" = 1 ]
	randwrite_4k_qd32 "$dev"
	seqwrite_1m "$dev"
	[ "$(td_status errors)" -eq 0 ]
	losetup -d "$dev"
	stop_tagdiskd
}

@test "fio verify on a direct-I/O loop device, bio mode: 4k randwrite QD32 and 1M sequential" {
	[ -z "$TD_MODE" ] || skip "bio mode: runs in the pass without TD_MODE"
	start_tagdiskd --size 256M --mode bio
	local dev
	dev=$(td_losetup --direct-io=on)
	[ "$(losetup -n -O DIO "$dev" | tr -d ' ')" = 1 ]
	randwrite_4k_qd32 "$dev"
	seqwrite_1m "$dev"
	[ "$(td_status errors)" -eq 0 ]
	losetup -d "$dev"
	stop_tagdiskd
}

@test "fio verify with 4 psync jobs writing randomly side by side" {
	start_tagdiskd --size 256M
	run_fio psync4 $((32 * 1024 * 1024)) --filename="$TD_DISK" --rw=randwrite --bs=4k \
		--ioengine=psync --numjobs=4 --size=32M --offset_increment=32M "${VERIFY[@]}"
	[ "$(td_status errors)" -eq 0 ]
	stop_tagdiskd
}

@test "fio verify with 4 psync jobs and unaligned 1000-byte blocks (read-modify-write)" {
	start_tagdiskd --size 256M
	# Not direct: O_DIRECT needs aligned buffers; the disk file is direct I/O anyway.
	run_fio psync4rmw 6000000 --filename="$TD_DISK" --rw=randwrite --bs=1000 \
		--ioengine=psync --numjobs=4 --size=6000000 --offset_increment=6000000 \
		--verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0
	[ "$(td_status errors)" -eq 0 ]
	stop_tagdiskd
}
