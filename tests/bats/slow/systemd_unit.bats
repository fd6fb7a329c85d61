#!/usr/bin/env bats
# tagdisk@.service under a real systemd: READY, the disk file visible outside the service,
# reload, a crash and its restart, a clean stop, a bad config, and what ProtectSystem=
# would do to the disk.
#
# Where no systemd runs as PID 1 (a container, CI), this boots one as PID 1 of its own
# pid, mount, UTS, IPC and cgroup namespaces, on an overlay of / whose writes go to a
# tmpfs, with a private /dev, read-only /proc/sys and /sys, and every unit that the usual
# targets pull in masked: nothing it or the services do reaches the real file systems or
# the kernel's settings. Where systemd is PID 1, it skips: install the unit there instead.
#
# Run by `make check-service`; `make check` does not descend into slow/.

SRC_ROOT=$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)
TD_BUILD=${TD_BUILD:-$SRC_ROOT/build}
load ../helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires unshare nsenter chroot mknod || return 0
	[ -x /lib/systemd/systemd ] || { td_skip_file "systemd is not installed"; return 0; }
	[ "$(cat /proc/1/comm)" != systemd ] ||
		{ td_skip_file "systemd runs as PID 1 here: install the unit and use systemctl instead"; return 0; }
	grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null ||
		{ td_skip_file "no overlay file system for a throwaway root"; return 0; }
	local cg2 mine
	cg2=$(findmnt -n -t cgroup2 -o TARGET | head -1)
	[ -n "$cg2" ] || { td_skip_file "no cgroup2 hierarchy mounted"; return 0; }
	mine=$(sed -n 's/^0:://p' /proc/self/cgroup)
	export SD_CGROUP=$cg2$mine/tagdisk-systemd-test.$$
	export SD_DIR=$BATS_FILE_TMPDIR
	sed "s|@SBINDIR@|/usr/local/sbin|g" "$SRC_ROOT/systemd/tagdisk@.service.in" \
		>"$SD_DIR/tagdisk@.service"
	printf '[Unit]\nDescription=tagdisk test target\n' >"$SD_DIR/td-test.target"
	write_inner >"$SD_DIR/inner.sh"
	chmod +x "$SD_DIR/inner.sh"
	mkdir "$SD_CGROUP"
	# The shell moves itself into the cgroup, then becomes unshare, whose child is PID 1.
	setsid bash -c 'echo $$ >"$1/cgroup.procs" && echo $$ >"$2/unshare.pid" &&
		exec unshare --pid --fork --mount --uts --ipc --cgroup --propagation private "$2/inner.sh"' \
		_ "$SD_CGROUP" "$SD_DIR" </dev/null >"$SD_DIR/unshare.log" 2>&1 &
	local state= end=$((EPOCHSECONDS + 120))
	while [ "$EPOCHSECONDS" -le "$end" ]; do
		SD_PID=$(pgrep -P "$(cat "$SD_DIR/unshare.pid" 2>/dev/null || echo 0)" 2>/dev/null | head -1)
		if [ -n "$SD_PID" ]; then
			state=$(in_ns systemctl is-system-running 2>/dev/null) || true
			[ "$state" = running ] && break
		fi
		sleep 0.1
	done
	export SD_PID
	[ "$state" = running ] || { cat "$SD_DIR"/*.log >&2; false; }
}
setup() { td_check_skip; }

teardown_file() {
	[ -n "${SD_PID:-}" ] && kill -KILL "$SD_PID" 2>/dev/null
	local i
	for ((i = 0; i < 50; i++)); do
		[ -n "${SD_PID:-}" ] && kill -0 "$SD_PID" 2>/dev/null || break
		sleep 0.1
	done
	if [ -n "${SD_CGROUP:-}" ] && [ -d "$SD_CGROUP" ]; then
		find "$SD_CGROUP" -depth -type d -exec rmdir {} + 2>/dev/null || true
	fi
}

# The script that sets up the throwaway root and becomes systemd (PID 1 of the namespaces).
write_inner() {
	cat <<EOF
#!/bin/bash
set -eu
mount --make-rprivate /
mkdir -p "$SD_DIR/ns"
mount -t tmpfs tmpfs "$SD_DIR/ns"
cd "$SD_DIR/ns"
mkdir upper work root
mount -t overlay overlay -o lowerdir=/,upperdir=upper,workdir=work root
R=\$PWD/root
mount -t proc proc \$R/proc
mount --bind \$R/proc/sys \$R/proc/sys
mount -o remount,bind,ro \$R/proc/sys
mount -t sysfs -o ro sysfs \$R/sys
mount -t cgroup2 cgroup2 \$R/sys/fs/cgroup
mount -t tmpfs -o mode=755 tmpfs \$R/dev
for n in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do
	set -- \$n; mknod -m 666 \$R/dev/\$1 c \$2 \$3
done
mknod -m 600 \$R/dev/fuse c 10 229
mkdir \$R/dev/pts \$R/dev/shm
# systemd logs to /dev/console: a file here.
touch \$R/dev/console "$SD_DIR/console.log"
mount --bind "$SD_DIR/console.log" \$R/dev/console
mount -t tmpfs -o mode=755 tmpfs \$R/run
mkdir -p \$R/run/systemd/system \$R/usr/local/sbin \$R/usr/local/bin \$R/etc/tagdisk
for d in sysinit sockets basic local-fs timers paths slices; do
	for u in /lib/systemd/system/\$d.target.wants/* /etc/systemd/system/\$d.target.wants/*; do
		[ -e "\$u" ] && ln -sf /dev/null "\$R/run/systemd/system/\${u##*/}"
	done
