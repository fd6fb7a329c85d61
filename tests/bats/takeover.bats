#!/usr/bin/env bats
# The disk outlives its daemon (takeover.h): kill -9 under fio verify and ext4, restart in
# place, the volatile cache across a crash, every queue mode, and bad handovers.
#
# PID 1 here is not systemd: tests/tools/fdstore.py plays the service manager (a
# $NOTIFY_SOCKET that keeps FDSTORE=1 fds, and a restart after a crash with LISTEN_FDS,
# LISTEN_PID and LISTEN_FDNAMES), as tagdisk@.service does under systemd. The daemon serves
# over classic /dev/fuse: FUSE over io_uring cannot hand its requests over (see takeover.h).

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires fio losetup mkfs.ext4 e2fsck python3 || return 0
}
setup() { td_setup_dir; }
teardown() { td_teardown; }

# fio_verify NAME FILE OFFSET: 4k random writes at QD32 over 16 MiB from OFFSET, then a
# crc32c verify of all of them; fails unless fio ends with err=0.
fio_verify() {
	local name=$1 file=$2 off=$3
	timeout 600 fio --name="$name" --filename="$file" --offset="$off" --size=16M \
		--rw=randwrite --bs=4k --iodepth=32 --ioengine=libaio --direct=1 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 --randrepeat=0 \
		--verify_state_save=0 --output="$TD_DIR/$name.out" >/dev/null 2>&1 ||
		{ cat "$TD_DIR/$name.out" >&2; return 1; }
	grep -q 'err= 0' "$TD_DIR/$name.out"
}

# fio_rounds FILE OFFSET: fio_verify again and again until $TD_DIR/stop exists; the number of
# rounds in $TD_DIR/rounds.NAME, any failure in $TD_DIR/failed.
fio_rounds() {
	local file=$1 off=$2 n=0 tag
	tag=$(basename "$file")-$off
	while [ ! -e "$TD_DIR/stop" ]; do
		fio_verify "fio-$tag-$n" "$file" "$off" || { echo "$tag round $n" >>"$TD_DIR/failed"; break; }
		n=$((n + 1))
	done
	echo "$n" >"$TD_DIR/rounds.$tag"
}

# kills_under_fio KILLS DEV: fio verify rounds on the disk file and on the loop device DEV
# while the daemon is killed KILLS times at random moments; no fio error, data verified.
kills_under_fio() {
	local kills=$1 dev=$2 i stall stalls=() rounds_file rounds_dev
	rm -f "$TD_DIR/stop" "$TD_DIR/failed"
	fio_rounds "$TD_DISK" 0 &
	local f1=$!
	fio_rounds "$dev" 64M &
	local f2=$!
	for ((i = 0; i < kills; i++)); do
		# A random moment: 0.2 to 1.2 s into the I/O.
		python3 -c 'import random, time; time.sleep(random.uniform(0.2, 1.2))'
		stall=$(td_harness_kill9)
		stalls+=("$stall")
		[ ! -e "$TD_DIR/failed" ] || break
	done
	touch "$TD_DIR/stop"
	wait "$f1" "$f2"
	rounds_file=$(cat "$TD_DIR/rounds.disk-0")
	rounds_dev=$(cat "$TD_DIR/rounds.$(basename "$dev")-64M")
	echo "# $kills kills: stall from kill to the successor's READY, ms: ${stalls[*]};" \
		"fio rounds verified: $rounds_file on the file, $rounds_dev on $dev" >&3
	grep 'took over' "$TD_LOG" | sed 's/^/# /' | tail -3 >&3
	[ ! -e "$TD_DIR/failed" ] || { cat "$TD_DIR/failed" >&2; false; }
	[ "$(grep -c 'took over' "$TD_LOG")" -eq "$kills" ]
	[ "$rounds_file" -ge 1 ]
	[ "$rounds_dev" -ge 1 ]
	# Each daemon counts its own errors from 0: this is the last one's. What the others did is
	# in fio's verify (every round, failed above) and, for the loop device, the kernel log.
	[ "$(td_status errors)" -eq 0 ]
}

@test "kill -9 twenty times under fio verify, on the disk file and a direct-I/O loop device: no error" {
	local dev mark
	td_harness_start --size 256M
	dev=$(td_losetup --direct-io=on)
	mark=$(td_kmsg_mark)
	kills_under_fio 20 "$dev"
	# Every successor took over the same mount: the loop device never saw an error.
	td_kmsg_since "$mark" >"$TD_DIR/kmsg"
	dmesg 2>/dev/null | grep -qF "$mark" || { echo "the kernel log lost the mark" >&2; false; }
	if grep "I/O error, dev $(basename "$dev")" "$TD_DIR/kmsg" >&2; then false; fi
}

