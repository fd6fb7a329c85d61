#!/usr/bin/env bats
# What each make target needs (issue 32): `make run` installs the build and run packages
# and none of the tests'; `make check` all of them; a library, package or tool that is
# missing stops a target before its work, with one line naming it; `make help` names
# real targets.
#
# Fakes first in PATH stand in for the system, so nothing is installed or removed:
# dpkg-query reports installed what $TD_DIR/installed lists (one package a line),
# apt-get logs its arguments to $TD_DIR/apt.log and refuses to install, and id -u says
# $TD_DIR/uid. No FUSE and no root needed; about 5 s.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	td_setup_dir
	FAKES=$TD_DIR/bin
	mkdir -p "$FAKES"
	: >"$TD_DIR/installed"
	echo 0 >"$TD_DIR/uid"
	cat >"$FAKES/dpkg-query" <<EOF
#!/bin/sh
# dpkg-query -W -f='\${Status}' PACKAGE
for p; do :; done
grep -qx "\$p" "$TD_DIR/installed" || exit 1
printf 'install ok installed'
EOF
	cat >"$FAKES/apt-get" <<EOF
#!/bin/sh
echo "\$*" >>"$TD_DIR/apt.log"
[ "\$1" = update ] && exit 0
exit 100
EOF
	cat >"$FAKES/id" <<EOF
