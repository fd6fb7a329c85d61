#!/usr/bin/env bats
# Crash consistency with a volatile write cache, the way a filesystem developer
# tests it: ext4 on a direct-I/O loop device on a tagdisk drive with
# write_cache = volatile; files are written, half of them fsynced (file, then
# directory, as applications must), the other half only written back (in the
# drive's cache, never flushed); the power fails; the stale mount is torn down
# without one more write reaching the drive; then the filesystem is recovered
# as after a reboot: mount (the kernel replays the journal), check the files,
# unmount, e2fsck -fn.
#
# Pulling the plug: first `inject error op=write` over the whole disk, so every
# write from then on fails as it would on a drive without power, then
# `powerfail` drops (or keeps a random share of) what the cache held. The old
# ext4 instance writes while it is torn down (journal, superblock); those
# writes fail and reach nothing. A second `powerfail` must find the cache
# empty, which proves it. Only then are the faults cleared.
#
# With barriers (ext4's default) every fsync and journal commit flushes the
# drive's cache: the filesystem is clean and every fsynced file is intact.
# With -o nobarrier nothing flushes it: the fsynced files are lost, and with a
# torn cache after a checkpoint the filesystem is damaged. That is the proof
# that the cache is really volatile, and what barriers are for.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	requires_fuse || return 0
	requires losetup mkfs.ext4 e2fsck fsfreeze python3 || return 0
}
setup() { td_setup_dir; }
teardown() { td_teardown; }

NFILES=40 # half fsynced, half not; 256 KiB to 1 MiB each
DISK_SECTORS=$((512 * 2048))

# The writer: files d/fNNN in the filesystem at $1. Fsynced ones are listed in
# $2 ("path sha256") once both their fsync and their directory's returned;
# the others in $3, after sync_file_range has sent their data to the drive.
WRITER_PY='
import ctypes, hashlib, os, sys
root, synced_list, unsynced_list, nfiles = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
libc = ctypes.CDLL(None, use_errno=True)
SYNC_FILE_RANGE_ALL = 1 | 2 | 4   # wait before, write, wait after: sent, not flushed

def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)

os.mkdir(root + "/d")
fsync_dir(root)
synced, unsynced = open(synced_list, "w"), open(unsynced_list, "w")
# All the fsynced files first: an fsync flushes the whole drive cache, and the
# unsynced data must still be in it when the power fails.
for i in sorted(range(nfiles), key=lambda i: i % 2):
    data = hashlib.sha256(b"tagdisk %d" % i).digest() * (8192 * (1 + i % 4))
    path = "%s/d/f%03d" % (root, i)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, data)
    if i % 2 == 0:
        os.fsync(fd)
        fsync_dir(root + "/d")
        out = synced
    else:
        if libc.sync_file_range(fd, ctypes.c_int64(0), ctypes.c_int64(0),
                                ctypes.c_uint(SYNC_FILE_RANGE_ALL)) != 0:
            raise OSError(ctypes.get_errno(), "sync_file_range")
        out = unsynced
    os.close(fd)
    out.write("%s %d %s\n" % (path, len(data), hashlib.sha256(data).hexdigest()))
    out.flush()
'

# Classify the files of list $1: intact, missing, empty, short (smaller than
# written), wrong (as large or larger, other bytes) or unreadable (an I/O
# error such as a failed metadata checksum).
CHECK_PY='
import hashlib, os, sys
counts = dict(intact=0, missing=0, empty=0, short=0, wrong=0, unreadable=0)
for line in open(sys.argv[1]):
    path, size, sha = line.split()
    try:
        data = open(path, "rb").read()
    except FileNotFoundError:
        counts["missing"] += 1
        continue
    except OSError:
        counts["unreadable"] += 1
        continue
    if hashlib.sha256(data).hexdigest() == sha:
        counts["intact"] += 1
    elif not data:
        counts["empty"] += 1
    elif len(data) < int(size):
        counts["short"] += 1
    else:
        counts["wrong"] += 1
