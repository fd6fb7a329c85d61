#!/bin/bash
# Run tagdisk's libFuzzer harnesses and report one TAP line per harness.
#
#   tests/fuzz/run.sh [-j JOBS] [--no-build] SECONDS [NAME...]
#
# Each harness tests/fuzz/fuzz_NAME.c runs for SECONDS from a scratch copy of
# its seed corpus tests/fuzz/corpus/NAME/ (the repository's corpus is never
# written), with tests/fuzz/NAME.dict when there is one, and then replays
# every input kept in tests/fuzz/regress/NAME/. A harness that crashes, leaks,
# trips a sanitizer or a check, or times out is "not ok"; its input is copied
# under $FUZZ_BUILD/artifacts/NAME/ and named in the report, to be kept in
# tests/fuzz/regress/NAME/ once the bug is fixed.
#
#   ok 3 - fuzz_cdb 10s, 1234567 execs, cov 95, ft 310, corpus 57; 4 regression inputs
#
# Without clang or libFuzzer every harness is reported as skipped. The
# harnesses are built first with `make fuzz-build` (in FUZZ_BUILD, default
# build/fuzz) unless --no-build is given; when that build fails, a harness it
# did not remake is "not ok" (it may be stale) rather than run. A harness that
# exits 0 without libFuzzer's final statistics, or replays fewer regression
# inputs than it was given, is "not ok" too. Exit status: 0 when nothing failed
# (and the build, when there was one, succeeded).
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here" || exit 1

jobs=$(nproc 2>/dev/null || echo 1)
build_first=1
while [ $# -gt 0 ]; do
	case "$1" in
	-j)
		jobs=${2:?-j needs a number}
		shift 2
		;;
	--no-build)
		build_first=0
		shift
		;;
	-*)
		echo "usage: $0 [-j JOBS] [--no-build] SECONDS [NAME...]" >&2
		exit 2
		;;
	*) break ;;
	esac
done
seconds=${1:?usage: $0 [-j JOBS] [--no-build] SECONDS [NAME...]}
shift
fuzz_build=${FUZZ_BUILD:-build/fuzz}
fuzz_cc=${FUZZ_CC:-clang}

