#!/usr/bin/env bats
# The examples of the README, of the man pages and of docs/backends.md work as pasted.
#
# tests/tools/examples.py extracts the blocks marked as runnable examples (```sh example
# in Markdown, `.\" example` before .EX in a man page) as a reader would copy them: the
# Markdown text as it is, a man page's as man(1) prints it. Each document's examples then
# run in order, unedited, in one root shell (bash -e: the first command that fails stops
# it), in an empty directory of their own, with only PATH set, to the build's binaries,
# in a fresh environment. A command that fails is reported with its example, the line
# of the document and the shell's output.
#
# Examples clean up after themselves: once they have run, no daemon of theirs may be
# left (each has a little while to finish its stop), nor a mount, a loop device or a
# socket in /run/tagdisk. Whatever is left fails the test, and teardown removes it.
#
# The last tests show that the run fails when an example does, and what the extraction
# refuses.

load helpers
bats_require_minimum_version 1.5.0

EXAMPLES_PY=$TD_ROOT/tests/tools/examples.py
# What a fresh root shell on Debian has in PATH, after the build's directory.
SYSTEM_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

setup_file() {
	requires_fuse || return 0
	[ -x "$TAGDISKCTL" ] || { td_skip_file "tagdiskctl is not built ($TAGDISKCTL)"; return 0; }
	requires python3 man fio losetup mkfs.ext4 e2fsck jq blkparse btt || return 0
}

setup() {
	td_check_skip
	EX_DIR=
}

teardown() {
	examples_cleanup
}

# ex_daemons [DIR [NAME]]: the pids of the NAME (tagdiskd) processes that have a file of DIR
# (EX_DIR) open, their image: the examples' daemons (or NBD servers), wherever they sit.
ex_daemons() {
	local pid dir=${1:-$EX_DIR}
	[ -n "$dir" ] || return 0
	for pid in $(pgrep -x "${2:-tagdiskd}"); do
		if find "/proc/$pid/fd" -maxdepth 1 -lname "$dir/*" 2>/dev/null | grep -q .; then
			echo "$pid"
		fi
	done
}

# ex_mounts [TYPE]: the mount points under EX_DIR (of that file system type), in mount order.
ex_mounts() {
	awk -v d="$EX_DIR/" -v t="${1:-}" 'index($2, d) == 1 && (t == "" || $3 == t) { print $2 }' /proc/mounts
}

