/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * mounts.h - what is mounted where, read from /proc/self/mountinfo.
 *
 * Never by looking at the mount itself (but td_mount_probe(), bounded): a
 * stat(2) of a FUSE mount's root whose daemon is gone, while its /dev/fuse is
 * still held open (by a service manager's fd store, for the next daemon),
 * waits until someone serves it.
 */
#ifndef TAGDISK_MOUNTS_H
#define TAGDISK_MOUNTS_H

#include <stdbool.h>
#include <stddef.h>
#include "common/compiler.h"

struct td_mount_info {
	unsigned int major_nr; /* the mount's device, as mountinfo's maj:min */
	unsigned int minor_nr;
	char fstype[64];       /* "fuse.tagdisk" for ours */
	char source[256];      /* what was mounted: "tagdisk:NAME" for ours */
};

/*
 * The mount on top at @path (absolute; its last component is not resolved,
 * the directories above it are). Return: 0 with @mi filled, -ENOENT when
 * nothing is mounted there, or another negative errno.
 */
int td_mount_lookup(const char *path, struct td_mount_info *mi) td_nonnull(1, 2);

/*
 * The first mount of type @fstype ("fusectl", say): its mount point in
 * @point. Return: 0, -ENOENT when there is none, or another negative errno.
 */
int td_mount_find_type(const char *fstype, char *point, size_t len) td_nonnull(1, 2);

/*
 * Ask the mount at @path whether someone serves it: a statfs(2) of it in a
 * child process, killed after @timeout_ms (a FUSE mount whose connection is
 * held open but not served would keep it waiting). The one call here that
 * looks at a mount itself. Return: 0 (it answered), -ENOTCONN (a FUSE
 * mount whose daemon is gone), -ETIMEDOUT (no answer), or another -errno.
 */
int td_mount_probe(const char *path, unsigned int timeout_ms) td_nonnull(1);

/* Return: whether a tagdisk FUSE mount (any daemon's, dead or alive) sits at @path. */
bool td_mount_is_tagdisk(const char *path) td_nonnull(1);

#endif /* TAGDISK_MOUNTS_H */
