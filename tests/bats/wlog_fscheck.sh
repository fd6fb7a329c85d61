#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The check wlog_fs.bats has tagdisk-replay run on each state (its --fsck command):
#
#   wlog_fscheck.sh ext4|xfs MANIFEST WORKDIR exact|stable
#
# A copy of the replayed image ($TD_REPLAY_TARGET) is mounted from a loop device (which
# replays the journal, as a reboot would), the files the last mark ($TD_REPLAY_MARK) vouches
# for are compared with MANIFEST (wlog_fs_workload.py), then it is unmounted and checked
# read-only (e2fsck -fn, xfs_repair -n). "exact": the state is the mark's own, so the
# directory holds exactly the manifest's files. "stable": a later state (a flush, a crash),
# so only the files no later operation touches must be there, intact. Prints one line per
# problem, naming the entry and state; exits 1 when there is any.
set -u
fs=$1 manifest=$2 work=$3 mode=$4
img=$work/img
mnt=$work/mnt
where="entry $TD_REPLAY_ENTRY ($TD_REPLAY_STATE)"
mkdir -p "$mnt"
cp --sparse=always "$TD_REPLAY_TARGET" "$img" || exit 10
loop=$(losetup -f --show "$img") || exit 10
opts=()
[ "$fs" = xfs ] && opts=(-o nouuid)
if ! mount -t "$fs" "${opts[@]}" "$loop" "$mnt" 2>"$work/mount.err"; then
	echo "$where: mount failed: $(tr '\n' ' ' <"$work/mount.err")"
	losetup -d "$loop"
	rm -f "$img"
	exit 1
fi
rc=0
if [ -n "$TD_REPLAY_MARK" ]; then
	k=${TD_REPLAY_MARK#m}
	want=()
	while read -r mark _ name sha last; do
		[ "$mark" = "$TD_REPLAY_MARK" ] && [ "$name" != - ] || continue
		want+=("$name")
		[ "$mode" = exact ] || [ "$last" -le "$k" ] || continue
		got=$(sha256sum <"$mnt/d/$name" 2>/dev/null) || got=missing
		got=${got%% *}
		if [ "$got" != "$sha" ]; then
			echo "$where: $name, fsynced before mark $TD_REPLAY_MARK: ${got}, want $sha"
			rc=1
		fi
	done <"$manifest"
	if [ "$mode" = exact ]; then
		have=$(ls "$mnt/d" | sort | tr '\n' ' ')
		expect=$(printf '%s\n' "${want[@]}" | sed '/^$/d' | sort | tr '\n' ' ')
		if [ "$have" != "$expect" ]; then
			echo "$where: at mark $TD_REPLAY_MARK the directory holds: $have; want: $expect"
			rc=1
		fi
	fi
fi
umount "$mnt"
if [ "$fs" = ext4 ]; then
	if ! e2fsck -fn "$img" >"$work/fsck.out" 2>&1; then
		echo "$where: e2fsck -fn: $(tail -n 3 "$work/fsck.out" | tr '\n' ' ')"
		rc=1
	fi
elif ! xfs_repair -n -f "$img" >"$work/fsck.out" 2>&1; then
	echo "$where: xfs_repair -n: $(grep -v '^ *- ' "$work/fsck.out" | tail -n 3 | tr '\n' ' ')"
	rc=1
fi
losetup -d "$loop"
rm -f "$img"
exit $rc
