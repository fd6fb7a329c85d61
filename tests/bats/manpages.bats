#!/usr/bin/env bats
# The man pages: they render without a warning, and they document what the code has.
#
# What the code has comes from the code itself: the options from `tagdiskd --help` and
# `tagdiskctl --help`, the config keys (with defaults and reloadability) and the admin
# commands from td_config_keys[] and td_admin_commands[], printed by tests/tools/doc_facts.c
# linked against this build. tests/tools/check_man.py compares them with the .TP entries of
# the pages. The last tests feed it pages with an entry removed, to show the check can fail.

load helpers
bats_require_minimum_version 1.5.0

TAGDISKD_8=$TD_ROOT/docs/tagdiskd.8
TAGDISKCTL_8=$TD_ROOT/docs/tagdiskctl.8
TAGDISK_INI_5=$TD_ROOT/docs/tagdisk.ini.5
TAGDISK_REPLAY_8=$TD_ROOT/docs/tagdisk-replay.8
CHECK_MAN=$TD_ROOT/tests/tools/check_man.py

setup_file() {
	local cc=${CC:-cc}
	[ -x "$TAGDISKD" ] && [ -x "$TAGDISKCTL" ] || { td_skip_file "tagdiskd and tagdiskctl are not built ($TD_BUILD)"; return 0; }
	command -v python3 >/dev/null || { td_skip_file "python3 is not installed"; return 0; }
	# The facts helper links the same libraries as the daemon.
	# shellcheck disable=SC2046 # pkg-config prints several words
	"$cc" -std=gnu11 -D_GNU_SOURCE -pthread -I"$TD_ROOT/include" -I"$TD_ROOT/src" \
		-I/usr/include/iniparser -o "$BATS_FILE_TMPDIR/doc_facts" "$TD_ROOT/tests/tools/doc_facts.c" \
		"$TD_BUILD/libtddaemon.a" "$TD_BUILD/libtagdisk.a" "$TD_BUILD/libtdcommon.a" \
		$(pkg-config --libs fuse3) $(pkg-config --libs liburing) -liniparser $(pkg-config --libs json-c) -lm
	"$BATS_FILE_TMPDIR/doc_facts" >"$BATS_FILE_TMPDIR/facts"
	"$TAGDISKD" --help >"$BATS_FILE_TMPDIR/tagdiskd.help"
	"$TAGDISKCTL" --help >"$BATS_FILE_TMPDIR/tagdiskctl.help"
	"$TD_BUILD/tagdisk-replay" --help >"$BATS_FILE_TMPDIR/tagdisk-replay.help"
}

setup() {
	td_check_skip
	FACTS=$BATS_FILE_TMPDIR/facts
}

admin_commands() {
	awk -F'\t' '$1 == "command" { print $2 }' "$FACTS"
}

# The first word of each line of the "Commands:" block of tagdiskctl --help.
ctl_commands() {
	awk '/^Commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }' \
		"$BATS_FILE_TMPDIR/tagdiskctl.help"
}

# ---- rendering ---------------------------------------------------------------------------------

@test "man -l renders each page at 80 columns without a warning" {
	requires man
	local page
	for page in "$TAGDISKD_8" "$TAGDISKCTL_8" "$TAGDISK_INI_5"; do
		run --separate-stderr env MANWIDTH=80 man --warnings -l "$page"
		[ "$status" -eq 0 ] || { echo "$page: man exited $status"; false; }
		[ -z "$stderr" ] || { echo "$page: $stderr"; false; }
		[ "${#lines[@]}" -gt 50 ]
	done
}

@test "groff -man -ww finds nothing to warn about in any page" {
	requires groff
	local page
	for page in "$TAGDISKD_8" "$TAGDISKCTL_8" "$TAGDISK_INI_5"; do
		run -0 groff -man -ww -z "$page"
		[ -z "$output" ] || { echo "$page: $output"; false; }
	done
}

