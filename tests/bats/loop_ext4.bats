#!/usr/bin/env bats
# A loop device on the disk file, ext4 on it, a tree of real files through it:
# fsck clean, every byte back after a remount; discard reaches the image as holes.

load helpers
bats_require_minimum_version 1.5.0

# The tree copied through the disk, and its checksums.
TREE=/usr/include

setup_file() {
	requires_fuse || return 0
	requires losetup mkfs.ext4 e2fsck blkdiscard fstrim sha256sum || return 0
	[ -d "$TREE" ] || { td_skip_file "$TREE is missing"; return 0; }
	(cd "$TREE" && find . -type f -print0 | sort -z | xargs -0 sha256sum) \
		>"$BATS_FILE_TMPDIR/manifest"
	(cd "$TREE" && find . -printf '%p %y %l\n' | sort) >"$BATS_FILE_TMPDIR/listing"
	[ "$(wc -l <"$BATS_FILE_TMPDIR/manifest")" -ge 2000 ] || { td_skip_file "$TREE has too few files"; return 0; }
}
setup() { td_setup_dir; }
teardown() { td_teardown; }

IMG_SIZE=$((512 * 1024 * 1024))

# ext4_roundtrip LOSETUP_OPTION -- TAGDISKD_OPTIONS...
ext4_roundtrip() {
	local lo_opt=$1 dev fs=$TD_DIR/fs
	shift 2
	start_tagdiskd --size 512M "$@"
	dev=$(td_losetup $lo_opt)
	# The loop device really runs the asked-for way.
	if [ "$lo_opt" = --direct-io=on ]; then
		[ "$(losetup -n -O DIO "$dev" | tr -d ' ')" = 1 ]
	else
		[ "$(losetup -n -O DIO "$dev" | tr -d ' ')" = 0 ]
	fi
	[ "$(blockdev --getsize64 "$dev")" -eq "$IMG_SIZE" ]

	mkfs.ext4 -q -F "$dev"
	mkdir "$fs"
	mount "$dev" "$fs"
	cp -a "$TREE" "$fs/tree"
	sync -f "$fs"
	umount "$fs"
	run e2fsck -fn "$dev"
	echo "$output" >&2
	[ "$status" -eq 0 ]

	mount "$dev" "$fs"
	(cd "$fs/tree" && sha256sum -c --quiet --strict "$BATS_FILE_TMPDIR/manifest")
	diff "$BATS_FILE_TMPDIR/listing" <(cd "$fs/tree" && find . -printf '%p %y %l\n' | sort)

	# fstrim after removing the tree: the freed blocks become holes in the image.
	local holes_before holes_after
	holes_before=$(td_hole_bytes "$TD_IMG" 0 "$IMG_SIZE")
	rm -rf "$fs/tree"
	sync -f "$fs"
	fstrim "$fs"
	holes_after=$(td_hole_bytes "$TD_IMG" 0 "$IMG_SIZE")
	echo "holes: $holes_before -> $holes_after" >&2
	[ $((holes_after - holes_before)) -ge $((64 * 1024 * 1024)) ]
	umount "$fs"
	run e2fsck -fn "$dev"
	[ "$status" -eq 0 ]

	# blkdiscard: the whole disk reads zeroes and the image is (almost) all holes.
	blkdiscard "$dev"
	cmp -n "$IMG_SIZE" "$dev" /dev/zero
	holes_after=$(td_hole_bytes "$TD_IMG" 0 "$IMG_SIZE")
	echo "holes after blkdiscard: $holes_after of $IMG_SIZE" >&2
	[ "$holes_after" -eq "$IMG_SIZE" ]
	[ "$(du -B1 "$TD_IMG" | cut -f1)" -lt 1048576 ]
	[ "$(td_admin stats | td_json discards)" -gt 0 ]
	[ "$(td_status errors)" -eq 0 ]

	losetup -d "$dev"
	stop_tagdiskd
}

@test "ext4 on a buffered loop device, rq mode with deadline: fsck clean, files intact, discards punch holes" {
	ext4_roundtrip --direct-io=off -- --mode rq --elevator deadline
}

@test "ext4 on a direct-I/O loop device, rq mode with deadline: fsck clean, files intact, discards punch holes" {
	ext4_roundtrip --direct-io=on -- --mode rq --elevator deadline
}

@test "ext4 on a direct-I/O loop device, bio mode: fsck clean, files intact, discards punch holes" {
	ext4_roundtrip --direct-io=on -- --mode bio
	grep -q 'mode bio' "$TD_LOG"
}

@test "ext4 on a buffered loop device, rq mode with noop: fsck clean, files intact, discards punch holes" {
	ext4_roundtrip --direct-io=off -- --mode rq --elevator noop
	grep -q 'elevator noop' "$TD_LOG"
}
