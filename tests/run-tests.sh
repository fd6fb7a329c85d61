#!/bin/bash
# Run tagdisk's tests and end with one line: "N passed, N failed, N skipped".
#
#   tests/run-tests.sh BUILD_DIR unit|bats|fuzz|all|sanitizer|valgrind
#
# Unit tests (cmocka) and integration tests (bats) both speak TAP; this script
# counts "ok", "not ok" and skips across every suite. A unit binary that
# exits non-zero without reporting a failure (a crash, a sanitizer report, a
# valgrind error) counts as one failure of its own.
set -u
build=${1:?build dir}
what=${2:-all}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
export TD_BUILD="$here/$build"
log=$(mktemp -d /tmp/tagdisk-tests.XXXXXX)
trap 'rm -rf "$log"' EXIT

pass=0 fail=0 skip=0

count_tap() { # file
	# bats prints a skip as "ok N name # skip reason", cmocka as "not ok N name # SKIP".
	local p f s
	p=$(grep -E '^ok ' "$1" | grep -civE '# skip')
	s=$(grep -ciE '^(not )?ok .*# skip' "$1")
	f=$(grep -E '^not ok ' "$1" | grep -civE '# skip')
	pass=$((pass + p))
	skip=$((skip + s))
	fail=$((fail + f))
}

run_unit() { # runner prefix...
	local t out rc
	for t in "$build"/tests/test_*; do
		[ -x "$t" ] || continue
		out="$log/$(basename "$t").tap"
		echo "# unit: $(basename "$t")"
		CMOCKA_MESSAGE_OUTPUT=TAP "$@" "$t" >"$out" 2>"$out.err"
		rc=$?
		sed 's/^/  /' "$out"
		count_tap "$out"
		if [ $rc -ne 0 ] && ! grep -qE '^not ok ' "$out"; then
			echo "not ok - $(basename "$t") exited with status $rc"
			sed 's/^/  # /' "$out.err" | tail -40
			fail=$((fail + 1))
		elif [ -s "$out.err" ] && [ $rc -ne 0 ]; then
			sed 's/^/  # /' "$out.err" | tail -40
		fi
	done
}

run_bats() { # files...
	local out="$log/bats.tap"
	if ! command -v bats >/dev/null; then
		echo "not ok - bats is not installed (run make deps)"
		fail=$((fail + 1))
		return
	fi
	echo "# integration: bats $*"
	bats --tap "$@" 2>&1 | tee "$out"
	count_tap "$out"
}

run_fuzz() { # seconds per harness
	local out="$log/fuzz.tap"
	echo "# fuzz: tests/fuzz/run.sh $1"
	tests/fuzz/run.sh "$1" 2>&1 | tee "$out"
	count_tap "$out"
}

case "$what" in
unit) run_unit ;;
fuzz) run_fuzz "${TD_FUZZ_SECONDS:-10}" ;;
bats) run_bats tests/bats ;;
all)
	run_unit
	run_bats tests/bats
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
	for f in "$log"/san/*; do
		[ -e "$f" ] || continue
		echo "not ok - sanitizer report $(basename "$f"):"
		sed 's/^/  # /' "$f" | head -150
		fail=$((fail + 1))
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
*)
	echo "usage: $0 BUILD unit|bats|fuzz|all|sanitizer|valgrind" >&2
	exit 2
	;;
esac

if [ $skip -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ $fail -eq 0 ]