@test "kill -9 under fio verify in bio and mq modes (and rq above): no error" {
	local mode dev
	for mode in bio mq; do
		td_harness_start --size 256M --mode "$mode"
		[ "$(td_status mode)" = "$mode" ]
		dev=$(td_losetup --direct-io=on)
		kills_under_fio 4 "$dev"
		losetup -d "$dev"
		kill -TERM "$TD_HARNESS"
		td_wait_until 120 grep -q stopped "$TD_DIR/events"
		wait "$TD_HARNESS" || true
		TD_HARNESS=
		td_not_mounted "$TD_MNT"
		rm -f "$TD_DIR/events"
	done
}

@test "ext4 on a loop device survives 10 kills during a copy: mounted rw, files equal, fsck clean" {
	local dev fs=$TD_DIR/fs tree=/usr/include/linux i
	td_harness_start --size 256M
	dev=$(td_losetup --direct-io=on)
	mkfs.ext4 -q -F "$dev"
	mkdir "$fs"
	mount "$dev" "$fs"
	(for i in 1 2 3 4 5 6; do cp -a "$tree" "$fs/copy$i" && sync -f "$fs"; done; touch "$TD_DIR/copied") &
	local copier=$!
	for ((i = 0; i < 10; i++)); do
		python3 -c 'import random, time; time.sleep(random.uniform(0.1, 0.6))'
		td_harness_kill9 >/dev/null
	done
	wait "$copier"
	[ -e "$TD_DIR/copied" ]
	# Still mounted read-write: ext4 saw no error (it would have remounted read-only).
	findmnt -n -o OPTIONS "$fs" | grep -q '^rw'
	touch "$fs/still-writable"
	for i in 1 2 3 4 5 6; do
		diff -r "$tree" "$fs/copy$i"
	done
	umount "$fs"
	run e2fsck -fn "$dev"
	echo "$output" >&2
	[ "$status" -eq 0 ]
	[ "$(td_status errors)" -eq 0 ]
}

@test "tagdiskctl restart under fio verify: nothing resent, no error, new code running" {
	local dev before
	td_harness_start --size 256M
	dev=$(td_losetup --direct-io=on)
	rm -f "$TD_DIR/stop" "$TD_DIR/failed"
	fio_rounds "$TD_DISK" 0 &
	local f1=$!
	fio_rounds "$dev" 64M &
	local f2=$!
	td_wait_until 60 test -e "$TD_DIR/fio-disk-0-0.out"
	before=$(cat "$TD_DIR/pid")
	run td_ctl restart
	echo "$output" >&2
	[ "$status" -eq 0 ]
	[[ "$output" == *"restarted: pid $before, "*", 0 requests resent"* ]]
	td_ctl restart | tail -1 | grep -q ', 0 requests resent'
	touch "$TD_DIR/stop"
	wait "$f1" "$f2"
	[ ! -e "$TD_DIR/failed" ] || { cat "$TD_DIR/failed" >&2; false; }
	# The same process, re-executed twice; the harness never saw it exit.
	[ "$(cat "$TD_DIR/pid")" = "$before" ]
	! grep -q ' exit \| killed ' "$TD_DIR/events"
	[ "$(grep -c "took over $TD_MNT/disk from pid $before: 0 requests resent" "$TD_LOG")" -eq 2 ]
	[ "$(td_status takeovers)" -eq 2 ]
	[ "$(td_status errors)" -eq 0 ]
}

@test "volatile cache: a crash loses exactly the unflushed writes, flushed ones survive" {
	printf '[drive]\nwrite_cache = volatile\n' >"$TD_DIR/volatile.ini"
	td_harness_start --size 64M -c "$TD_DIR/volatile.ini"
	head -c 65536 /dev/urandom >"$TD_DIR/flushed"
	head -c 65536 /dev/urandom >"$TD_DIR/unflushed"
	# Flushed: written, then fsync (a FLUSH at the drive).
	dd if="$TD_DIR/flushed" of="$TD_DISK" bs=64k seek=1 oflag=direct conv=notrunc,fsync status=none
	# Unflushed: written, acknowledged from the drive's cache, never flushed.
	dd if="$TD_DIR/unflushed" of="$TD_DISK" bs=64k seek=3 oflag=direct conv=notrunc status=none
	cmp "$TD_DIR/unflushed" <(dd if="$TD_DISK" bs=64k skip=3 count=1 iflag=direct status=none)
	td_harness_kill9 >/dev/null
	cmp "$TD_DIR/flushed" <(dd if="$TD_DISK" bs=64k skip=1 count=1 iflag=direct status=none)
	# As powerfail keep=0 leaves it: what the image held before (a new image: zeros).
	cmp <(head -c 65536 /dev/zero) <(dd if="$TD_DISK" bs=64k skip=3 count=1 iflag=direct status=none)
	cmp <(head -c 65536 /dev/zero) <(dd if="$TD_IMG" bs=64k skip=3 count=1 status=none)
}

