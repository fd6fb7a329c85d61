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
# build/fuzz) unless --no-build is given. Exit status: 0 when nothing failed.
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

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
	for f in tests/fuzz/fuzz_*.c; do
		n=$(basename "$f" .c)
		names+=("${n#fuzz_}")
	done
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

work=$(mktemp -d /tmp/tagdisk-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT

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

if [ $build_first -eq 1 ]; then
	echo "# building the harnesses in $fuzz_build"
	make --no-print-directory -k fuzz-build FUZZ_BUILD="$fuzz_build" FUZZ_CC="$fuzz_cc" \
		>"$work/build.log" 2>&1 || sed 's/^/# /' "$work/build.log" | tail -40
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Run harness $1 and leave one result line (without the TAP number) in $work/$1.result.
run_one() {
	local name=$1 bin="$fuzz_build/fuzz_$1" log="$work/$1.log"
	local corpus="$work/corpus/$1" art="$work/art/$1/" result="$work/$1.result"
	local flags=(-max_total_time="$seconds" -print_final_stats=1 -timeout=10
		-rss_limit_mb=2048 -artifact_prefix="$art")
	local rc execs cov ft corp regress=() nreg=0 input

	if [ ! -x "$bin" ]; then
		echo "not ok - fuzz_$name was not built (see the build messages above)" >"$result"
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

i=0 failed=0
for name in "${names[@]}"; do
	i=$((i + 1))
	line=$(head -1 "$work/$name.result" 2>/dev/null || echo "not ok - fuzz_$name left no result")
	echo "${line/ok - /ok $i - }"
	tail -n +2 "$work/$name.result" 2>/dev/null
	case "$line" in not*) failed=$((failed + 1)) ;; esac
done
[ $failed -eq 0 ]
