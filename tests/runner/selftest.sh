#!/bin/bash
# Self-test of the runner's TAP counting (tests/runner/tap.sh), in TAP itself.
#
#   tests/runner/selftest.sh
#
# Feeds tap_count streams broken in the ways a real run breaks (cut short, no
# plan, a crash after every test passed, skips that CI must not accept) and
# checks what it counts; then checks tests/run-tests.sh's final line and exit
# status on a few of them through its "tap" mode. tests/run-tests.sh runs this
# first in its unit and all modes. Exit status: 0 when every case passed.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/runner/tap.sh
. "$here/tests/runner/tap.sh"
tmp=$(mktemp -d /tmp/tagdisk-runner-selftest.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT

# ---- the streams (each as its producer printed it) ----

s_good() { printf '1..3\nok 1 a\nok 2 b\nok 3 c\n'; }
s_truncated() { printf '1..5\nok 1 a\nok 2 b\nok 3 c\n'; }
s_no_plan() { printf 'ok 1 a\nok 2 b\nok 3 c\n'; }
s_empty() { :; }
s_too_many() { printf '1..1\nok 1 a\nok 2 b\n'; }
s_bail_out() { printf '1..3\nok 1 a\nBail out! the disk went away\n'; }
s_fuse_skip() { printf '1..2\nok 1 a\nok 2 b # skip no /dev/fuse on this machine\n'; }
s_root_skip() { printf '1..2\nok 1 a\nok 2 b # skip needs root (mounts FUSE and uses loop devices)\n'; }
s_unbuilt_skip() { printf '1..2\nok 1 a\nok 2 b # skip tagdiskd is not built (/x/tagdiskd)\n'; }
s_ceph_skip() { printf '1..2\nok 1 a\nok 2 b # skip Ceph: the test cluster did not start: x\n'; }
s_tool_skip() { printf '1..2\nok 1 a\nok 2 b # skip fio is not installed\n'; }
s_failure() { printf '1..2\nok 1 a\nnot ok 2 b\n# (in test file b.bats, line 4)\n# ok 99 printed by the test\n'; }
# bats when setup_file fails: one "not ok", the rest of the file never runs.
s_setup_file() {
	printf '1..2\nnot ok 1 setup_file failed\n# bats warning: Executed 1 instead of expected 2 tests\n'
}
# cmocka prints one plan per group, numbering each from 1, and "# SKIP" on a "not ok" line.
s_groups() {
	printf '1..2\nok 1 - a\nok 2 - b\n# ok - one\n1..3\nok 1 - c\nnot ok 2 # SKIP d\nok 3 - e\n# ok - two\n'
}
s_group_cut() { printf '1..2\nok 1 - a\nok 2 - b\n# ok - one\n1..3\nok 1 - c\n'; }
s_group_lost() { printf '1..2\nok 1 - a\nok 2 - b\n# ok - one\n'; }
s_nbd_skip() { printf '1..2\nok 1 a\nok 2 b # skip NBD: nbdkit is not installed (tests/deps.sh)\n'; }

# ---- the cases ----

# expected "passed failed skipped" of the stream | CI | exit status | stream | what is checked
cases=(
	"3 0 0|false|0|good|a complete stream whose producer exited 0 passes"
	"3 2 0|false|0|truncated|a stream cut short (1..5, three oks) fails twice"
	"3 1 0|false|0|no_plan|a stream without a plan fails"
	"0 1 0|false|0|empty|an empty stream fails"
	"3 1 0|false|1|good|all oks from a producer that exited 1 fail"
	"3 1 0|false|139|good|all oks from a producer killed by a signal fail"
	"1 1 0|false|1|failure|a reported failure with exit 1 counts once; '# ok' lines are not results"
	"0 2 0|false|1|setup_file|a bats file whose setup_file failed counts the tests it never ran"
	"2 1 0|false|0|too_many|more results than planned fail"
	"1 3 0|false|1|bail_out|Bail out! fails, and so do the results it never gave"
	"1 1 0|true|0|fuse_skip|CI=true: a skip for want of /dev/fuse fails"
	"1 0 1|false|0|fuse_skip|without CI: a skip for want of /dev/fuse is a skip"
	"1 1 0|true|0|root_skip|CI=true: a skip for want of root fails"
	"1 1 0|true|0|unbuilt_skip|CI=true: a skip because tagdiskd is not built fails"
	"1 1 0|true|0|ceph_skip|CI=true: a skip because the Ceph test cluster is missing fails"
	"1 0 1|true|0|tool_skip|CI=true: a skip for want of an optional tool is a skip"
	"4 0 1|false|0|groups|cmocka: two groups, each with its plan, pass; '# SKIP' is a skip"
	"3 2 0|false|139|group_cut|cmocka: a crash in the second group leaves its results missing"
	"2 1 0|false|134|group_lost|cmocka: a crash before the second group's plan fails on the status"
	"1 1 0|true|0|nbd_skip|CI=true: a skip because nbdkit is missing fails"
	"1 0 1|false|0|nbd_skip|without CI: a skip because nbdkit is missing is a skip"
)

# run-tests.sh's final line and exit status: "line|status" | CI | exit status | stream | what
runner_cases=(
	"3 passed, 0 failed|0|false|0|good|run-tests.sh tap: a good stream ends green, exit 0"
	"3 passed, 2 failed|1|false|0|truncated|run-tests.sh tap: a truncated stream ends red, exit 1"
	"3 passed, 1 failed|1|false|1|good|run-tests.sh tap: a producer's exit 1 ends red, exit 1"
	"1 passed, 0 failed, 1 skipped|0|false|0|fuse_skip|run-tests.sh tap: a skip is reported as one"
	"1 passed, 1 failed|1|true|0|fuse_skip|run-tests.sh tap: CI=true turns a fuse skip red"
)

echo "1..$((${#cases[@]} + ${#runner_cases[@]}))"
n=0
failed=0

# Report case $1 as ok when expected $2 equals got $3; else show what tap_count said.
report() { # what expected got
	n=$((n + 1))
	if [ "$2" = "$3" ]; then
		echo "ok $n - $1"
	else
		echo "not ok $n - $1"
		failed=$((failed + 1))
		echo "# expected \"$2\", got \"$3\"; the counter said:"
		sed 's/^/#   /' "$tmp/said"
	fi
}

for c in "${cases[@]}"; do
	IFS='|' read -r want ci status stream what <<<"$c"
	"s_$stream" >"$tmp/stream"
	# A subshell per case: fresh totals, and CI exactly as the case says.
	got=$(
		CI=$ci
		tap_count "$stream" "$tmp/stream" "$status" >"$tmp/said"
		echo "$tap_p $tap_f $tap_s"
	)
	report "$what" "$want" "$got"
done

for c in "${runner_cases[@]}"; do
	IFS='|' read -r want_line want_rc ci status stream what <<<"$c"
	"s_$stream" >"$tmp/stream"
	CI=$ci "$here/tests/run-tests.sh" . tap "$tmp/stream" "$status" "$stream" >"$tmp/said" 2>&1
	rc=$?
	[ $rc -eq 0 ] || rc=1
	report "$what" "$want_line|$want_rc" "$(tail -1 "$tmp/said")|$rc"
done
[ $failed -eq 0 ]