# has_sections PAGE SECTION...: PAGE has each .SH SECTION, in this order.
has_sections() {
	local page=$1 sh prev=0 at
	shift
	for sh in "$@"; do
		at=$(grep -nE "^\.SH \"?$sh\"?$" "$page" | cut -d: -f1)
		[ -n "$at" ] || { echo "$page: no $sh"; return 1; }
		[ "$at" -gt "$prev" ] || { echo "$page: $sh comes too early"; return 1; }
		prev=$at
	done
}

@test "each page has the sections of nbdkit's and fio's pages, in their order" {
	has_sections "$TAGDISKD_8" NAME SYNOPSIS DESCRIPTION OPTIONS SIGNALS "EXIT STATUS" \
		ENVIRONMENT FILES NOTES EXAMPLES "SEE ALSO" "REPORTING BUGS" AUTHORS COPYRIGHT
	has_sections "$TAGDISKCTL_8" NAME SYNOPSIS DESCRIPTION OPTIONS COMMANDS OUTPUT \
		"EXIT STATUS" ENVIRONMENT FILES NOTES EXAMPLES "SEE ALSO" "REPORTING BUGS" AUTHORS \
		COPYRIGHT
	has_sections "$TAGDISK_INI_5" NAME SYNOPSIS DESCRIPTION KEYS FILES EXAMPLES "SEE ALSO" \
		"REPORTING BUGS" AUTHORS COPYRIGHT
}

# see_also PAGE: the references of its SEE ALSO section, "name(section)" one a line.
see_also() {
	sed -n '/^\.SH "\?SEE ALSO"\?$/,/^\.SH /p' "$1" | sed -n 's/^\.BR \([^ ]*\) (\([0-9]\)).*/\1(\2)/p'
}

@test "SEE ALSO names the tools a reader of each page goes on to" {
	local ref
	for ref in 'tagdiskctl(8)' 'tagdisk.ini(5)' 'losetup(8)' 'fio(1)' 'mount.fuse3(8)' \
		'blktrace(8)' 'blkparse(1)' 'btt(1)' 'rbd(8)' 'nbdkit(1)' 'mlockall(2)' 'prctl(2)'; do
		grep -qxF "$ref" <(see_also "$TAGDISKD_8") || { echo "tagdiskd.8: no $ref"; false; }
	done
	for ref in 'tagdiskd(8)' 'tagdisk.ini(5)' 'iostat(1)' 'blktrace(8)' 'blkparse(1)' 'btt(1)'; do
		grep -qxF "$ref" <(see_also "$TAGDISKCTL_8") || { echo "tagdiskctl.8: no $ref"; false; }
	done
	for ref in 'tagdiskd(8)' 'tagdiskctl(8)' 'rbd(8)' 'nbdkit(1)'; do
		grep -qxF "$ref" <(see_also "$TAGDISK_INI_5") || { echo "tagdisk.ini.5: no $ref"; false; }
	done
}

@test "tagdiskd.8 NOTES say what the daemon changes and needs: mlockall, PR_SET_IO_FLUSHER, enable_uring" {
	local notes
	notes=$(sed -n '/^\.SH NOTES/,/^\.SH /p' "$TAGDISKD_8")
	[[ $notes == *mlockall* ]]
	[[ $notes == *PR_SET_IO_FLUSHER* ]]
	[[ $notes == *CAP_SYS_RESOURCE* ]]
	[[ $notes == *CAP_IPC_LOCK* ]]
	[[ $notes == */sys/module/fuse/parameters/enable_uring* ]]
	[[ $notes == *'system\-wide'* ]]
}

@test "tagdiskctl.8 OUTPUT states the units rule once, and the trace letters with blkparse's" {
	local out
	out=$(sed -n '/^\.SH OUTPUT/,/^\.SH /p' "$TAGDISKCTL_8")
	[[ $out == *'KiB (1024'* ]]
	[[ $out == *'never kB or MB'* ]]
	[[ $out == *'.BR rKiB/s'* || $out == *'rKiB/s'* ]]
	[[ $out == *'Percentiles marked'* ]]
	[[ $out == *'.B WF'* ]]
	[[ $out == *'.B FN'* ]]
	# Stated once: no other section of any page defines kB or KiB again.
	[ "$(grep -c 'KiB (1024' "$TAGDISKCTL_8" "$TAGDISKD_8" "$TAGDISK_INI_5" | awk -F: '{ n += $2 } END { print n }')" -eq 1 ]
}