# Each name once: two jobs of one harness would share its scratch files.
names=()
declare -A seen=()
if [ $# -eq 0 ]; then
	for f in tests/fuzz/fuzz_*.c; do
		[ -e "$f" ] || continue
		n=$(basename "$f" .c)
		set -- "$@" "${n#fuzz_}"
	done
fi
for n in "$@"; do
	[ -n "${seen[$n]:-}" ] || names+=("$n")
	seen[$n]=1
done
# No harness at all is a failure, not an empty (and so green) plan.
if [ ${#names[@]} -eq 0 ]; then
	echo "1..1"
	echo "not ok 1 - no fuzz harnesses (tests/fuzz/fuzz_*.c)"
	exit 1
fi
echo "1..${#names[@]}"

skip_all() { # reason
	local i=0 n
	for n in "${names[@]}"; do
		i=$((i + 1))
		echo "ok $i - fuzz_$n # skip $1"
	done
	exit 0
}

work=$(mktemp -d /tmp/tagdisk-fuzz.XXXXXX) || exit 1

# Killed half-way: stop the harnesses still running (each job is a run_one subshell
# whose child is the fuzzer) before their scratch directory goes. The TAP plan is out
# already, so whoever reads this run sees the missing results.
cleanup() {
	local job kids

	for job in $(jobs -p); do
		kids=$(pgrep -P "$job")
		kill "$job" 2>/dev/null
		# shellcheck disable=SC2086 # one pid per word
		[ -z "$kids" ] || kill $kids 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# libFuzzer ships with clang's runtime (Debian: libclang-rt-14-dev), not with clang itself.
if ! command -v "$fuzz_cc" >/dev/null; then
	skip_all "$fuzz_cc is not installed"
fi
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; return (int)n * 0; }' \
	>"$work/probe.c"
if ! "$fuzz_cc" -fsanitize=fuzzer,address,undefined -o "$work/probe" "$work/probe.c" \
	>"$work/probe.log" 2>&1; then
	skip_all "$fuzz_cc cannot link libFuzzer ($(head -c 160 "$work/probe.log" | tr '\n' ' '))"
fi

build_failed=0
if [ $build_first -eq 1 ]; then
	echo "# building the harnesses in $fuzz_build"
	# Binaries not newer than this were not remade by the build below.
	touch "$work/build.stamp"
	if ! make --no-print-directory -k fuzz-build FUZZ_BUILD="$fuzz_build" FUZZ_CC="$fuzz_cc" \
		>"$work/build.log" 2>&1; then
		build_failed=1
		echo "# make fuzz-build failed:"
		sed 's/^/# /' "$work/build.log" | tail -40
	fi
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Run harness $1 and leave one result line (without the TAP number) in $work/$1.result.
run_one() {
	local name=$1 bin="$fuzz_build/fuzz_$1" log="$work/$1.log"
	local corpus="$work/corpus/$1" art="$work/art/$1/" result="$work/$1.result"
	local flags=(-max_total_time="$seconds" -print_final_stats=1 -timeout=10
		-rss_limit_mb=2048 -artifact_prefix="$art")
	local rc execs cov ft corp regress=() nreg=0 input ran

	if [ ! -x "$bin" ]; then
		echo "not ok - fuzz_$name was not built (see the build messages above)" >"$result"
		return
	fi
	# After a failed build an old binary would test old code and pass: do not run it.
	if [ $build_failed -eq 1 ] && ! [ "$bin" -nt "$work/build.stamp" ]; then
		echo "not ok - fuzz_$name was not remade by the failed build (it may be stale)" >"$result"
		return
	fi
	mkdir -p "$corpus" "$art"
	if [ -d "tests/fuzz/corpus/$name" ]; then
		cp -R "tests/fuzz/corpus/$name/." "$corpus/"
	fi
	[ -f "tests/fuzz/$name.dict" ] && flags+=(-dict="tests/fuzz/$name.dict")

	"$bin" "${flags[@]}" "$corpus" >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1)
	ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$cov")
	corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$cov")
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$cov")
	if [ $rc -ne 0 ]; then
		keep_artifacts "$name"
		{
			echo "not ok - fuzz_$name failed (exit $rc) after ${execs:-?} execs$(saved_as "$name")"
			grep -E 'ERROR|SUMMARY|check failed|runtime error' "$log" |
				head -8 | sed 's/^/# /'
		} >"$result"
		return
	fi
	# libFuzzer prints its final statistics only when it ran to the end: without them
	# (or with nothing executed) the harness left early, whatever its status says.
	if [ -z "$execs" ] || [ "$execs" -eq 0 ]; then
		{
			echo "not ok - fuzz_$name exited 0 but executed ${execs:-no} inputs (no final statistics)"
			tail -4 "$log" | sed 's/^/# /'
		} >"$result"
		return
	fi

	if [ -d "tests/fuzz/regress/$name" ]; then
		while IFS= read -r -d '' input; do
			regress+=("$input")
		done < <(find "tests/fuzz/regress/$name" -type f -print0 | sort -z)
	fi
	nreg=${#regress[@]}
	if [ "$nreg" -gt 0 ]; then
		"$bin" -timeout=10 -rss_limit_mb=2048 "${regress[@]}" >"$log.regress" 2>&1
		rc=$?
		if [ $rc -ne 0 ]; then
			{
				echo "not ok - fuzz_$name: a regression input fails again (exit $rc)"
				grep -E 'Running:|ERROR|SUMMARY|check failed|runtime error' \
					"$log.regress" | tail -6 | sed 's/^/# /'
			} >"$result"
			return
		fi
		# One "Executed FILE in N ms" per input: fewer means some were never replayed.
		ran=$(grep -c '^Executed ' "$log.regress")
		if [ "$ran" -ne "$nreg" ]; then
			echo "not ok - fuzz_$name: replayed $ran of $nreg regression inputs" >"$result"
			return
		fi
	fi
	echo "ok - fuzz_$name ${seconds}s, ${execs:-?} execs, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}; $nreg regression inputs" >"$result"
}

# Copy what libFuzzer saved for harness $1 out of the scratch directory.
keep_artifacts() {
	local dest="$fuzz_build/artifacts/$1"

	if compgen -G "$work/art/$1/*" >/dev/null; then
		mkdir -p "$dest"
		cp "$work/art/$1/"* "$dest/"
	fi
}

# Name, for harness $1, the inputs keep_artifacts copied.
saved_as() {
	local f
	for f in "$work/art/$1/"*; do
		[ -f "$f" ] && printf '; input saved as %s' "$fuzz_build/artifacts/$1/$(basename "$f")"
	done
}

for name in "${names[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
		wait -n
	done
	echo "# fuzz_$name: ${seconds}s"
	run_one "$name" &
done
wait

# One numbered line per harness, in order; a job that died (or wrote something else)
# leaves no well-formed result, and that is a failure too.
i=0 failed=0
for name in "${names[@]}"; do
	i=$((i + 1))
	line=$(head -1 "$work/$name.result" 2>/dev/null)
	case "$line" in
	"ok - "* | "not ok - "*) ;;
	*) line="not ok - fuzz_$name left no result" ;;
	esac
	echo "${line/ok - /ok $i - }"
	tail -n +2 "$work/$name.result" 2>/dev/null
	case "$line" in not*) failed=$((failed + 1)) ;; esac
done
if [ $build_failed -eq 1 ]; then
	echo "# make fuzz-build failed (see above): this run is a failure"
	exit 1
fi
[ $failed -eq 0 ]
