#!/usr/bin/env bats
# make plots (tools/plots/plots.py), the README's pictures, still runs: a short version
# (PLOTS_SECONDS=2, into a temp dir) traces its three HDD runs and the reset run and draws
# elevator.svg, tcq.svg and reset.svg, and bench.svg from the saved bench result
# docs/img/bench.json. Each SVG is parsed for the series it must draw (the ids
# tools/plots/tdplot.py gives them) and its caption for the numbers it must give. No pixels
# are compared. About 30 s.

load helpers
bats_require_minimum_version 1.5.0

PLOTS=$TD_ROOT/tools/plots/plots.py

setup_file() {
	requires_fuse || return 0
	requires fio || return 0
	/usr/bin/python3 -c 'import matplotlib' 2>/dev/null ||
		td_skip_file "python3-matplotlib is not installed (make deps)"
}
setup() { td_setup_dir; }
teardown() { td_teardown; }

# svg_check SVG SPEC...: each SPEC is ID=MIN: the SVG has the series ID (<g id="series-ID">,
# or ID.0, ID.1, ... for one drawn in parts) with at least MIN points: its markers or its
# path's vertices, whichever are more (a part counts one). Prints what it found.
svg_check() {
	/usr/bin/python3 - "$@" <<'PY'
import re, sys
import xml.etree.ElementTree as ET

svg, specs = sys.argv[1], sys.argv[2:]
root = ET.parse(svg).getroot()
found = {}
for g in root.iter():
    gid = g.get("id", "")
    if not gid.startswith("series-"):
        continue
    name, part = re.match(r"series-(.*?)(\.\d+)?$", gid).groups()
    if part:
        n = 1
    else:
        markers = sum(1 for e in g.iter() if e.tag.endswith("use"))
        vertices = sum(len(re.findall(r"[ML]", p.get("d", ""))) for p in g.iter()
                       if p.tag.endswith("path"))
        n = max(markers, vertices)
    found[name] = found.get(name, 0) + n
bad = []
for spec in specs:
    name, want = spec.rsplit("=", 1)
    if found.get(name, 0) < int(want):
        bad.append(f"{name}: {found.get(name, 0)} points, want at least {want}")
wanted = [s.rsplit("=", 1)[0] for s in specs]
print(f"# {svg.rsplit('/', 1)[1]}: {len(found)} series; " +
      ", ".join(f"{k} {found.get(k, 0)}" for k in wanted))
if bad:
    sys.exit("missing series in %s:\n  %s" % (svg, "\n  ".join(bad)))
PY
}

# caption SVG: the caption the SVG carries in its metadata.
caption() {
	/usr/bin/python3 -c '
import sys, xml.etree.ElementTree as ET
d = [e.text for e in ET.parse(sys.argv[1]).getroot().iter() if e.tag.endswith("description")]
print(d[0] if d else "")' "$1"
}