@test "tagdisk.ini.5: each example is a file of its own, named, and [admin] socket says the unit replaces it" {
	local examples
	examples=$(sed -n '/^\.SH EXAMPLES/,/^\.SH /p' "$TAGDISK_INI_5")
	# Between the end of one example and the start of the next there is text.
	run -1 grep -Pzo '\.EE\n\.RE\n\.PP\n\.RS\n\.EX' <<<"$examples"
	# The file tried out first, then the three for the unit.
	[ "$(grep -c '^\[disk\]$' <<<"$examples")" -eq 4 ]
	[[ $examples == *'/etc/tagdisk/vm1.ini'* ]]
	[[ $examples == *'/etc/tagdisk/vm2.ini'* ]]
	sed -n '/^\\fBsocket\\fR = /,/^\.TP/p' "$TAGDISK_INI_5" | grep -q 'so there this key has no effect'
}

@test "tagdiskd.8 EXAMPLES use losetup, mkfs, fio and a reset" {
	local examples
	examples=$(sed -n '/^\.SH EXAMPLES/,/^\.SH /p' "$TAGDISKD_8")
	[[ $examples == *'losetup \-\-direct\-io=on'* ]]
	[[ $examples == *mkfs.ext4* ]]
	[[ $examples == *'fio \-\-name='* ]]
	[[ $examples == *'tagdiskctl \-s td.sock reset'* ]]
}

# ---- against the code --------------------------------------------------------------------------

@test "the facts helper found the code's keys and commands" {
	[ "$(grep -c '^key' "$FACTS")" -ge 30 ]
	grep -qP '^key\ttags\tdepth\tnumber\t32\tyes$' "$FACTS"
	admin_commands | grep -qx reset
	[ "$(ctl_commands | wc -l)" -ge 12 ]
}

@test "tagdiskd.8 OPTIONS documents every option of tagdiskd --help" {
	run -0 python3 "$CHECK_MAN" options "$TAGDISKD_8" OPTIONS "$BATS_FILE_TMPDIR/tagdiskd.help"
}

@test "tagdiskctl.8 documents every option of tagdiskctl --help (trace's under COMMANDS)" {
	run -0 python3 "$CHECK_MAN" options "$TAGDISKCTL_8" OPTIONS,COMMANDS \
		"$BATS_FILE_TMPDIR/tagdiskctl.help"
}

@test "tagdisk.ini.5 documents every key of td_config_keys[], with its default, and no other" {
	run -0 python3 "$CHECK_MAN" keys "$TAGDISK_INI_5" "$FACTS"
}

@test "tagdiskctl.8 COMMANDS documents every admin command and every tagdiskctl command" {
	# shellcheck disable=SC2046 # one word per command
	run -0 python3 "$CHECK_MAN" commands "$TAGDISKCTL_8" COMMANDS $(admin_commands) $(ctl_commands)
}

@test "tagdiskd.8 ADMIN SOCKET lists every admin command" {
	# shellcheck disable=SC2046
	run -0 python3 "$CHECK_MAN" commands "$TAGDISKD_8" "ADMIN SOCKET" $(admin_commands)
}

