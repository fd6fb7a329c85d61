#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The Debian packages each part of tagdisk needs, by group; install the missing ones.
#
#   tests/deps.sh [--check | --list] GROUP...
#
# Groups (docs/requirements.md says the same for other distributions):
#   build   compile tagdiskd and tagdiskctl (WITH_RBD=0 / WITH_NBD=0 drop librbd / libnbd;
#           libsystemd is used where it is found, WITH_SYSTEMD=0 leaves it out)
#   run     serve a disk: fusermount3, losetup
#   unit    the unit tests (cmocka)
#   bats    the integration tests' runner (bats and its helpers, python3, jq)
#   test    make check: unit, bats, and what the tests drive (fio, blktrace, valgrind,
#           man, clang for fuzzing, nbdkit, a local Ceph cluster, and
#           qemu-storage-daemon for the bench harness's test)
#   bench   make bench: fio
#   rbd     make bench BENCH_ARGS=--rbd: a local Ceph cluster and qemu-storage-daemon's rbd
#           driver (its pass-through peer)
#   plots   make plots: fio, blkparse and matplotlib
#   fuzz    make fuzz: clang with libFuzzer
#   valgrind, man, stress   make check-valgrind, check-man, stress/crash/admin-load
#
# Default: as root, install what is missing (apt-get, no recommends); otherwise name the
# missing packages on one line and fail. --check never installs: it names them and fails.
# --list prints the packages of the groups, one per line, and checks nothing. Without
# dpkg (not Debian) nothing can be checked here: say so and succeed, and let the build's
# own check (make's check-build-deps, through pkg-config) name what is missing.
set -euo pipefail

mode=install
case "${1:-}" in
--check | --list)
	mode=${1#--}
	shift
	;;
esac
if [ $# -eq 0 ]; then
	echo "usage: tests/deps.sh [--check | --list] build|run|unit|bats|test|bench|rbd|plots|fuzz|valgrind|man|stress..." >&2
	exit 2
fi

group_packages() {
	case "$1" in
	build)
		echo build-essential pkg-config libfuse3-dev liburing-dev libiniparser-dev libjson-c-dev
		# Optional (WITH_SYSTEMD): whether a SIGTERM is a restart of the unit (takeover.c).
		echo libsystemd-dev
		[ "${WITH_RBD:-1}" = 0 ] || echo librbd-dev
		[ "${WITH_NBD:-1}" = 0 ] || echo libnbd-dev
		;;
	run) echo fuse3 util-linux ;;
	unit) echo libcmocka-dev ;;
	bats) echo bats bats-assert bats-support python3 jq ;;
	test)
		group_packages unit
		group_packages bats
		echo fio e2fsprogs xfsprogs util-linux kmod procps psmisc blktrace systemd locales
		group_packages plots
		group_packages valgrind
		group_packages man
		group_packages fuzz
		echo nbdkit ceph-mon ceph-mgr ceph-osd ceph-common qemu-system-common
		;;
	bench) echo fio python3 util-linux qemu-system-common ;;
	rbd) echo ceph-mon ceph-mgr ceph-osd ceph-common qemu-system-common qemu-block-extra ;;
	plots) echo fio blktrace python3 python3-matplotlib ;;
	fuzz) echo clang libclang-rt-14-dev ;;
	valgrind) echo valgrind ;;
	man) echo man-db groff-base ;;
	stress) echo fio e2fsprogs python3 util-linux ;;
	*)
		echo "deps: unknown group \"$1\" (build, run, unit, bats, test, bench, rbd, plots, fuzz, valgrind, man, stress)" >&2
		return 1
		;;
	esac
}

packages=()
for g in "$@"; do
	list=$(group_packages "$g") || exit 2
	for p in $list; do
		case " ${packages[*]} " in
		*" $p "*) ;;
		*) packages+=("$p") ;;
		esac
	done
done

if [ "$mode" = list ]; then
	printf '%s\n' "${packages[@]}"
	exit 0
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "deps: not a Debian system: cannot check packages here; docs/requirements.md lists what $* need"
	exit 0
fi

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$mode" = check ] || [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing Debian packages ($*): ${missing[*]}; install them as root: apt-get install ${missing[*]}" >&2
	exit 1
fi
echo "deps: installing for $*: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq || ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
	echo "deps: apt-get could not install ${missing[*]}" >&2
	exit 1
fi
