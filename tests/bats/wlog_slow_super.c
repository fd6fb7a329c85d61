// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wlog_slow_super.c - an LD_PRELOAD shim for wlog.bats: every write at offset
 * 0 of a file whose name ends in ".wlog" (a write log's super block) sleeps
 * WLOG_SUPER_DELAY_US (default 20000) microseconds first. It widens the window
 * between an entry reaching the log file and the super block counting it, so
 * that a kill -9 right after an fsync returns lands in it when the daemon does
 * not wait for the count.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static void maybe_sleep(int fd, off_t off)
{
	char link[64], path[PATH_MAX];
	const char *env = getenv("WLOG_SUPER_DELAY_US");
	ssize_t n;

	if (off != 0)
		return;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 5)
		return;
	path[n] = '\0';
	if (strcmp(path + n - 5, ".wlog") == 0)
		usleep(env ? (useconds_t)atoi(env) : 20000);
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	static ssize_t (*next)(int, const struct iovec *, int, off_t);

	if (!next)
		next = (ssize_t(*)(int, const struct iovec *, int, off_t))dlsym(RTLD_NEXT, "pwritev");
	maybe_sleep(fd, off);
	return next(fd, iov, cnt, off);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return pwritev(fd, iov, cnt, off);
}