# ex_leftovers: one line per thing the examples left behind; nothing when they cleaned up.
ex_leftovers() {
	local pid dev back entry
	awk -v d="$EX_DIR/" 'index($2, d) == 1 { print "a mount on " $2 " (" $3 ")" }' /proc/mounts
	losetup -nl -O NAME,BACK-FILE 2>/dev/null | while read -r dev back; do
		case "$back" in "$EX_DIR"/*) echo "loop device $dev on $back" ;; esac
	done
	for pid in $(ex_daemons) $(ex_daemons "$EX_DIR" nbdkit); do
		echo "$(cat "/proc/$pid/comm" 2>/dev/null) $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
	done
	if [ -d /run/tagdisk ]; then
		for entry in /run/tagdisk/*; do
			[ -e "$entry" ] || continue
			grep -qxF "$entry" "$BATS_TEST_TMPDIR/run-tagdisk.before" || echo "$entry"
		done
	fi
}

# run_examples DOC: run DOC's examples (a path under the tree, or absolute) as described
# above. Sets status and output like `run`; the output ends with the shell's own.
run_examples() {
	local doc=$1 path=$1 blocks=$BATS_TEST_TMPDIR/blocks n line end
	[[ $path == /* ]] || path=$TD_ROOT/$doc
	NR_EXAMPLES=0
	EX_LEFT=
	rm -rf "$blocks"
	run python3 "$EXAMPLES_PY" extract "$path" "$blocks"
	[ "$status" -eq 0 ] || return 0
	NR_EXAMPLES=${#lines[@]}
	{
		echo "set -e"
		# shellcheck disable=SC2016 # expanded when the trap fires
		echo 'trap '\''echo "examples: '"$doc"':$((td_line + LINENO - 1)) (example $td_example, its line $LINENO) failed with status $?: $BASH_COMMAND" >&2'\'' ERR'
		while read -r n line; do
			echo "td_example=$n td_line=$line"
			echo ". '$blocks/$n.sh'"
		done <<<"$output"
		echo "echo \"examples: $doc: all $NR_EXAMPLES ran\""
	} >"$BATS_TEST_TMPDIR/driver.sh"

	EX_DIR=$(mktemp -d /tmp/tagdisk-examples.XXXXXX)
	find /run/tagdisk -mindepth 1 -maxdepth 1 >"$BATS_TEST_TMPDIR/run-tagdisk.before" 2>/dev/null || true
	[ -d /run/tagdisk ] && RUN_TAGDISK_WAS_THERE=1 || RUN_TAGDISK_WAS_THERE=0
	run bash -c 'cd "$1" && exec env -i HOME="$HOME" PATH="$2" timeout -s KILL 900 bash "$3" </dev/null 2>&1' \
		_ "$EX_DIR" "$TD_BUILD:$SYSTEM_PATH" "$BATS_TEST_TMPDIR/driver.sh"
	EX_STATUS=$status
	EX_OUTPUT=$output
	# The stops are asynchronous (umount, kill return before the process has exited): wait
	# while some daemon has lost its mount but not exited yet, or an NBD server runs.
	end=$((EPOCHSECONDS + 60))
	while { [ "$(ex_daemons | wc -l)" -gt "$(ex_mounts fuse.tagdisk | wc -l)" ] ||
		[ -n "$(ex_daemons "$EX_DIR" nbdkit)" ]; } && [ "$EPOCHSECONDS" -lt "$end" ]; do
		sleep 0.1
	done
	EX_LEFT=$(ex_leftovers)
	status=$EX_STATUS
	output=$EX_OUTPUT
}

# examples_pass DOC MIN: DOC has at least MIN examples, they all ran, nothing was left.
examples_pass() {
	run_examples "$1"
	if [ "$status" -ne 0 ] || [ -n "$EX_LEFT" ]; then
		echo "$output" | tail -60
		echo "exit status $status"
		[ -z "$EX_LEFT" ] || echo "the examples left behind: $EX_LEFT"
		return 1
	fi
	[ "$NR_EXAMPLES" -ge "$2" ] || { echo "$1: $NR_EXAMPLES examples, expected $2 at least"; return 1; }
	[[ "${lines[-1]}" == "examples: $1: all $NR_EXAMPLES ran" ]]
	echo "# $1: $NR_EXAMPLES example(s) ran" >&3
}

examples_cleanup() {
	local mnt dev back pid
	[ -n "${EX_DIR:-}" ] || return 0
	# Processes of the examples still working there (fio after a failure).
	for pid in $(pgrep -x fio); do
		case "$(readlink "/proc/$pid/cwd" 2>/dev/null)" in "$EX_DIR"*) kill -KILL "$pid" 2>/dev/null || true ;; esac
	done
	# Loop devices on a disk file while its mount is still there (once the mount is detached
	# their file reads "/disk"); one still mounted is freed when its file system goes.
	losetup -nl -O NAME,BACK-FILE 2>/dev/null | while read -r dev back; do
		case "$back" in "$EX_DIR"/*) losetup -d "$dev" 2>/dev/null || true ;; esac
	done
	# Innermost mounts first: ext4 on a loop device on a tagdisk mount.
	for mnt in $(ex_mounts | tac); do
		umount -l "$mnt" 2>/dev/null || true
	done
	losetup -nl -O NAME,BACK-FILE 2>/dev/null | while read -r dev back; do
		case "$back" in "$EX_DIR"/*) losetup -d "$dev" 2>/dev/null || true ;; esac
	done
	for pid in $(ex_daemons); do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for _ in $(seq 100); do
		[ -n "$(ex_daemons)" ] || break
		sleep 0.1
	done
	for pid in $(ex_daemons); do
		kill -KILL "$pid" 2>/dev/null || true
	done
	# An NBD server, perhaps stopped (SIGSTOP) by the example.
	for pid in $(ex_daemons "$EX_DIR" nbdkit); do
		kill -KILL "$pid" 2>/dev/null || true
	done
	if [ -d /run/tagdisk ]; then
		for mnt in /run/tagdisk/*; do
			[ -e "$mnt" ] || continue
			grep -qxF "$mnt" "$BATS_TEST_TMPDIR/run-tagdisk.before" || rm -f "$mnt"
		done
		# Restore what the machine had: no /run/tagdisk, unless it was there.
		[ "${RUN_TAGDISK_WAS_THERE:-1}" -eq 1 ] || rmdir /run/tagdisk 2>/dev/null || true
	fi
	rm -rf "$EX_DIR"
	EX_DIR=
}

# ---- the documents -----------------------------------------------------------------------------

@test "README.md: every example runs as pasted, in order, and cleans up after itself" {
	examples_pass README.md 6
}

@test "tagdiskd(8) EXAMPLES run as pasted, in order, and clean up after themselves" {
	examples_pass docs/tagdiskd.8 3
}

@test "tagdiskctl(8) EXAMPLES run as pasted, in order, and clean up after themselves" {
	examples_pass docs/tagdiskctl.8 4
}

@test "tagdisk.ini(5) EXAMPLES run as pasted, in order, and clean up after themselves" {
	examples_pass docs/tagdisk.ini.5 1
}

@test "docs/backends.md: the NBD example runs as pasted and cleans up after itself" {
	requires nbdkit
	requires_backend nbd
	examples_pass docs/backends.md 1
}

# ---- the check can fail ------------------------------------------------------------------------

@test "a failing command stops the run, named with its example and line" {
	cat >"$BATS_TEST_TMPDIR/doc.md" <<'EOF'
Some text.

```sh example
echo first >file
```

```sh
false    # not an example: not run
```

```sh example
cat file
false    # this one breaks
echo never
```
EOF
	run_examples "$BATS_TEST_TMPDIR/doc.md"
	[ "$status" -eq 1 ]
	[ "$NR_EXAMPLES" -eq 2 ]
	[[ $output == *"first"* ]]
	[[ $output != *never* ]]
	[[ $output == *"doc.md:13 (example 02, its line 2) failed with status 1: false"* ]]
	[ -z "$EX_LEFT" ]
}

@test "a daemon an example leaves running is found, and removed by teardown" {
	local dir
	cat >"$BATS_TEST_TMPDIR/doc.md" <<'EOF'
```sh example
mkdir -p mnt
tagdiskd --image left.img --size 16M --mount mnt --socket left.sock
```
EOF
	run_examples "$BATS_TEST_TMPDIR/doc.md"
	[ "$status" -eq 0 ]
	[[ $EX_LEFT == *"a mount on $EX_DIR/mnt (fuse.tagdisk)"* ]]
	[[ $EX_LEFT == *"tagdiskd "*"--image left.img"* ]]
	[ -n "$(ex_daemons)" ]
	dir=$EX_DIR
	examples_cleanup
	[ -z "$(ex_daemons "$dir")" ]
	td_not_mounted "$dir/mnt"
	[ ! -e "$dir" ]
}

@test "extraction: a man page's example as man prints it; what man would print otherwise is refused" {
	cat >"$BATS_TEST_TMPDIR/x.8" <<'EOF'
.TH X 8
.SH EXAMPLES
Not an example:
.RS
.EX
rm \-rf /
.EE
.RE
An example:
.RS
.\" example
.EX
ls \-l "$HOME" \e
    | grep \(aqx\(aq
.EE
.RE
EOF
	run -0 python3 "$EXAMPLES_PY" list "$BATS_TEST_TMPDIR/x.8"
	[ "$output" = "# $BATS_TEST_TMPDIR/x.8:13
ls -l \"\$HOME\" \\
    | grep 'x'" ]
	# A backslash left at the end of a line is a roff continuation, not the shell's.
	# shellcheck disable=SC2016 # "$HOME" is the page's text
	sed 's/^ls \\-l "$HOME" \\e$/ls -l "$HOME" \\/' "$BATS_TEST_TMPDIR/x.8" >"$BATS_TEST_TMPDIR/y.8"
	run -1 python3 "$EXAMPLES_PY" list "$BATS_TEST_TMPDIR/y.8"
	[[ $output == *"y.8:13: escape '\\' in an example"* ]]
	# A mark without a block, and a page without examples.
	sed '/^\.EX$/d' "$BATS_TEST_TMPDIR/x.8" >"$BATS_TEST_TMPDIR/z.8"
	run -1 python3 "$EXAMPLES_PY" list "$BATS_TEST_TMPDIR/z.8"
	[[ $output == *"the example mark is not followed by .EX"* ]]
	run -1 python3 "$EXAMPLES_PY" list "$TD_ROOT/docs/protocol.md"
	[[ $output == *"no example"* ]]
}
