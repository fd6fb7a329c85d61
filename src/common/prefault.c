// SPDX-License-Identifier: GPL-2.0-or-later
/* prefault.c - make memory resident before it is used (prefault.h). */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>
#include "common/prefault.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int td_prefault(void *p, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
		return 0;
	if (errno != EINVAL)
		return -ENOMEM;
	/* Before Linux 5.14: write each page. */
	for (size_t off = 0; off < len; off += page)
		((volatile char *)p)[off] = 0;
	return 0;
}
