// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mounts.c - finding a mount in /proc/self/mountinfo (mounts.h).
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "daemon/mounts.h"

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/*
 * @path with its directories resolved (symbolic links, "..") but not its last
 * component, which may be a mount that must not be looked at. Return: 0 or -errno.
 */
static int canonical(const char *path, char *buf, size_t len)
{
	char dir_copy[PATH_MAX], base_copy[PATH_MAX], dir[PATH_MAX];
	const char *base;
	int n;

	if (strlen(path) >= sizeof(dir_copy))
		return -ENAMETOOLONG;
	strcpy(dir_copy, path);
	strcpy(base_copy, path);
	base = basename(base_copy);
	if (!realpath(dirname(dir_copy), dir))
		return -errno;
	if (strcmp(base, "/") == 0)
		n = snprintf(buf, len, "/");
	else
		n = snprintf(buf, len, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", base);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int td_mount_lookup(const char *path, struct td_mount_info *mi)
{
	char want[PATH_MAX];
	char *line = NULL;
	size_t cap = 0;
	FILE *f;
	int ret = canonical(path, want, sizeof(want));

	if (ret)
		return ret;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	ret = -ENOENT;
	while (getline(&line, &cap, f) > 0) {
		unsigned int maj, min;
		char point[PATH_MAX + 1], type[64];
		char *sep = strstr(line, " - ");

		if (!sep || sscanf(line, "%*u %*u %u:%u %*s %4096s", &maj, &min, point) != 3 ||
		    sscanf(sep + 3, "%63s", type) != 1)
			continue;
		unescape(point);
		if (strcmp(point, want) != 0)
			continue;
		/* The last one listed is the one on top. */
		mi->major_nr = maj;
		mi->minor_nr = min;
		snprintf(mi->fstype, sizeof(mi->fstype), "%s", type);
		ret = 0;
	}
	free(line);
	fclose(f);
	return ret;
}

bool td_mount_is_tagdisk(const char *path)
{
	struct td_mount_info mi;

	return td_mount_lookup(path, &mi) == 0 && strcmp(mi.fstype, "fuse.tagdisk") == 0;
}
