// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive_null.c - the null backend: every command succeeds at once.
 *
 * Writes are thrown away and reads leave the buffers as they were (like a
 * null_blk without memory backing), so a benchmark measures the block layer
 * and nothing else.
 */
#include "tagdisk/drive.h"

static int null_read(void *priv, const struct iovec *iov, int iovcnt, uint64_t off)
{
	(void)priv, (void)iov, (void)iovcnt, (void)off;
	return 0;
}

static int null_write(void *priv, const struct iovec *iov, int iovcnt, uint64_t off, bool fua)
{
	(void)priv, (void)iov, (void)iovcnt, (void)off, (void)fua;
	return 0;
}

static int null_flush(void *priv)
{
	(void)priv;
	return 0;
}

static int null_range(void *priv, uint64_t off, uint64_t len)
{
	(void)priv, (void)off, (void)len;
	return 0;
}

static const struct td_backend_ops null_ops = {
	.name = "null",
	.memory_only = true,
	.read = null_read,
	.write = null_write,
	.flush = null_flush,
	.discard = null_range,
	.write_zeroes = null_range,
};

void td_backend_null_init(struct td_backend *be)
{
	be->ops = &null_ops;
	be->priv = NULL;
}
