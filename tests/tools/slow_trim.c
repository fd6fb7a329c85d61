// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * slow_trim.c - an LD_PRELOAD shim for the integration tests: it sleeps
 * before every call that can replace or discard memory a process already
 * uses (mmap with MAP_FIXED, mremap to a fixed place or leaving the old
 * range behind, madvise DONTNEED/FREE/REMOVE), then makes the call. A window
 * that such a call opens, where some other writer (the kernel filling a
 * buffer, another thread) races with the discard, becomes milliseconds wide
 * instead of nanoseconds, so a test that idles past the daemon's timers and
 * reads back what it wrote sees the race within a minute when it is there.
 *
 *   LD_PRELOAD=build/tests/libslowtrim.so TD_SLOWTRIM_US=2000 tagdiskd ...
 *
 * TD_SLOWTRIM_US: the delay in microseconds (default 2000). Every delayed
 * call that succeeded is counted in the file named by TD_SLOWTRIM_COUNT, when
 * set (one byte appended per call), so a test can tell that memory really
 * was discarded while the shim was in play.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

static void slow_down(void)
{
	const char *us_text = getenv("TD_SLOWTRIM_US");
	long us = us_text ? strtol(us_text, NULL, 10) : 2000;
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };
	int saved = errno;

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	errno = saved;
}

/* A delayed call succeeded: count it. */
static void count_one(void)
{
	const char *count = getenv("TD_SLOWTRIM_COUNT");
	int saved = errno;

	if (count) {
		int fd = open(count, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);

		if (fd >= 0) {
			(void)!write(fd, "x", 1);
			close(fd);
		}
	}
	errno = saved;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	static void *(*real)(void *, size_t, int, int, int, off_t);

	if (!real)
		real = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
	void *ret;

	if (!(flags & MAP_FIXED))
		return real(addr, len, prot, flags, fd, off);
	slow_down();
	ret = real(addr, len, prot, flags, fd, off);
	if (ret != MAP_FAILED)
		count_one();
	return ret;
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap(addr, len, prot, flags, fd, off);
}

int madvise(void *addr, size_t len, int advice)
{
	static int (*real)(void *, size_t, int);

	if (!real)
		real = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "madvise");
	int ret;

	if (advice != MADV_DONTNEED && advice != MADV_FREE && advice != MADV_REMOVE)
		return real(addr, len, advice);
	slow_down();
	ret = real(addr, len, advice);
	if (!ret)
		count_one();
	return ret;
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	static void *(*real)(void *, size_t, size_t, int, ...);
	void *new_addr = NULL;
	va_list ap;

	if (!real)
		real = (void *(*)(void *, size_t, size_t, int, ...))dlsym(RTLD_NEXT, "mremap");
	if (flags & MREMAP_FIXED) {
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	void *ret;

	if (!(flags & (MREMAP_FIXED | MREMAP_DONTUNMAP)))
		return real(old, old_len, new_len, flags, new_addr);
	slow_down();
	ret = real(old, old_len, new_len, flags, new_addr);
	if (ret != MAP_FAILED)
		count_one();
	return ret;
}
