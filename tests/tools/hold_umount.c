// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * hold_umount.c - an LD_PRELOAD shim for the integration tests: every
 * umount2(2) the process makes waits until a file exists, then is made.
 * A test can so act between a daemon's decision to unmount and the unmount
 * itself (mount something else on the same directory, say) without a sleep.
 *
 *   LD_PRELOAD=build/tests/libholdumount.so TD_HOLD_UMOUNT_GO=FILE \
 *   TD_HOLD_UMOUNT_LOG=FILE tagdiskd ...
 *
 * TD_HOLD_UMOUNT_GO: the file whose existence lets the call go on (checked
 * every millisecond, for two minutes at most; unset: no wait).
 * TD_HOLD_UMOUNT_LOG: a file to which each call appends a line with its
 * path, before it waits.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

static void log_call(const char *target)
{
	const char *log = getenv("TD_HOLD_UMOUNT_LOG");
	char line[4200];
	int fd, n;

	if (!log)
		return;
	fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	n = snprintf(line, sizeof(line), "umount2 %s\n", target);
	if (n > 0 && write(fd, line, (size_t)n) < 0)
		n = 0;
	close(fd);
}

static void wait_for_go(void)
{
	const char *go = getenv("TD_HOLD_UMOUNT_GO");
	struct timespec nap = { .tv_sec = 0, .tv_nsec = 1000000 };

	if (!go)
		return;
	for (int i = 0; i < 120000 && access(go, F_OK) != 0; i++)
		nanosleep(&nap, NULL);
}

int umount2(const char *target, int flags)
{
	int (*real)(const char *, int) = (int (*)(const char *, int))dlsym(RTLD_NEXT, "umount2");
	int saved = errno;

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	log_call(target);
	wait_for_go();
	errno = saved;
	return real(target, flags);
}