@test "make plots runs PLOTS_SECONDS=2 and draws each picture with its series and a caption of measured numbers" {
	# What make plots runs.
	run -0 make -s -n -C "$TD_ROOT" plots BUILD="$TD_BUILD"
	grep -q 'tools/plots/plots.py' <<<"$output"

	run env PLOTS_SECONDS=2 TMPDIR="$TD_DIR" "$PLOTS" \
		--build "$TD_BUILD" --out "$TD_DIR/img" --bench "$TD_ROOT/docs/img/bench.json"
	echo "$output" | cut -c1-200 | sed 's/^/# /' >&3
	[ "$status" -eq 0 ]
	# Each traced run wrote events; the tracer fails the run if the daemon dropped any.
	local r
	for r in depth1 deadline depth32 reset; do
		grep -Eq "^plots: $r: [1-9][0-9]* events" <<<"$output" ||
			{ echo "no events for $r" >&2; return 1; }
	done
	# Its work directory is gone.
	[ -z "$(find "$TD_DIR" -maxdepth 1 -name 'tagdisk-plots.*')" ]

	# The elevator and tagged queueing: for each run, the head's path in the zoomed window,
	# throughput per 0.5 s, Q2C median and p99 per 1 s, the seek distances.
	local pair run_
	for pair in "elevator depth1 deadline" "tcq depth1 depth32"; do
		set -- $pair
		local svg=$TD_DIR/img/$1.svg specs=()
		for run_ in "$2" "$3"; do
			specs+=("$run_-path=20" "$run_-served=20" "$run_-iops=3" "$run_-q2c-median=2"
				"$run_-q2c-p99=2" "$run_-seeks=4")
		done
		svg_check "$svg" "${specs[@]}" >&3
		run -0 caption "$svg"
		echo "# $1: $output" >&3
		[[ "$output" =~ [0-9]+\ -\>\ [0-9]+\ IOPS ]]
		[[ "$output" =~ mean\ seek\ [0-9]+\ -\>\ [0-9]+\ tracks ]]
		[[ "$output" =~ median\ Q2C\ [0-9]+\ -\>\ [0-9]+\ ms ]]
		[[ "$output" =~ p99\ Q2C\ [0-9]+\ -\>\ [0-9]+\ ms ]]
	done

	# The reset: requests at the drive and waiting, the hung command, completions, one
	# requeue bar per reset (2), the oldest command's age, and both close-ups.
	svg_check "$TD_DIR/img/reset.svg" reset-tags=100 reset-queued=100 reset-hung=2 \
		reset-completed=20 reset-requeued=2 reset-oldest=100 reset-zoom0-tags=3 \
		reset-zoom0-queued=3 reset-zoom1-tags=3 reset-zoom1-queued=3 >&3
	run -0 caption "$TD_DIR/img/reset.svg"
	echo "# reset: $output" >&3
	[[ "$output" =~ fio\ verified\ 2048\ of\ the\ 2048\ blocks\ it\ wrote,\ 0\ errors ]]
	[[ "$output" =~ the\ daemon\ counted\ 2\ resets,\ 1\ timeout,\ ([0-9]+)\ requeued,\ 0\ errors ]]
	[ "${BASH_REMATCH[1]}" -gt 0 ]

	# The bench chart: one bar per job and tagdisk target of the saved result (the raw
	# file and the pass-throughs are the scale, not bars).
	local specs=()
	mapfile -t specs < <(/usr/bin/python3 -c '
import json, re, sys
r = json.load(open(sys.argv[1]))
for j in r["jobs"]:
    for t in r["targets"][j]:
        if t != "raw" and not t.startswith("pass-"):
            print(re.sub(r"[^A-Za-z0-9_-]+", "_", f"{j}-{t}") + "=1")' "$TD_ROOT/docs/img/bench.json")
	[ "${#specs[@]}" -ge 70 ]
	svg_check "$TD_DIR/img/bench.svg" "${specs[@]}" >&3
	run -0 caption "$TD_DIR/img/bench.svg"
	echo "# bench: $output" >&3
	[[ "$output" =~ Over\ uring,\ x\ the\ pass-through,\ from\ job\ to\ job:\ bio\ [0-9.-]+,\ rq\ [0-9.-]+,\ mq\ [0-9.-]+\. ]]

	# The captions page names all four.
	[ "$(grep -c '^## .*\.svg$' "$TD_DIR/img/captions.md")" -eq 4 ]
}

@test "bench.py --chart draws the chart from a saved result; a file that is not one is refused" {
	run -0 python3 "$TD_ROOT/bench/bench.py" --build "$TD_BUILD" --out "$TD_DIR/b" \
		--chart "$TD_ROOT/docs/img/bench.json"
	[[ "$output" == "chart: $TD_DIR/b/bench.svg (from $TD_ROOT/docs/img/bench.json)" ]]
	svg_check "$TD_DIR/b/bench.svg" "4k_randread_QD32-bio-classic=1" \
		"4k_randread_QD32-rq-uring=1" "1M_seqwrite_QD8-mq-uring=1" \
		"4k_randread_QD32-qsd-classic=1" "4k_randread_QD32-loop-qsd-classic=1" >&3
	# Each tagdisk bar is also set against qemu-storage-daemon, in its label and the caption.
	grep -q "qsd)" "$TD_DIR/b/bench.svg"
	grep -q "x qemu-storage-daemon" "$TD_DIR/b/bench.svg"

	echo '{"jobs": []}' >"$TD_DIR/other.json"
	run -1 python3 "$TD_ROOT/bench/bench.py" --build "$TD_BUILD" --out "$TD_DIR/c" \
		--chart "$TD_DIR/other.json"
	[[ "$output" == *"not a saved bench result"* ]]
	[ ! -e "$TD_DIR/c/bench.svg" ]
}