#!/bin/sh
[ "\$1" = -u ] && exec cat "$TD_DIR/uid"
exec /usr/bin/id "\$@"
EOF
	chmod +x "$FAKES"/*
}

teardown() { td_teardown; }

# fake_make ARGS...: make in the source tree, with the fakes, a build directory of this
# test and RUN_DIR here; not a sub-make of whatever runs the tests.
fake_make() {
	env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS PATH="$FAKES:$PATH" \
		make --no-print-directory -C "$TD_ROOT" BUILD="$TD_DIR/build" RUN_DIR="$TD_DIR" "$@"
}

# The packages apt-get was asked to install, sorted, one a line.
asked_to_install() {
	awk '{ for (i = 1; i <= NF; i++) if ($i == "install") { for (j = i + 1; j <= NF; j++) if ($j !~ /^-/) print $j } }' \
		"$TD_DIR/apt.log" | sort -u
}

@test "make run asks for the build and run packages only, none of the tests'" {
	run -2 --separate-stderr fake_make run
	echo "$stderr" >&2
	asked_to_install >"$TD_DIR/asked"
	"$TD_ROOT/tests/deps.sh" --list build run | sort -u >"$TD_DIR/want"
	diff "$TD_DIR/want" "$TD_DIR/asked"
	# The test-only packages exist, and make run wants none of them.
	"$TD_ROOT/tests/deps.sh" --list test | sort -u | comm -23 - "$TD_DIR/want" >"$TD_DIR/test_only"
	for p in bats valgrind nbdkit ceph-osd libcmocka-dev clang fio; do
		grep -qx "$p" "$TD_DIR/test_only"
	done
	[ -z "$(comm -12 "$TD_DIR/asked" "$TD_DIR/test_only")" ]
	# One line says why it stopped, and nothing was built, created or mounted.
	[[ "${stderr_lines[0]}" == "deps: apt-get could not install "* ]]
	[ ! -e "$TD_DIR/build" ]
	[ ! -e "$TD_DIR/tagdisk.img" ]
}

@test "make check asks for the test packages as well (the list above can hold them)" {
	run -2 --separate-stderr fake_make check
	asked_to_install >"$TD_DIR/asked"
	for p in bats valgrind nbdkit ceph-osd libcmocka-dev fuse3 libfuse3-dev; do
		grep -qx "$p" "$TD_DIR/asked" || { echo "make check did not ask for $p"; false; }
	done
}

@test "make run as a user names what is missing in one line and installs nothing" {
	echo 1000 >"$TD_DIR/uid"
	"$TD_ROOT/tests/deps.sh" --list build run | grep -vx -e libfuse3-dev -e fuse3 >"$TD_DIR/installed"
	run -2 --separate-stderr fake_make run
	[ "${stderr_lines[0]}" = "deps: missing Debian packages (build run): libfuse3-dev fuse3; install them as root: apt-get install libfuse3-dev fuse3" ]
	[ ! -e "$TD_DIR/apt.log" ]
	[ ! -e "$TD_DIR/build" ]
}

@test "WITH_RBD=0 WITH_NBD=0 make run asks for neither librbd-dev nor libnbd-dev" {
	run -2 fake_make WITH_RBD=0 WITH_NBD=0 run
	asked_to_install >"$TD_DIR/asked"
	grep -qx libfuse3-dev "$TD_DIR/asked"
	run -1 grep -x -e librbd-dev -e libnbd-dev "$TD_DIR/asked"
	# With them, it does.
	: >"$TD_DIR/apt.log"
	run -2 fake_make run
	asked_to_install | grep -qx librbd-dev
	asked_to_install | grep -qx libnbd-dev
}

@test "make stops before compiling when a library is missing: one line, and how to leave the backend out" {
	# A pkg-config that finds everything but libnbd.
	cat >"$FAKES/pkg-config" <<'EOF'
#!/bin/sh
case " $* " in *" libnbd "*) exit 1 ;; esac
exec /usr/bin/pkg-config "$@"
EOF
	chmod +x "$FAKES/pkg-config"
	run -2 --separate-stderr fake_make all
	echo "$stderr" >&2
	[ "${stderr_lines[0]}" = "make: cannot build, missing: libnbd-dev (Debian packages; as root: tests/deps.sh build; other systems: docs/requirements.md); or build without those backends: make WITH_NBD=0" ]
	# The next line is make's own; nothing was compiled.
	[ "${#stderr_lines[@]}" -le 3 ]
	[ -z "$(find "$TD_DIR/build" -name '*.o' 2>/dev/null)" ]
	# Left out as said, the check passes.
	run -0 fake_make WITH_NBD=0 check-build-deps
	run -2 fake_make WITH_NBD=2 check-build-deps
	[[ $output == *"WITH_NBD=2: use 1 (build the backend) or 0 (leave it out)"* ]]
}

@test "make bench BENCH_ARGS=--rbd without qemu's rbd driver stops in one line, before any cluster" {
	# Everything installed but the driver; apt-get cannot install it.
	"$TD_ROOT/tests/deps.sh" --list build run bench rbd | grep -vx qemu-block-extra >"$TD_DIR/installed"
	run -2 --separate-stderr fake_make bench BENCH_ARGS=--rbd
	[ "${stderr_lines[0]}" = "deps: apt-get could not install qemu-block-extra" ]
	[ "$(asked_to_install)" = qemu-block-extra ]
	[ ! -e "$TD_DIR/build" ]
	# bench --rbd run by hand checks the same before it starts anything: one line, no
	# traceback. A qemu-storage-daemon whose module directory has no rbd driver.
	printf '#!/bin/sh\nexit 0\n' >"$FAKES/qemu-storage-daemon"
	chmod +x "$FAKES/qemu-storage-daemon"
	mkdir "$TD_DIR/qemu"
	touch "$TD_DIR/qemu/block-curl.so"
	run -1 --separate-stderr env PATH="$FAKES:$PATH" QEMU_MODULE_DIR="$TD_DIR/qemu" \
		python3 "$TD_ROOT/bench/bench.py" --rbd --build "$TD_BUILD"
	echo "$stderr" >&2
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "bench --rbd: missing "*"qemu-storage-daemon's rbd driver (block-rbd.so) (qemu-block-extra)"*"apt-get install "*qemu-block-extra* ]]
	[ -z "$output" ]
}

@test "make help names each target with what it needs and how long it takes, and each exists" {
	run -0 fake_make help
	local targets t n=0
	targets=$(awk '/^  [a-z]/ { print $1 }' <<<"$output")
	for t in $targets; do
		n=$((n + 1))
		# A rule for it: "t:" or "a t b:" at the start of a line.
		grep -qE "^([a-z -]+ )?$t( [a-z -]+)?:" "$TD_ROOT/Makefile" || { echo "make help names $t, which has no rule"; false; }
		# Its needs and time, on the lines after it.
		awk -v t="$t" '$1 == t { on = 1; next } on && /^  [a-z]/ { exit } on { text = text " " $0 }
			END { exit !(text ~ /needs: .*; takes: /) }' <<<"$output" ||
			{ echo "make help gives $t no needs or time"; false; }
	done
	[ "$n" -ge 20 ]
	for t in all run check install bench deps; do
		grep -qx "$t" <<<"$targets"
	done
}
