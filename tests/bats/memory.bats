#!/usr/bin/env bats
# The daemon's memory after a burst of large direct I/O (issue 11). Everything
# tagdiskd maps is locked (mlockall), so what its buffer pool keeps is locked
# memory; the pool used to keep up to 256 free buffers per size class forever.
#
# What is measured: "Locked:" of /proc/PID/smaps_rollup (pages resident in
# locked mappings) and VmRSS. Not VmLck: under mlockall(MCL_FUTURE) it counts
# whole mappings, resident or not, and is dominated by glibc's per-thread
# malloc arenas (64 MiB of PROT_NONE address space each, up to 8 per CPU),
# which hold no memory; it is printed for information.
#
# The bound, above what the idle daemon holds:
#   28 MiB + 32 KiB  the pool's reserve of free buffers (bufpool.h,
#                    td_bufpool_reserve_bytes() for the front end's classes)
#   10 x 1028 KiB    the receive buffer each idle FUSE thread holds (at most
#                    MAX_IDLE = 10 stay, fuse_session.c)
#   8 MiB            everything else: touched thread stacks, malloc arenas,
#                    recycled fe_io structures, the engine's requests

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires fio || return 0
}
setup() { td_setup_dir; }
teardown() { td_teardown; }

RESERVE_KIB=$((28 * 1024 + 32))
IDLE_THREADS_KIB=$((10 * 1028))
SLACK_KIB=$((8 * 1024))

# mem_kib FIELD: Locked (smaps_rollup) or VmRSS, VmLck (status) of the daemon, in KiB.
mem_kib() {
	case "$1" in
	Locked) awk '$1 == "Locked:" { print $2 }' "/proc/$TD_PID/smaps_rollup" ;;
	*) awk -v k="$1:" '$1 == k { print $2 }' "/proc/$TD_PID/status" ;;
	esac
}

# below FIELD BOUND_KIB: the field is at most the bound (prints the figure either way).
below() {
	local v
	v=$(mem_kib "$1")
	echo "$1 $v kB, bound $2 kB"
	[ "$v" -le "$2" ]
}

# check_after_burst NAME FIO_ARGS...: run the burst, then wait for the memory to settle
# under the bound (the last buffers go back to the pool just after their replies).
check_after_burst() {
	local name=$1 locked0 rss0 vmlck0 extra
	shift
	locked0=$(mem_kib Locked)
	rss0=$(mem_kib VmRSS)
	vmlck0=$(mem_kib VmLck)
	extra=$((RESERVE_KIB + IDLE_THREADS_KIB + SLACK_KIB))
	run --separate-stderr timeout 300 fio --output-format=terse --direct=1 --ioengine=libaio \
		--filename="$TD_DISK" "$@"
	echo "fio status $status; stderr: $stderr" >&2
	[ "$status" -eq 0 ]
	echo "# $name: idle Locked ${locked0} kB, VmRSS ${rss0} kB, VmLck ${vmlck0} kB;" \
		"bound: idle + $extra kB" >&3
	td_wait_for 60 "locked memory to fall under the bound" below Locked $((locked0 + extra))
	td_wait_for 60 "VmRSS to fall under the bound" below VmRSS $((rss0 + extra))
	echo "# $name: after the burst Locked $(mem_kib Locked) kB, VmRSS $(mem_kib VmRSS) kB," \
		"VmLck $(mem_kib VmLck) kB" >&3
}

@test "after a burst of 1 MiB direct I/O, the pool keeps only its reserve" {
	start_tagdiskd --size 512M
	# Two writers and two readers side by side, QD32 each: up to 128 requests of 1 MiB
	# in flight (nr_requests and max_background are 128).
	check_after_burst "1 MiB writes + reads, 4 jobs at QD32" --bs=1M --iodepth=32 --size=128M \
		--name=w1 --rw=write --offset=0 --name=w2 --rw=write --offset=128M \
		--name=r1 --rw=read --offset=256M --name=r2 --rw=read --offset=384M
	[ "$(td_status errors)" -eq 0 ]
}

@test "after a burst of mixed sizes (4 KiB to 1 MiB), every class keeps only its reserve" {
	start_tagdiskd --size 512M
	check_after_burst "mixed sizes randrw, 2 jobs at QD64" --rw=randrw --iodepth=64 \
		--size=512M --bssplit=4k/10:16k/10:64k/10:128k/10:256k/20:512k/20:1m/20 \
		--name=mixed --numjobs=2 --io_size=384M --randrepeat=0
	[ "$(td_status errors)" -eq 0 ]
}
