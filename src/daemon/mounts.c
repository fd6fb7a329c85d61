// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mounts.c - finding a mount in /proc/self/mountinfo (mounts.h).
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common/clock.h"
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

/* One line of mountinfo: its mount point (unescaped), device and type. */
struct mount_line {
	char point[PATH_MAX + 1];
	unsigned int maj, min;
	char type[64];
	char source[256];
};

/*
 * Call @fn for each mount, in mountinfo's order (a mount listed later is on
 * top of one before it at the same point), until it returns true.
 * Return: 0, or a negative errno when mountinfo cannot be read.
 */
static int each_mount(bool (*fn)(const struct mount_line *m, void *arg), void *arg)
{
	struct mount_line m;
	char *line = NULL;
	size_t cap = 0;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *sep = strstr(line, " - ");

		m.source[0] = '\0';
		if (!sep || sscanf(line, "%*u %*u %u:%u %*s %4096s", &m.maj, &m.min, m.point) != 3 ||
		    sscanf(sep + 3, "%63s %255s", m.type, m.source) < 1)
			continue;
		unescape(m.point);
		unescape(m.source);
		if (fn(&m, arg))
			break;
	}
	free(line);
	fclose(f);
	return 0;
}

struct lookup {
	const char *want;
	struct td_mount_info *mi;
	bool found;
};

static bool lookup_one(const struct mount_line *m, void *arg)
{
	struct lookup *l = arg;

	if (strcmp(m->point, l->want) != 0)
		return false;
	/* Keep going: the last one listed is the one on top. */
	l->mi->major_nr = m->maj;
	l->mi->minor_nr = m->min;
	snprintf(l->mi->fstype, sizeof(l->mi->fstype), "%s", m->type);
	snprintf(l->mi->source, sizeof(l->mi->source), "%s", m->source);
	l->found = true;
	return false;
}

int td_mount_lookup(const char *path, struct td_mount_info *mi)
{
	char want[PATH_MAX];
	struct lookup l = { .want = want, .mi = mi };
	int ret = canonical(path, want, sizeof(want));

	if (!ret)
		ret = each_mount(lookup_one, &l);
	if (ret)
		return ret;
	return l.found ? 0 : -ENOENT;
}

struct find_type {
	const char *type;
	char *point;
	size_t len;
	bool found;
};

static bool find_type_one(const struct mount_line *m, void *arg)
{
	struct find_type *ft = arg;

	if (strcmp(m->type, ft->type) != 0)
		return false;
	snprintf(ft->point, ft->len, "%s", m->point);
	ft->found = true;
	return true;
}

int td_mount_find_type(const char *fstype, char *point, size_t len)
{
	struct find_type ft = { .type = fstype, .point = point, .len = len };
	int ret = each_mount(find_type_one, &ft);

	if (ret)
		return ret;
	return ft.found ? 0 : -ENOENT;
}

int td_mount_probe(const char *path, unsigned int timeout_ms)
{
	uint64_t deadline = td_now_ns() + (uint64_t)timeout_ms * TD_NSEC_PER_MSEC;
	int status = 0;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		struct statfs st;

		/*
		 * A request to whoever serves the mount (statfs: the kernel caches no
		 * answer to it, as it may a stat). Only async-signal-safe calls here.
		 */
		_exit(statfs(path, &st) == 0 ? 0 : errno & 0xff);
	}
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (td_now_ns() >= deadline) {
			/* FUSE requests wait killably: the child goes at once. */
			kill(pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			return -ETIMEDOUT;
		}
		td_sleep_until(td_now_ns() + 10 * TD_NSEC_PER_MSEC);
	}
	if (!WIFEXITED(status))
		return -ECHILD;
	return -WEXITSTATUS(status);
}

bool td_mount_is_tagdisk(const char *path)
{
	struct td_mount_info mi;

	return td_mount_lookup(path, &mi) == 0 && strcmp(mi.fstype, "fuse.tagdisk") == 0;
}