@test "tagdisk-replay.8 renders cleanly, has its sections, and documents every option of --help" {
	requires man groff
	local sh
	run --separate-stderr env MANWIDTH=80 man --warnings -l "$TAGDISK_REPLAY_8"
	[ "$status" -eq 0 ] && [ -z "$stderr" ] && [ "${#lines[@]}" -gt 100 ]
	run -0 groff -man -ww -z "$TAGDISK_REPLAY_8"
	[ -z "$output" ]
	for sh in NAME SYNOPSIS DESCRIPTION OPTIONS ENVIRONMENT "EXIT STATUS" EXAMPLES "SEE ALSO"; do
		grep -qE "^\.SH \"?$sh\"?$" "$TAGDISK_REPLAY_8" || { echo "no $sh"; false; }
	done
	run -0 python3 "$CHECK_MAN" options "$TAGDISK_REPLAY_8" OPTIONS \
		"$BATS_FILE_TMPDIR/tagdisk-replay.help"
	# The check command's environment, as replay_check.c sets it.
	for sh in TD_REPLAY_TARGET TD_REPLAY_ENTRY TD_REPLAY_FLUSHES TD_REPLAY_MARK TD_REPLAY_STATE; do
		grep -q "^\.B $sh\$" "$TAGDISK_REPLAY_8" || { echo "no $sh"; false; }
		grep -q "\"$sh\"" "$TD_ROOT/src/ctl/replay_check.c" || { echo "replay_check.c sets no $sh"; false; }
	done
}

@test "tagdiskd.8 SIGNALS names every key that SIGHUP reloads" {
	run -0 python3 "$CHECK_MAN" reload "$TAGDISKD_8" SIGNALS SIGHUP "$FACTS"
}

@test "example.ini, the installed copy of etc/tagdisk.ini, mentions every key" {
	local key
	while IFS=$'\t' read -r _ _ key _; do
		grep -qE "^;?$key =( |$)" "$TD_ROOT/etc/tagdisk.ini" || { echo "no $key in etc/tagdisk.ini"; false; }
	done < <(grep '^key' "$FACTS")
}

# ---- the check can fail ------------------------------------------------------------------------

@test "the check names a key whose entry was removed from tagdisk.ini.5" {
	# Drop the .TP entry of [tags] depth (the .TP line and its tag line).
	awk '/^\.TP$/ { held = $0; next }
	     held != "" { if ($0 ~ /^\\fBdepth\\fR/) { held = ""; next }; print held; held = "" }
	     { print }' "$TAGDISK_INI_5" >"$BATS_TEST_TMPDIR/broken.5"
	[ "$(grep -c 'fBdepth' "$BATS_TEST_TMPDIR/broken.5")" -eq 0 ]
	run -1 python3 "$CHECK_MAN" keys "$BATS_TEST_TMPDIR/broken.5" "$FACTS"
	[[ $output == *"key [tags] depth is not documented under KEYS [tags]"* ]]
}

@test "the check names a wrong default and a missing reload mark" {
	sed -e 's/^Default: 64M\.$/Default: 32M./' -e '/^\\fBfifo_batch/,/^\.TP/{/Reloaded on SIGHUP/d}' \
		"$TAGDISK_INI_5" >"$BATS_TEST_TMPDIR/broken.5"
	run -1 python3 "$CHECK_MAN" keys "$BATS_TEST_TMPDIR/broken.5" "$FACTS"
	[[ $output == *'key [drive] cache_size: its text does not say "Default: 64M"'* ]]
	[[ $output == *"key [queue] fifo_batch is reloaded on SIGHUP, its text does not say so"* ]]
}

@test "the check names an option missing from tagdiskd.8" {
	sed '/^\.BI \\-\\-workers " N"$/d' "$TAGDISKD_8" >"$BATS_TEST_TMPDIR/broken.8"
	run -1 python3 "$CHECK_MAN" options "$BATS_TEST_TMPDIR/broken.8" OPTIONS \
		"$BATS_FILE_TMPDIR/tagdiskd.help"
	[ "$output" = "$BATS_TEST_TMPDIR/broken.8: option --workers is not documented under OPTIONS" ]
}

@test "the check names a command missing from tagdiskctl.8" {
	sed '/^\.BR powerfail /d' "$TAGDISKCTL_8" >"$BATS_TEST_TMPDIR/broken.8"
	# shellcheck disable=SC2046
	run -1 python3 "$CHECK_MAN" commands "$BATS_TEST_TMPDIR/broken.8" COMMANDS $(admin_commands)
	[ "$output" = "$BATS_TEST_TMPDIR/broken.8: command powerfail is not documented under COMMANDS" ]
}
