// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * backend.c - synchronous calls on either kind of backend (tagdisk/backend.h).
 *
 * A synchronous backend is called directly. On an asynchronous one the call
 * becomes one operation on a bounce buffer: submitted, waited for on a
 * condition variable, and (for a read) copied out to the caller's buffers.
 * The volatile write cache, bio mode and the hdd model use these; the
 * drive's worker threads submit asynchronously instead (drive_exec.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/lock.h"
#include "tagdisk/backend.h"

struct sync_wait {
	struct td_mutex lock;
	struct td_cond cond;
	bool done;
	int err;
};

static void sync_done(struct td_backend_io *io, int err)
{
	struct sync_wait *w = io->owner;

	td_mutex_lock(&w->lock);
	w->err = err;
	w->done = true;
	td_cond_signal(&w->cond);
	td_mutex_unlock(&w->lock);
}

static size_t iov_bytes(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;

	for (int i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* Run @io on the asynchronous @be and wait for it. Return: its result. */
static int submit_and_wait(const struct td_backend *be, struct td_backend_io *io)
{
	struct sync_wait w = { .done = false };
	int err;

	td_mutex_init(&w.lock);
	td_cond_init(&w.cond);
	io->done = sync_done;
	io->owner = &w;
	err = be->ops->submit(be->priv, io);
	if (!err) {
		td_mutex_lock(&w.lock);
		while (!w.done)
			td_cond_wait(&w.cond, &w.lock);
		err = w.err;
		td_mutex_unlock(&w.lock);
	}
	td_cond_destroy(&w.cond);
	td_mutex_destroy(&w.lock);
	return err;
}

/* An asynchronous read or write of @iov through one bounce buffer. */
static int async_rw(const struct td_backend *be, enum td_op op, const struct iovec *iov,
		    int iovcnt, uint64_t off, bool fua)
{
	size_t len = iov_bytes(iov, iovcnt);
	struct td_backend_io io = { .op = op, .fua = fua, .off = off, .len = len };
	char *p;
	int err;

	if (!len)
		return 0;
	io.buf = malloc(len);
	if (!io.buf)
		return -ENOMEM;
	if (op == TD_OP_WRITE) {
		p = io.buf;
		for (int i = 0; i < iovcnt; p += iov[i].iov_len, i++)
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
	}
	err = submit_and_wait(be, &io);
	if (!err && op == TD_OP_READ) {
		p = io.buf;
		for (int i = 0; i < iovcnt; p += iov[i].iov_len, i++)
			memcpy(iov[i].iov_base, p, iov[i].iov_len);
	}
	free(io.buf);
	return err;
}

static int async_range(const struct td_backend *be, enum td_op op, uint64_t off, uint64_t len)
{
	struct td_backend_io io = { .op = op, .off = off, .len = len };

	return submit_and_wait(be, &io);
}

int td_backend_read(const struct td_backend *be, const struct iovec *iov, int iovcnt, uint64_t off)
{
	if (td_backend_is_async(be))
		return async_rw(be, TD_OP_READ, iov, iovcnt, off, false);
	return be->ops->read(be->priv, iov, iovcnt, off);
}

int td_backend_write(const struct td_backend *be, const struct iovec *iov, int iovcnt, uint64_t off,
		     bool fua)
{
	if (td_backend_is_async(be))
		return async_rw(be, TD_OP_WRITE, iov, iovcnt, off, fua);
	return be->ops->write(be->priv, iov, iovcnt, off, fua);
}

int td_backend_flush(const struct td_backend *be)
{
	if (td_backend_is_async(be))
		return async_range(be, TD_OP_FLUSH, 0, 0);
	return be->ops->flush(be->priv);
}

int td_backend_discard(const struct td_backend *be, uint64_t off, uint64_t len)
{
	if (td_backend_is_async(be))
		return async_range(be, TD_OP_DISCARD, off, len);
	return be->ops->discard(be->priv, off, len);
}

int td_backend_write_zeroes(const struct td_backend *be, uint64_t off, uint64_t len)
{
	if (td_backend_is_async(be))
		return async_range(be, TD_OP_WRITE_ZEROES, off, len);
	return be->ops->write_zeroes(be->priv, off, len);
}
