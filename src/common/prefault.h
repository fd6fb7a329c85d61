/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * prefault.h - make memory resident before anyone depends on it being there.
 *
 * The daemon runs under mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT), so
 * a fresh mapping is locked page by page as it is touched, and MAP_POPULATE
 * does not fault it in. Memory that must not fault later (trace rings written
 * on the I/O path, FUSE receive buffers the kernel copies into) is made
 * resident here, once, when it is set up.
 */
#ifndef TAGDISK_PREFAULT_H
#define TAGDISK_PREFAULT_H

#include <stddef.h>
#include "common/compiler.h"

/*
 * Make every page of [@p, @p + @len) resident and writable now:
 * MADV_POPULATE_WRITE (Linux 5.14), or on older kernels a write to each page.
 * Return: 0, or -ENOMEM when the pages could not be had.
 */
int td_prefault(void *p, size_t len) td_nonnull(1);

#endif /* TAGDISK_PREFAULT_H */
