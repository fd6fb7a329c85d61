// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive_mem.c - a memory backend, for tests.
 *
 * The disk is one zero-filled allocation. A mutex serialises transfers, so
 * a read racing a write sees one or the other whole, never torn bytes the
 * way tests would otherwise have to reason about.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/lock.h"
#include "tagdisk/drive.h"

struct mem_backend {
	struct td_mutex lock;
	uint8_t *data;
	uint64_t size;
};

static int mem_check(const struct mem_backend *mb, uint64_t off, uint64_t len)
{
	return off > mb->size || len > mb->size - off ? -EIO : 0;
}

static int mem_rw(struct mem_backend *mb, const struct iovec *iov, int iovcnt, uint64_t off,
		  bool write)
{
	uint64_t len = 0;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (mem_check(mb, off, len))
		return -EIO;
	td_mutex_lock(&mb->lock);
	for (int i = 0; i < iovcnt; i++) {
		if (write)
			memcpy(mb->data + off, iov[i].iov_base, iov[i].iov_len);
		else
			memcpy(iov[i].iov_base, mb->data + off, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	td_mutex_unlock(&mb->lock);
	return 0;
}

static int mem_read(void *priv, const struct iovec *iov, int iovcnt, uint64_t off)
{
	return mem_rw(priv, iov, iovcnt, off, false);
}

static int mem_write(void *priv, const struct iovec *iov, int iovcnt, uint64_t off, bool fua)
{
	(void)fua;
	return mem_rw(priv, iov, iovcnt, off, true);
}

static int mem_flush(void *priv)
{
	(void)priv;
	return 0;
}

static int mem_zero(void *priv, uint64_t off, uint64_t len)
{
	struct mem_backend *mb = priv;

	if (mem_check(mb, off, len))
		return -EIO;
	td_mutex_lock(&mb->lock);
	memset(mb->data + off, 0, len);
	td_mutex_unlock(&mb->lock);
	return 0;
}

static void mem_destroy(void *priv)
{
	struct mem_backend *mb = priv;

	td_mutex_destroy(&mb->lock);
	free(mb->data);
	free(mb);
}

static const struct td_backend_ops mem_ops = {
	.name = "mem",
	.memory_only = true,
	.read = mem_read,
	.write = mem_write,
	.flush = mem_flush,
	.discard = mem_zero,
	.write_zeroes = mem_zero,
	.destroy = mem_destroy,
};

int td_backend_mem_init(struct td_backend *be, uint64_t size)
{
	struct mem_backend *mb = malloc(sizeof(*mb));

	if (!mb)
		return -ENOMEM;
	mb->data = calloc(1, size);
	if (!mb->data) {
		free(mb);
		return -ENOMEM;
	}
	mb->size = size;
	td_mutex_init(&mb->lock);
	be->ops = &mem_ops;
	be->priv = mb;
	return 0;
}

uint8_t *td_backend_mem_data(const struct td_backend *be)
{
	return ((struct mem_backend *)be->priv)->data;
}
