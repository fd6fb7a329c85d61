#!/usr/bin/env bats
# The short runs of the abuse programs in tests/stress/ (make stress, make crash and
# make admin-load run the long ones): chaos under ext4 and fio, kill -9 at random points,
# and 200 admin clients under fio. Each prints its figures as TAP comments.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires fio losetup mkfs.ext4 e2fsck fusermount3 || return 0
	export TD_BUILD
}
setup() { td_check_skip; }

# run_program NAME ARGS...: run tests/stress/NAME; its output becomes TAP comments.
# Status 77 means the program found something missing on this machine: skip.
run_program() {
	local rc=0 out=$BATS_TEST_TMPDIR/out
	python3 "$TD_ROOT/tests/stress/$1" "${@:2}" >"$out" 2>&1 || rc=$?
	if [ "$rc" -eq 77 ]; then
		skip "$(sed -n 's/^SKIP: //p' "$out" | tail -n 1)"
	fi
	sed 's/^/# /' "$out" >&3
	[ "$rc" -eq 0 ]
}

@test "chaos for ${TD_STRESS_SECONDS:-60} s (resets, elevator, depth, errors, hangs, garbage on the socket) under ext4, fio verify and file churn: nothing lost" {
	run_program stress.py --seconds "${TD_STRESS_SECONDS:-60}"
}

@test "kill -9 at ${TD_CRASH_CYCLES:-8} random points of 8 fsyncing writers, in each queue mode: every record before each last fsync is there, nothing torn" {
	run_program crash.py --cycles "${TD_CRASH_CYCLES:-8}"
}

@test "200 admin clients for ${TD_ADMIN_LOAD_SECONDS:-10} s under fio randread QD32: every request answered" {
	run_program admin_load.py --seconds "${TD_ADMIN_LOAD_SECONDS:-10}"
}