@test "a stop (SIGTERM to the service manager) unmounts and empties the store" {
	td_harness_start --size 64M
	kill -TERM "$TD_HARNESS"
	td_wait_until 120 grep -q stopped "$TD_DIR/events"
	wait "$TD_HARNESS" || true
	TD_HARNESS=
	grep -q 'remove tagdisk-fuse' "$TD_DIR/events"
	grep -q 'remove tagdisk-state' "$TD_DIR/events"
	grep -q 'stopped: queue drained, flushed, unmounted' "$TD_LOG"
	td_not_mounted "$TD_MNT"
}

@test "bad handovers: not /dev/fuse, another disk's connection, one still served: exit 2, nothing touched" {
	local pid
	# A regular file named as the FUSE connection.
	: >"$TD_DIR/not-fuse"
	printf 'x' >"$TD_DIR/not-state"
	run --separate-stderr env LISTEN_FDS=2 LISTEN_FDNAMES=tagdisk-fuse:tagdisk-state \
		sh -c 'f=$1 s=$2; shift 2; LISTEN_PID=$$ exec "$@" 3<"$f" 4<"$s"' sh \
		"$TD_DIR/not-fuse" "$TD_DIR/not-state" \
		"$TAGDISKD" -f --image "$TD_IMG" --size 16M --mount "$TD_MNT" --socket "$TD_SOCK"
	echo "status $status: $stderr" >&2
	[ "$status" -eq 2 ]
	[[ "$stderr" == *'the "tagdisk-fuse" fd (LISTEN_FDS) is not /dev/fuse'* ]]
	[ ! -e "$TD_IMG" ]
	td_not_mounted "$TD_MNT"

	# A live daemon's connection, handed to a second one: for another mount, then for its own.
	td_harness_start --size 16M
	pid=$(cat "$TD_DIR/pid")
	mkdir "$TD_DIR/mnt2"
	run --separate-stderr python3 "$TD_ROOT/tests/tools/grab_fds.py" "$pid" -- "$TAGDISKD" -f \
		--image "$TD_DIR/other.img" --size 16M --mount "$TD_DIR/mnt2" --socket "$TD_DIR/other.sock"
	echo "status $status: $stderr" >&2
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"serves $TD_MNT/disk, not $TD_DIR/mnt2/disk"* ]]
	[ ! -e "$TD_DIR/other.img" ]
	td_not_mounted "$TD_DIR/mnt2"
	run --separate-stderr python3 "$TD_ROOT/tests/tools/grab_fds.py" "$pid" -- "$TAGDISKD" -f \
		--image "$TD_IMG" --mount "$TD_MNT" --socket "$TD_DIR/other.sock"
	echo "status $status: $stderr" >&2
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"is still served by process $pid"* ]]
	# The first daemon still serves, undisturbed.
	[ "$(cat "$TD_DIR/pid")" = "$pid" ]
	dd if=/dev/urandom of="$TD_DIR/data" bs=4k count=8 status=none
	dd if="$TD_DIR/data" of="$TD_DISK" bs=4k oflag=direct conv=notrunc status=none
	cmp "$TD_DIR/data" <(dd if="$TD_DISK" bs=4k count=8 iflag=direct status=none)
}

@test "over FUSE io_uring, recovery is off and restart is refused with the reason" {
	td_uring_available || skip "this kernel has no FUSE over io_uring (fuse enable_uring)"
	TD_TRANSPORT=uring start_tagdiskd --size 16M
	[ "$(td_status transport)" = uring ]
	[ "$(td_status recovery)" = false ]
	grep -q 'fuse: transport uring: the mount does not outlive a crash of the daemon' "$TD_LOG"
	run td_ctl restart
	[ "$status" -eq 1 ]
	[[ "$output" == *"only transport classic restarts in place"* ]]
	stop_tagdiskd
}