done
cp "$SD_DIR/tagdisk@.service" "$SD_DIR/td-test.target" \$R/run/systemd/system/
cp "$TAGDISKD" \$R/usr/local/sbin/tagdiskd
cp "$TAGDISKCTL" \$R/usr/local/bin/tagdiskctl
printf '[disk]\nimage = /var/lib/tagdisk/vm1.img\nsize = 64M\nmountpoint = /run/tagdisk/vm1\n' \
	>\$R/etc/tagdisk/vm1.ini
exec chroot \$R env container=tagdisk-test /lib/systemd/systemd --unit=td-test.target \
	--log-target=console --default-standard-output=inherit --default-standard-error=inherit
EOF
}

# in_ns CMD...: run CMD in the test systemd's namespaces and root, where the host would be.
in_ns() {
	nsenter -t "$SD_PID" -m -p -C -r -w -- "$@"
}

unit_prop() {
	in_ns systemctl show -p "$2" --value "$1"
}

# ---- the tests ----------------------------------------------------------------------------------

@test "tagdisk@vm1 starts, reports READY, and its disk file is there outside the service" {
	run -0 in_ns systemctl start tagdisk@vm1
	[ "$(unit_prop tagdisk@vm1 ActiveState)" = active ]
	[[ "$(unit_prop tagdisk@vm1 StatusText)" == "serving /var/lib/tagdisk/vm1.img at /run/tagdisk/vm1/disk"* ]]
	in_ns test -f /run/tagdisk/vm1/disk
	in_ns sh -c 'head -c 1048576 /dev/urandom >/run/data &&
		dd if=/run/data of=/run/tagdisk/vm1/disk bs=1M seek=3 oflag=direct conv=notrunc status=none &&
		dd if=/run/tagdisk/vm1/disk bs=1M skip=3 count=1 iflag=direct status=none | cmp - /run/data'
	run -0 in_ns tagdiskctl -s /run/tagdisk/vm1.sock status
	[[ $output == *"image       /var/lib/tagdisk/vm1.img"* ]]
}

