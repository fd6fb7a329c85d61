#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# docs/plots.sh - the README's pictures, from real runs: the HDD latency model
# ([drive] model = hdd) traced with `tagdiskctl trace --blktrace` under fio,
# drawn by iowatcher (Debian's blktrace package) as offset over time and
# latency, two runs per picture:
#
#   elevator.svg  2 sequential readers + 1 random writer (bench/bench.py's mixed
#                 load), tag depth 1: noop vs deadline
#   tcq.svg       4k random reads at QD32, noop: tag depth 1 vs 32 (the drive
#                 reorders what it holds, shortest positioning time first)
#
# Usage (root, /dev/fuse, fio, iowatcher): make plots, or
#   docs/plots.sh            [environment: BUILD=build PLOTS_SECONDS=10 PLOTS_OUT=docs/img]
# PLOTS_SECONDS is the length of each traced run; PLOTS_OUT where the SVGs go.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
SECONDS_PER_RUN=${PLOTS_SECONDS:-10}
OUT=${PLOTS_OUT:-$ROOT/docs/img}
TAGDISKD=$BUILD/tagdiskd
TAGDISKCTL=$BUILD/tagdiskctl

for tool in fio iowatcher blkparse; do
	command -v "$tool" >/dev/null || { echo "plots.sh: needs $tool (apt install fio blktrace)" >&2; exit 2; }
done
[ -x "$TAGDISKD" ] && [ -x "$TAGDISKCTL" ] || { echo "plots.sh: build first (make BUILD=$BUILD)" >&2; exit 2; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tagdisk-plots.XXXXXX")
DPID=
TPID=

cleanup() {
	[ -n "$TPID" ] && kill "$TPID" 2>/dev/null
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

printf '[drive]\nmodel = hdd\ncommand_timeout_ms = 0\n' >"$WORK/hdd.ini"

# wait_for SECONDS COMMAND...: until COMMAND succeeds, or fail after SECONDS.
wait_for() {
	n=$(($1 * 20))
	shift
	until "$@"; do
		n=$((n - 1))
		[ "$n" -gt 0 ] || { echo "plots.sh: timed out waiting for: $*" >&2; return 1; }
		sleep 0.05
	done
}

up() { [ -S "$WORK/sock" ] && mountpoint -q "$WORK/mnt"; }
tracing() { grep -q '^tagdiskctl: trace: writing' "$WORK/tracer.err"; }

# run NAME ELEVATOR DEPTH FIO_JOB_FILE: trace one fio run into $WORK/NAME.blktrace.0.
run() {
	name=$1 elevator=$2 depth=$3 job=$4
	mkdir -p "$WORK/mnt"
	"$TAGDISKD" -f -c "$WORK/hdd.ini" --image "$WORK/hdd.img" --size 4G --mount "$WORK/mnt" \
		--socket "$WORK/sock" --elevator "$elevator" --depth "$depth" >"$WORK/$name.log" 2>&1 &
	DPID=$!
	wait_for 60 up
	"$TAGDISKCTL" -s "$WORK/sock" trace --blktrace "$WORK/$name.blktrace.0" 2>"$WORK/tracer.err" &
	TPID=$!
	wait_for 60 tracing
	sed -e "s|@DISK@|$WORK/mnt/disk|" -e "s|@SECONDS@|$SECONDS_PER_RUN|" "$job" >"$WORK/job.fio"
	fio --output=/dev/null "$WORK/job.fio"
	kill -INT "$TPID"
	wait "$TPID" || { cat "$WORK/tracer.err" >&2; exit 1; }
	TPID=
	kill -TERM "$DPID"
	wait "$DPID"
	DPID=
	echo "plots.sh: $name: $(tail -n 1 "$WORK/tracer.err" | sed 's/^tagdiskctl: trace: //')"
}

# Both loads share the disk, the engine and the time.
fio_global() {
	cat <<'FIO'
[global]
filename=@DISK@
direct=1
ioengine=libaio
time_based
runtime=@SECONDS@
size=4G
FIO
}

{
	fio_global
	cat <<'FIO'
[seq1]
rw=read
bs=64k
iodepth=4
offset=0
size=2G
[seq2]
rw=read
bs=64k
iodepth=4
offset=2G
size=2G
[rand]
rw=randwrite
bs=4k
iodepth=4
FIO
} >"$WORK/mixed.fio"

{
	fio_global
	cat <<'FIO'
[randread]
rw=randread
bs=4k
iodepth=32
FIO
} >"$WORK/randread.fio"

run noop noop 1 "$WORK/mixed.fio"
run deadline deadline 1 "$WORK/mixed.fio"
run depth1 noop 1 "$WORK/randread.fio"
run depth32 noop 32 "$WORK/randread.fio"

cd "$WORK"
iowatcher -t noop -l "noop" -t deadline -l "deadline" -O io -O latency \
	-T "HDD model, 2 sequential readers + 1 random writer, tag depth 1" \
	-o "$OUT/elevator.svg" >"$WORK/iowatcher.log" 2>&1 || { cat "$WORK/iowatcher.log" >&2; exit 1; }
iowatcher -t depth1 -l "tag depth 1" -t depth32 -l "tag depth 32" -O io -O latency \
	-T "HDD model, 4k random reads QD32, noop" \
	-o "$OUT/tcq.svg" >"$WORK/iowatcher.log" 2>&1 || { cat "$WORK/iowatcher.log" >&2; exit 1; }
chmod 644 "$OUT/elevator.svg" "$OUT/tcq.svg"
ls -l "$OUT/elevator.svg" "$OUT/tcq.svg"
