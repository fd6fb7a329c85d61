#!/usr/bin/env bats
# docs/plots.sh (make plots), the README's pictures, still runs: a short version
# (PLOTS_SECONDS=2, into a temp dir) makes both SVGs. No pixels are compared.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires fio iowatcher blkparse || return 0
}
setup() { td_setup_dir; }
teardown() { td_teardown; }

@test "docs/plots.sh PLOTS_SECONDS=2 draws elevator.svg and tcq.svg from four traced runs" {
	run -0 --separate-stderr env PLOTS_SECONDS=2 PLOTS_OUT="$TD_DIR/img" \
		BUILD="$(dirname "$TAGDISKD")" TMPDIR="$TD_DIR" "$TD_ROOT/docs/plots.sh"
	echo "$output" | sed 's/^/# /' >&3
	local svg run
	for svg in elevator tcq; do
		[ -s "$TD_DIR/img/$svg.svg" ]
		grep -q '<svg' "$TD_DIR/img/$svg.svg"
	done
	# Each traced run wrote events, none of them lost.
	for run in noop deadline depth1 depth32; do
		grep -Eq "^plots.sh: $run: [1-9][0-9]* events" <<<"$output" ||
			{ echo "no events for $run" >&2; return 1; }
	done
	# Its work directory is gone.
	[ -z "$(find "$TD_DIR" -maxdepth 1 -name 'tagdisk-plots.*')" ]
}