print(" ".join("%s=%d" % kv for kv in counts.items()))
'

# detach LOOP: detach it and wait until the kernel let it go; it is no longer ours.
detach() {
	local dev=$1
	losetup -d "$dev"
	td_wait_for 60 "$dev to let $TD_DISK go" loop_released "$dev"
	local kept=() d
	for d in "${TD_LOOPS[@]}"; do
		[ "$d" = "$dev" ] || kept+=("$d")
	done
	TD_LOOPS=("${kept[@]}")
}

# loop_released LOOP: LOOP no longer has $TD_DISK as its backing file (prints what it has).
loop_released() {
	local back
	back=$(losetup -n -O BACK-FILE "$1" 2>/dev/null) || true
	echo "$1: ${back:-no backing file}"
	[[ "$back" != *"$TD_DISK"* ]]
}

# crash_run MOUNT_OPTIONS KEEP SEED CHECKPOINT(yes|no): the whole cycle. Sets
# LOST_WRITES LOST_SECTORS KEPT_WRITES SYNCED UNSYNCED FSCK_STATUS FSCK_SUMMARY
# MOUNT_STATUS, and prints the figures to the TAP stream.
crash_run() {
	local opts=$1 keep=$2 seed=$3 checkpoint=$4 dev fs=$TD_DIR/fs pf
	printf '[drive]\nwrite_cache = volatile\ncache_size = 256M\n' >"$TD_DIR/tagdisk.ini"
	start_tagdiskd -c "$TD_DIR/tagdisk.ini" --size 512M
	[ "$(td_status write_cache)" = volatile ]
	dev=$(td_losetup --direct-io=on)
	# td_losetup ran in a subshell: remember the device here, for teardown.
	TD_LOOPS+=("$dev")
	[ "$(losetup -n -O DIO "$dev" | tr -d ' ')" = 1 ]
	mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0,nodiscard "$dev"
	mkdir "$fs"
	# commit=600: no periodic journal commit (every 5 s by default) during the test. With
	# barriers each commit flushes the drive's cache, and one that came between the writes and
	# the power failure, as it would on a slow machine, would leave nothing to lose.
	mount -o "$opts,commit=600" "$dev" "$fs"
	if [ "$opts" = nobarrier ]; then
		grep -E "^$dev $fs ext4 .*nobarrier" /proc/mounts
	fi

	python3 -c "$WRITER_PY" "$fs" "$TD_DIR/synced" "$TD_DIR/unsynced" "$NFILES"
	[ "$(wc -l <"$TD_DIR/synced")" -eq $((NFILES / 2)) ]
	[ "$(wc -l <"$TD_DIR/unsynced")" -eq $((NFILES / 2)) ]
	if [ "$checkpoint" = yes ]; then
		# Freezing checkpoints the journal: metadata written in place, journal emptied.
		fsfreeze -f "$fs"
		fsfreeze -u "$fs"
	fi
	local cached
	cached=$(td_admin stats | td_json cache cached_bytes)
	[ "$cached" -gt 0 ]

	# The power fails.
	td_ctl inject error op=write sector=0 count="$DISK_SECTORS" >/dev/null
	pf=$(td_ctl --json powerfail keep="$keep" seed="$seed")
	LOST_WRITES=$(echo "$pf" | td_json lost_writes)
	LOST_SECTORS=$(echo "$pf" | td_json lost_sectors)
	KEPT_WRITES=$(echo "$pf" | td_json kept_writes)
	umount -l "$fs"
	detach "$dev"
	# Nothing the dead instance did on its way out got into the cache.
	pf=$(td_ctl --json powerfail)
	[ "$(echo "$pf" | td_json lost_writes)" -eq 0 ]
	[ "$(echo "$pf" | td_json kept_writes)" -eq 0 ]
	td_ctl inject clear >/dev/null

	# The reboot: mount replays the journal; then the files; then fsck.
	dev=$(td_losetup --direct-io=on)
	TD_LOOPS+=("$dev")
	MOUNT_STATUS=0
	mount "$dev" "$fs" || MOUNT_STATUS=$?
	if [ "$MOUNT_STATUS" -eq 0 ]; then
		SYNCED=$(python3 -c "$CHECK_PY" "$TD_DIR/synced")
		UNSYNCED=$(python3 -c "$CHECK_PY" "$TD_DIR/unsynced")
		umount "$fs"
	else
		SYNCED="mount failed"
		UNSYNCED="mount failed"
	fi
	FSCK_STATUS=0
	e2fsck -fn "$dev" >"$TD_DIR/fsck.out" 2>&1 || FSCK_STATUS=$?
	FSCK_SUMMARY=$(grep -E "^$dev: [0-9]+/[0-9]+ files" "$TD_DIR/fsck.out" | tail -1)
	detach "$dev"
	stop_tagdiskd

	{
		echo "# mount -o $opts, powerfail keep=$keep seed=$seed, checkpoint $checkpoint:" \
			"cache held $cached bytes; lost $LOST_WRITES writes ($LOST_SECTORS sectors)," \
			"kept $KEPT_WRITES"
		echo "#   fsynced files ($((NFILES / 2))): $SYNCED"
		echo "#   unsynced files ($((NFILES / 2))): $UNSYNCED"
		echo "#   e2fsck -fn exit $FSCK_STATUS: ${FSCK_SUMMARY:-no summary}"
		if [ "$FSCK_STATUS" -ne 0 ]; then
			grep -vE '^(Pass [1-5]|e2fsck [0-9])' "$TD_DIR/fsck.out" | grep . | head -6 |
				sed 's/^/#     /'
		fi
	} >&3
}