@test "the service shares the manager's mount namespace, has its own network, keeps four capabilities" {
	in_ns systemctl start tagdisk@vm1
	local pid
	pid=$(unit_prop tagdisk@vm1 MainPID)
	[ "$(in_ns readlink "/proc/$pid/ns/mnt")" = "$(in_ns readlink /proc/1/ns/mnt)" ]
	[ "$(in_ns readlink "/proc/$pid/ns/net")" != "$(in_ns readlink /proc/1/ns/net)" ]
	# CAP_CHOWN, CAP_IPC_LOCK, CAP_SYS_ADMIN and CAP_SYS_RESOURCE, as far as this machine has them.
	local bnd
	bnd=$(in_ns awk '/^CapBnd/ { print $2 }' "/proc/$pid/status")
	[ $((0x$bnd & ~(1 << 0 | 1 << 14 | 1 << 21 | 1 << 24))) -eq 0 ]
	[ $((0x$bnd & (1 << 21))) -ne 0 ]
	[ "$(in_ns awk '/^NoNewPrivs:/ { print $2 }' "/proc/$pid/status")" -eq 1 ]
	[ "$(in_ns awk '/^Seccomp:/ { print $2 }' "/proc/$pid/status")" -eq 2 ]
	# mlockall worked: LimitMEMLOCK=infinity.
	[ "$(in_ns awk '/^VmLck/ { print $2 }' "/proc/$pid/status")" -gt 0 ]
}

@test "systemctl reload makes the daemon apply a changed depth" {
	in_ns systemctl start tagdisk@vm1
	in_ns sh -c 'printf "[tags]\ndepth = 8\n" >>/etc/tagdisk/vm1.ini'
	run -0 in_ns systemctl reload tagdisk@vm1
	run -0 in_ns tagdiskctl -s /run/tagdisk/vm1.sock depth
	[ "$output" = "depth: 8 (max 4096)" ]
	in_ns sed -i '/^\[tags\]$/,$d' /etc/tagdisk/vm1.ini
	in_ns systemctl reload tagdisk@vm1
}

# mount_id: the id of the mount at /run/tagdisk/vm1 (the same mount, taken over, keeps it).
mount_id() {
	in_ns awk '$5 == "/run/tagdisk/vm1" { id = $1 } END { print id }' /proc/self/mountinfo
}

@test "after a SIGKILL the unit starts again and takes the same mount over; the data is intact" {
	in_ns systemctl start tagdisk@vm1
	in_ns sh -c 'head -c 65536 /dev/urandom >/run/data2 &&
		dd if=/run/data2 of=/run/tagdisk/vm1/disk bs=64k seek=100 oflag=direct conv=notrunc status=none'
	local before mnt pid
	before=$(unit_prop tagdisk@vm1 NRestarts)
	mnt=$(mount_id)
	pid=$(unit_prop tagdisk@vm1 MainPID)
	# The fd store holds the connection and the record.
	[ "$(unit_prop tagdisk@vm1 NFileDescriptorStore)" -eq 2 ]
	in_ns systemctl kill -s KILL tagdisk@vm1
	td_wait_for 120 "tagdisk@vm1 restarted and active again" eval \
		'unit_prop tagdisk@vm1 ActiveState; [ "$(unit_prop tagdisk@vm1 NRestarts)" -gt "$before" ] &&
			[ "$(unit_prop tagdisk@vm1 ActiveState)" = active ]' >/dev/null
	[ "$(unit_prop tagdisk@vm1 ActiveState)" = active ]
	# Not mounted again: the same mount, served by the new daemon.
	[ "$(mount_id)" = "$mnt" ]
	in_ns journalctl -u tagdisk@vm1 --no-pager 2>/dev/null | grep -q "took over /run/tagdisk/vm1/disk from pid $pid" ||
		in_ns tagdiskctl -s /run/tagdisk/vm1.sock status | grep -q '^recovery    on: .* (1 takeovers'
	in_ns sh -c 'dd if=/run/tagdisk/vm1/disk bs=64k skip=100 count=1 iflag=direct status=none |
		cmp - /run/data2'
}