@test "what would defeat recovery is refused up front: auto_unmount, and uring with recovery set" {
	run_tagdiskd --image "$TD_IMG" --size 16M --mount "$TD_MNT" --socket "$TD_SOCK" \
		--transport classic -o auto_unmount
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"-o auto_unmount: the mount would go with a crash of the daemon"* ]]
	printf '[disk]\nrecovery = true\ntransport = uring\n' >"$TD_DIR/both.ini"
	run_tagdiskd -c "$TD_DIR/both.ini" --image "$TD_IMG" --size 16M --mount "$TD_MNT" \
		--socket "$TD_SOCK"
	[ "$status" -eq 2 ]
	[[ "$stderr" == *'transport = "uring"'*"cannot keep the mount across a crash of the daemon"* ]]
	[ ! -e "$TD_IMG" ]
	td_not_mounted "$TD_MNT"
	# With recovery off, auto_unmount is the user's to ask for.
	printf '[disk]\nrecovery = false\n' >"$TD_DIR/off.ini"
	TD_TRANSPORT=classic start_tagdiskd --size 16M -c "$TD_DIR/off.ini" -o auto_unmount
	[ "$(td_status recovery)" = false ]
	stop_tagdiskd
}

@test "unmounted from outside, a daemon (fresh or restarted in place) leaves alone a mount made meanwhile on its directory" {
	local round pid
	for round in fresh restarted; do
		rm -f "$TD_DIR/go" "$TD_DIR/umounts"
		# hold_umount.c: each umount2() of the daemon waits for $TD_DIR/go, so the other
		# mount is surely there by the time the daemon could unmount.
		TD_WRAPPER="env LD_PRELOAD=$TD_BUILD/tests/libholdumount.so
			TD_HOLD_UMOUNT_GO=$TD_DIR/go TD_HOLD_UMOUNT_LOG=$TD_DIR/umounts
			ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
			TD_TRANSPORT=classic start_tagdiskd --size 16M
		pid=$TD_PID
		if [ "$round" = restarted ]; then
			run -0 td_ctl restart
			[[ "${lines[1]}" == "restarted: pid $pid, "* ]]
		fi
		umount "$TD_MNT"
		mount -t tmpfs -o size=1M "other-$round" "$TD_MNT"
		touch "$TD_DIR/go"
		td_wait_exit 120
		echo "$round: exit status $TD_RC; the daemon's umount2 calls:" \
			"$(cat "$TD_DIR/umounts" 2>/dev/null)" >&2
		[ "$TD_RC" -eq 0 ]
		TD_PID=
		[ "$(findmnt -n -o FSTYPE --mountpoint "$TD_MNT")" = tmpfs ]
		[ "$(findmnt -n -o SOURCE --mountpoint "$TD_MNT")" = "other-$round" ]
		umount "$TD_MNT"
	done
}

@test "a tagdisk mount already on the mountpoint: detached when its daemon is dead, refused when one serves it or does not answer" {
	local pid
	# Served by a live daemon: a second disk there is refused, exit 2; the first one serves on.
	TD_TRANSPORT=classic start_tagdiskd --size 16M
	head -c 65536 /dev/urandom >"$TD_DIR/data"
	dd if="$TD_DIR/data" of="$TD_DISK" bs=64k oflag=direct conv=notrunc status=none
	run_tagdiskd --image "$TD_DIR/other.img" --size 16M --mount "$TD_MNT" \
		--socket "$TD_DIR/other.sock" --name other
	echo "status $status: $stderr" >&2
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"mountpoint \"$TD_MNT\": another tagdiskd serves a disk there (tagdisk:disk); stop it, or choose another mountpoint"* ]]
	[ ! -e "$TD_DIR/other.img" ]
	cmp -n 65536 "$TD_DIR/data" "$TD_DISK"
	# Stopped (SIGSTOP): it does not answer; refused too, after the probe's 5 s.
	kill -STOP "$TD_PID"
	run_tagdiskd --image "$TD_DIR/other.img" --size 16M --mount "$TD_MNT" \
		--socket "$TD_DIR/other.sock" --name other
	kill -CONT "$TD_PID"
	echo "status $status: $stderr" >&2
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"a tagdisk mount there (tagdisk:disk) does not answer (Connection timed out"* ]]
	cmp -n 65536 "$TD_DIR/data" "$TD_DISK"
	# Dead (kill -9, no service manager keeps the connection): the next daemon detaches the
	# dead mount and serves the same image at the same place.
	pid=$TD_PID
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null || true
	TD_PID=
	td_is_mounted "$TD_MNT"
	TD_TRANSPORT=classic start_tagdiskd --size 16M
	grep -q "fuse: detaching the mount a stopped tagdiskd left at $TD_MNT (tagdisk:disk)" "$TD_LOG"
	cmp -n 65536 "$TD_DIR/data" "$TD_DISK"
	stop_tagdiskd
	td_not_mounted "$TD_MNT"
}