@test "ext4 with barriers, powerfail keep=0: fsck clean after journal replay, every fsynced file intact" {
	crash_run barrier 0 1 no
	[ "$LOST_WRITES" -gt 0 ]
	[ "$MOUNT_STATUS" -eq 0 ]
	[ "$FSCK_STATUS" -eq 0 ]
	[ "$SYNCED" = "intact=$((NFILES / 2)) missing=0 empty=0 short=0 wrong=0 unreadable=0" ]
}

@test "ext4 with barriers, powerfail keep=50 seed=42 (a torn cache): fsck clean, every fsynced file intact" {
	crash_run barrier 50 42 no
	[ "$LOST_WRITES" -gt 0 ]
	[ "$MOUNT_STATUS" -eq 0 ]
	[ "$FSCK_STATUS" -eq 0 ]
	[ "$SYNCED" = "intact=$((NFILES / 2)) missing=0 empty=0 short=0 wrong=0 unreadable=0" ]
}

@test "ext4 with -o nobarrier, powerfail keep=0: fsynced files are lost, the cache really is volatile" {
	crash_run nobarrier 0 1 no
	[ "$LOST_WRITES" -gt 0 ]
	[ "$KEPT_WRITES" -eq 0 ]
	# Not one flush reached the drive since mkfs: no journal commit survived, so
	# no fsynced file did either (the filesystem is the empty one mkfs left).
	[ "$MOUNT_STATUS" -ne 0 ] || [[ "$SYNCED" != "intact=$((NFILES / 2)) "* ]]
}

@test "ext4 with -o nobarrier and a journal checkpoint, powerfail keep=50 seed=42: fsck finds damage or fsynced files are lost" {
	crash_run nobarrier 50 42 yes
	[ "$LOST_WRITES" -gt 0 ]
	[ "$KEPT_WRITES" -gt 0 ]
	[ "$MOUNT_STATUS" -ne 0 ] || [ "$FSCK_STATUS" -ne 0 ] ||
		[[ "$SYNCED" != "intact=$((NFILES / 2)) "* ]]
}