@test "systemctl restart leaves the mount to the new daemon: the same mount, nothing resent" {
	in_ns systemctl start tagdisk@vm1
	local mnt pid
	mnt=$(mount_id)
	pid=$(unit_prop tagdisk@vm1 MainPID)
	run -0 in_ns systemctl restart tagdisk@vm1
	[ "$(unit_prop tagdisk@vm1 ActiveState)" = active ]
	[ "$(unit_prop tagdisk@vm1 MainPID)" != "$pid" ]
	[ "$(mount_id)" = "$mnt" ]
	run -0 in_ns tagdiskctl -s /run/tagdisk/vm1.sock status
	[[ "$output" == *"recovery    on: the mount outlives a crash or restart of the daemon ("*" takeovers, 0 requests resent at the last)"* ]]
	in_ns test -f /run/tagdisk/vm1/disk
}

@test "tagdiskctl restart under the unit: the same process, the unit active again, not restarted" {
	in_ns systemctl start tagdisk@vm1
	local mnt pid before
	mnt=$(mount_id)
	pid=$(unit_prop tagdisk@vm1 MainPID)
	before=$(unit_prop tagdisk@vm1 NRestarts)
	run -0 in_ns tagdiskctl -s /run/tagdisk/vm1.sock restart
	[[ "$output" == *"restarted: pid $pid, "*", 0 requests resent"* ]]
	# The new image's READY=1 ends the restart: a STOPPING=1 before it would leave the unit
	# deactivating until TimeoutStopSec (90 s) killed it.
	td_wait_for 60 "tagdisk@vm1 active and running again" eval \
		'[ "$(unit_prop tagdisk@vm1 ActiveState)/$(unit_prop tagdisk@vm1 SubState)" = \
			active/running ]' >/dev/null
	[ "$(unit_prop tagdisk@vm1 MainPID)" = "$pid" ]
	[ "$(unit_prop tagdisk@vm1 NRestarts)" = "$before" ]
	[ "$(mount_id)" = "$mnt" ]
	in_ns test -f /run/tagdisk/vm1/disk
}

@test "systemctl stop: exit 0, unmounted, socket gone, fd store empty, /run/tagdisk kept" {
	in_ns systemctl start tagdisk@vm1
	run -0 in_ns systemctl stop tagdisk@vm1
	[ "$(unit_prop tagdisk@vm1 Result)" = success ]
	[ "$(unit_prop tagdisk@vm1 ExecMainStatus)" -eq 0 ]
	[ "$(unit_prop tagdisk@vm1 NFileDescriptorStore)" -eq 0 ]
	run -1 in_ns grep -q ' /run/tagdisk/vm1 ' /proc/self/mounts
	run -1 in_ns test -e /run/tagdisk/vm1.sock
	in_ns test -d /run/tagdisk
}

@test "a missing config fails with status 2 and is not restarted" {
	run -1 in_ns systemctl start tagdisk@nothere
	[ "$(unit_prop tagdisk@nothere ExecMainStatus)" -eq 2 ]
	# Settled as failed, not waiting to restart (a restart to come shows as auto-restart
	# from the moment the start failed, which is when systemctl returned).
	[ "$(unit_prop tagdisk@nothere ActiveState)" = failed ]
	[ "$(unit_prop tagdisk@nothere SubState)" = failed ]
	[ "$(unit_prop tagdisk@nothere NRestarts)" -eq 0 ]
	in_ns systemctl reset-failed tagdisk@nothere
}

@test "with ProtectSystem=strict the service would serve a disk nobody outside can see" {
	in_ns mkdir -p /run/systemd/system/tagdisk@vm1.service.d
	in_ns sh -c 'printf "[Service]\nProtectSystem=strict\nReadWritePaths=/var/lib/tagdisk /run/tagdisk\n" \
		>/run/systemd/system/tagdisk@vm1.service.d/strict.conf'
	in_ns systemctl daemon-reload
	run -0 in_ns systemctl start tagdisk@vm1
	[ "$(unit_prop tagdisk@vm1 ActiveState)" = active ]
	run -1 in_ns test -e /run/tagdisk/vm1/disk
	in_ns systemctl stop tagdisk@vm1
	in_ns rm -r /run/systemd/system/tagdisk@vm1.service.d
	in_ns systemctl daemon-reload
}
