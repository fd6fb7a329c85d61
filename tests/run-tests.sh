#!/bin/bash
# Run tagdisk's tests and end with one line: "N passed, N failed, N skipped".
#
#   tests/run-tests.sh BUILD_DIR unit|bats|fuzz|all|sanitizer|valgrind
#   tests/run-tests.sh BUILD_DIR tap FILE STATUS [SUITE]
#
# BUILD_DIR is absolute or relative to the repository. The runner's self-test
# (tests/runner/selftest.sh), unit tests (cmocka), integration tests (bats)
# and the fuzz runner all speak TAP; tests/runner/tap.sh counts "ok", "not ok"
# and skips across every suite, and fails a stream that does not prove it ran
# everything: no plan, fewer results than planned, or a non-zero exit status
# without a "not ok" (a crash, a sanitizer report, a valgrind error). With
# CI=true, an integration test skipped for want of root, /dev/fuse or a built
# tagdiskd is a failure. The "tap" mode counts one saved stream whose producer
# exited with STATUS, as the other modes do.
set -u
build=${1:?build dir}
what=${2:-all}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
case "$build" in
/*) ;;
*) build=$here/$build ;;
esac
export TD_BUILD="$build"
log=$(mktemp -d /tmp/tagdisk-tests.XXXXXX) || exit 1
trap 'rm -rf "$log"' EXIT

# shellcheck source=tests/runner/tap.sh
. "$here/tests/runner/tap.sh"

# The counting itself is tested first: a runner that cannot see a failure makes every
# other line below worthless.
run_selftest() {
	local out="$log/runner-selftest.tap" rc

	echo "# runner: tests/runner/selftest.sh"
	tests/runner/selftest.sh >"$out" 2>"$out.err"
	rc=$?
	sed 's/^/  /' "$out"
	if ! tap_count runner-selftest "$out" $rc && [ -s "$out.err" ]; then
		sed 's/^/  # /' "$out.err" | tail -40
	fi
}

run_unit() { # runner prefix...
	local t name out rc found=0

	for t in "$build"/tests/test_*; do
		if [ ! -f "$t" ] || [ ! -x "$t" ]; then
			continue
		fi
		found=1
		name=$(basename "$t")
		# Needs a Ceph cluster: rbd.bats runs it against the one it starts.
		[ "$name" != test_backend_rbd ] || continue
		out="$log/$name.tap"
		echo "# unit: $name"
		CMOCKA_MESSAGE_OUTPUT=TAP "$@" "$t" >"$out" 2>"$out.err"
		rc=$?
		sed 's/^/  /' "$out"
		if ! tap_count "$name" "$out" $rc && [ -s "$out.err" ]; then
			sed 's/^/  # /' "$out.err" | tail -40
		fi
	done
	# A wrong or unbuilt BUILD_DIR would otherwise run nothing and pass.
	[ $found -eq 1 ] || tap_fail_one "unit: no test binaries in $build/tests (make unit-tests)"
}

run_bats() { # files...
	local out="$log/bats.tap" rc

	if ! command -v bats >/dev/null; then
		tap_fail_one "bats is not installed (run make deps)"
		return
	fi
	echo "# integration: bats $*"
	bats --tap "$@" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	tap_count bats "$out" "$rc"
}

# The files both FUSE transports must pass: run again over io_uring (they skip, with one
# line, where the kernel has no FUSE over io_uring).
URING_BATS="tests/bats/disk_semantics.bats tests/bats/daemon.bats tests/bats/crash.bats
	tests/bats/reset_load.bats tests/bats/fio_verify.bats tests/bats/admin.bats
	tests/bats/stuck_backend.bats tests/bats/latency_depth.bats"
# (make asan and make tsan name them "@uring-pass" in their own uring lists.)

# The queue tests mq mode must pass as rq mode does: run again with TD_MODE=mq (helpers.bash
# turns each test's rq into mq): resets under load, fio verify, and from admin.bats the tags,
# reset, timeout and requeue, elevator and depth cases.
MQ_FIO_FILTER='rq mode|psync jobs'
MQ_ADMIN_FILTER='tags during an injected hang|elevator and depth|inject hang with a short|permanent hang'

run_fuzz() { # seconds per harness
	local out="$log/fuzz.tap" rc

	echo "# fuzz: tests/fuzz/run.sh $1"
	tests/fuzz/run.sh "$1" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	tap_count fuzz "$out" "$rc"
}

case "$what" in
unit)
	run_selftest
	run_unit
	;;
fuzz) run_fuzz "${TD_FUZZ_SECONDS:-10}" ;;
bats) run_bats tests/bats ;;
all)
	run_selftest
	run_unit
	run_bats tests/bats
	# shellcheck disable=SC2086
	TD_TRANSPORT=uring run_bats $URING_BATS
	TD_MODE=mq run_bats tests/bats/reset_load.bats
	TD_MODE=mq run_bats --filter "$MQ_FIO_FILTER" tests/bats/fio_verify.bats
	TD_MODE=mq run_bats --filter "$MQ_ADMIN_FILTER" tests/bats/admin.bats
	run_fuzz "${TD_FUZZ_SECONDS:-10}"
	;;
sanitizer)
	# Every instrumented process (unit tests, daemons, tagdiskctl) writes its reports to
	# files here, so a report is seen even from a daemon whose exit status no test
	# checks (one stopped by teardown); each file counts as one failure, printed below.
	mkdir "$log/san"
	for v in ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS; do
		export "$v=${!v:+${!v}:}log_path=$log/san/${v%%_*}"
	done
	run_unit
	if [ -n "${TD_SANITIZER_BATS:-}" ]; then
		# shellcheck disable=SC2086
		run_bats $TD_SANITIZER_BATS
	fi
	if [ -n "${TD_SANITIZER_URING_BATS:-}" ]; then
		# shellcheck disable=SC2086
		TD_TRANSPORT=uring run_bats ${TD_SANITIZER_URING_BATS//@uring-pass/$URING_BATS}
	fi
	for f in "$log"/san/*; do
		[ -e "$f" ] || continue
		tap_fail_one "sanitizer report $(basename "$f"):"
		sed 's/^/  # /' "$f" | head -150
	done
	;;
valgrind)
	run_unit valgrind -q --error-exitcode=99 --leak-check=full \
		--errors-for-leak-kinds=definite --show-leak-kinds=definite
	if [ -n "${TD_VALGRIND_BATS:-}" ]; then
		# shellcheck disable=SC2086
		run_bats $TD_VALGRIND_BATS
	fi
	;;
tap)
	file=${3:?usage: $0 BUILD tap FILE STATUS [SUITE]}
	status=${4:?usage: $0 BUILD tap FILE STATUS [SUITE]}
	tap_count "${5:-$(basename "$file")}" "$file" "$status"
	;;
*)
	echo "usage: $0 BUILD unit|bats|fuzz|all|sanitizer|valgrind" >&2
	echo "       $0 BUILD tap FILE STATUS [SUITE]" >&2
	exit 2
	;;
esac

tap_summary
