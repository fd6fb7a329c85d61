// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive_absent.c - the open functions of the network backends a build leaves
 * out (make WITH_RBD=0, WITH_NBD=0; tagdisk/backend.h). The Makefile compiles
 * this file only then, in place of drive_rbd.c or drive_nbd.c: each open
 * fails with -ENOTSUP and says how to build the backend in. The daemon's
 * config refuses such a backend first; these are for every other caller.
 */
#include <errno.h>
#include <stdio.h>
#include "tagdisk/backend.h"

#if !TD_WITH_RBD
int td_backend_rbd_open(struct td_backend *be, const struct td_rbd_params *p, uint64_t create_size,
			bool read_only, uint64_t *size, char *msg, size_t msglen)
{
	(void)be, (void)p, (void)create_size, (void)read_only, (void)size;
	snprintf(msg, msglen, "this build has no RBD backend (built with WITH_RBD=0; install "
			      "librbd-dev and build again without it)");
	return -ENOTSUP;
}
#endif

#if !TD_WITH_NBD
int td_backend_nbd_open(struct td_backend *be, const struct td_nbd_params *p, bool read_only,
			uint64_t *size, char *msg, size_t msglen)
{
	(void)be, (void)p, (void)read_only, (void)size;
	snprintf(msg, msglen, "this build has no NBD backend (built with WITH_NBD=0; install "
			      "libnbd-dev and build again without it)");
	return -ENOTSUP;
}
#endif
