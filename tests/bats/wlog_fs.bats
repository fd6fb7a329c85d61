#!/usr/bin/env bats
# The crash-consistency lab on real file systems (docs/crash-testing.md): ext4 and XFS on a
# direct-I/O loop device over the disk run creates, renames, appends and unlinks, each made
# durable by fsync and followed by a mark (wlog_fs_workload.py), with the write log
# recording. Replayed onto a copy of the disk taken before, every state is checked by
# wlog_fscheck.sh (mount, so the journal is replayed; the files; e2fsck -fn or
# xfs_repair -n): each mark holds exactly the files fsynced before it, each flush point and
# crash states inside the flush epochs are clean. With -o nobarrier no flush reaches the disk:
# prefix states every few entries may all pass, but crash states must find one that fsck
# rejects or that lost fsynced data, and its entry is printed.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse && requires losetup mkfs.ext4 e2fsck mkfs.xfs xfs_repair || return 0
}
setup() {
	td_setup_dir
	REPLAY=$TD_BUILD/tagdisk-replay
	HERE=$BATS_TEST_DIRNAME
	mkdir -p "$TD_DIR/fs" "$TD_DIR/work"
}
teardown() { td_teardown; }

OPS=16

# run_workload FSTYPE SIZE MOUNT_OPTIONS: make the file system, copy the disk (the replays'
# start), record the workload in $TD_DIR/fs.wlog, then unmount and stop logging.
run_workload() {
	local fs=$1 size=$2 opts=$3 dev
	start_tagdiskd --size "$size"
	dev=$(td_losetup --direct-io=on)
	"mkfs.$fs" -q "$dev"
	sync "$TD_DISK"
	# The disk is idle and flushed: the image is the disk as the log starts.
	cp --sparse=always "$TD_IMG" "$TD_DIR/base.img"
	run td_ctl log start "$TD_DIR/fs.wlog"
	assert_success
	mount -t "$fs" ${opts:+-o "$opts"} "$dev" "$TD_DIR/fs"
	python3 "$HERE/wlog_fs_workload.py" "$TD_DIR/fs" "$TAGDISKCTL" "$TD_SOCK" \
		"$TD_DIR/manifest" "$OPS" 1
	umount "$TD_DIR/fs"
	losetup -d "$dev"
	run td_ctl --json log stop
	assert_success
	stop_tagdiskd
}

# replay_check FSTYPE exact|stable REPLAY_OPTIONS...: replay the log onto a fresh copy of the
# base, checking with wlog_fscheck.sh as the options say.
replay_check() {
	local fs=$1 mode=$2
	shift 2
	cp --sparse=always "$TD_DIR/base.img" "$TD_DIR/target.img"
	run "$REPLAY" --log "$TD_DIR/fs.wlog" --replay "$TD_DIR/target.img" \
		--fsck "$HERE/wlog_fscheck.sh $fs $TD_DIR/manifest $TD_DIR/work $mode" "$@"
}

# fs_with_barriers FSTYPE SIZE: every mark, every flush point and two crash states per
# epoch are clean.
fs_with_barriers() {
	local fs=$1 size=$2 flushes
	run_workload "$fs" "$size" ""
	flushes=$("$REPLAY" --log "$TD_DIR/fs.wlog" -v | grep -c 'FLUSH') || true
	[ "$flushes" -ge "$OPS" ]
	replay_check "$fs" exact --check mark
	assert_success
	assert_output --partial "$OPS checks passed"
	replay_check "$fs" stable --check flush
	assert_success
	assert_output --partial "$flushes checks passed"
	replay_check "$fs" stable --crash-states 2
	assert_success
	assert_output --regexp "[1-9][0-9]* checks passed \([1-9][0-9]* of them crash states\)"
}

@test "ext4 over the log: each mark holds its fsynced files; flush points and crash states are clean" {
	fs_with_barriers ext4 64M
}

@test "XFS over the log: each mark holds its fsynced files; flush points and crash states are clean" {
	fs_with_barriers xfs 320M
}

@test "ext4 with -o nobarrier: the lab finds a crash state that fsck rejects or that lost fsynced data" {
	run_workload ext4 64M nobarrier
	# No flush reaches the disk: the whole log is one epoch.
	run "$REPLAY" --log "$TD_DIR/fs.wlog" -v
	refute_output --partial FLUSH
	# Each prefix of the completion order is a state a disk without a cache could be in;
	# ext4 waits for its writes, so these may all pass. Whatever they find is reported.
	replay_check ext4 stable --check 4
	found=$status
	[ "$found" -eq 0 ] || [ "$found" -eq 1 ]
	[ "$found" -eq 0 ] || echo "# prefix states: $(grep 'check failed' <<<"$output")" >&3
	# A volatile cache may have kept any subset: some of those states are broken.
	replay_check ext4 stable --crash-states 40
	[ "$status" -eq 1 ]
	assert_output --regexp 'check failed at entry [0-9]+, crash state [0-9]+ of the epoch'
	echo "# $(grep 'check failed' <<<"$output")" >&3
	echo "# $(grep -m1 "^entry" <<<"$output")" >&3
}
