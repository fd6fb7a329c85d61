#!/bin/bash
# Install the Debian packages the build and the tests need, when missing.
# As root it installs them (apt-get, no recommends); otherwise it names them and fails.
set -euo pipefail

packages=(
	build-essential pkg-config
	libfuse3-dev liburing-dev fuse3 libiniparser-dev libcmocka-dev libjson-c-dev
	bats bats-assert bats-support
	fio valgrind e2fsprogs xfsprogs util-linux kmod procps psmisc
	python3 jq blktrace systemd man-db groff-base
	clang libclang-rt-14-dev
	librbd-dev libnbd-dev nbdkit ceph-mon ceph-mgr ceph-osd ceph-common
)

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing Debian packages: ${missing[*]}" >&2
	echo "deps: run as root, or: sudo apt-get install ${missing[*]}" >&2
	exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
