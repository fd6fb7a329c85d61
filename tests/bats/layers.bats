#!/usr/bin/env bats
# The source tree's layers: includes point down (common <- engine <- daemon, common <- ctl)
# and headers form no cycle. tests/tools/check_layers.py does the checking.

load helpers

CHECK=$TD_ROOT/tests/tools/check_layers.py

setup() {
	requires python3
	TREE=$(mktemp -d "${BATS_TMPDIR:-/tmp}/tagdisk-layers.XXXXXX")
	cp -a "$TD_ROOT/src" "$TD_ROOT/include" "$TREE/"
}

teardown() {
	rm -rf "$TREE"
}

@test "the tree's includes point down the layers and its headers form no cycle" {
	run python3 "$CHECK" "$TD_ROOT"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == "layers: "*" files, includes point down, no cycle" ]]
}

@test "an engine file that includes a daemon header is caught" {
	sed -i '0,/^#include "/s||#include "daemon/config.h"\n#include "|' "$TREE/src/engine/queue.c"
	run python3 "$CHECK" "$TREE"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *'src/engine/queue.c:'*'"daemon/config.h" goes up from engine to daemon'* ]]
}

@test "the CLI including an engine header is caught" {
	sed -i '0,/^#include "/s||#include "tagdisk/queue.h"\n#include "|' "$TREE/src/ctl/tagdiskctl.c"
	run python3 "$CHECK" "$TREE"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *'src/ctl/tagdiskctl.c:'*'"tagdisk/queue.h" goes up from ctl to engine'* ]]
}

@test "a common header that includes an engine header is caught, and so is the cycle it closes" {
	# types.h includes compiler.h, so this include also closes a cycle.
	sed -i 's|^#endif|#include "tagdisk/types.h"\n#endif|' "$TREE/src/common/compiler.h"
	run python3 "$CHECK" "$TREE"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *'src/common/compiler.h:'*'"tagdisk/types.h" goes up from common to engine'* ]]
	[[ "$output" == *'include cycle: '*'compiler.h'*'types.h'* ]]
}

@test "an include of a header that does not exist is caught" {
	echo '#include "engine_gone.h"' >>"$TREE/src/engine/tag.c"
	run python3 "$CHECK" "$TREE"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *'src/engine/tag.c:'*'"engine_gone.h" does not exist'* ]]
}
