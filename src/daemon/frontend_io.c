// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * frontend_io.c - the disk file's data path: read, write, fsync and
 * fallocate as byte I/O on the queue, and their replies.
 *
 * Each request becomes a struct fe_io around a td_byte_io; the handler
 * submits it and returns, and the I/O's completion (fe_io_end, on whatever
 * thread ends it) sends the FUSE reply, so the queue depth the engine sees is
 * the kernel's. The data lives in buffers of the front end's pool
 * (bufpool.h): a read, or a write smaller than STEAL_MIN, gets one of its
 * size (the write's data is copied in); a larger write keeps the receive
 * buffer it arrived in (td_fuse_steal_recv_buf(), no copy). Either goes back
 * to the pool when the I/O ends. A request that came on an io_uring entry
 * needs neither: its write data stays valid in the entry until the reply
 * (td_fuse_recv_data_pinned()), and a read is done straight into the entry
 * (td_fuse_reply_space()), so the ring thread copies nothing. fe_io
 * structures are recycled through per-CPU free lists of at most IO_KEEP each.
 */
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include "common/lock.h"
#include "daemon/bufpool.h"
#include "daemon/fuse_session.h"
#include "frontend_int.h"
#include "tagdisk/bio.h"
#include "tagdisk/queue.h"

#define STEAL_MIN (64U << 10) /* writes this large keep their receive buffer */
#define IO_KEEP	  256U	      /* free fe_io kept for reuse, per CPU's list */

enum fe_io_kind {
	FE_READ,
	FE_WRITE,
	FE_FSYNC,
	FE_FALLOCATE,
};

/* One FUSE request in the queue. */
struct fe_io {
	struct td_byte_io io;
	struct fe_io *next_free;
	struct td_frontend *fe;
	fuse_req_t req;
	enum fe_io_kind kind;
	struct td_buf *buf; /* the data's buffer, or NULL */
};

/* ---- fe_io recycling ------------------------------------------------------------------- */

/* Return: the free list of the CPU this thread runs on now. */
static struct fe_io_cache *io_cache(struct td_frontend *fe)
{
	return &fe->ios[td_pcpu_index()];
}

static struct fe_io *io_get(struct td_frontend *fe)
{
	struct fe_io_cache *c = io_cache(fe);
	struct fe_io *io;

	td_mutex_lock(&c->lock);
	io = c->head;
	if (io) {
		c->head = io->next_free;
		c->nr--;
	}
	td_mutex_unlock(&c->lock);
	if (!io)
		io = malloc(sizeof(*io));
	if (io) {
		memset(&io->io, 0, sizeof(io->io));
		io->fe = fe;
		io->buf = NULL;
	}
	return io;
}

/* Recycle @io on this CPU's free list: where the next request here will look. */
static void io_put(struct td_frontend *fe, struct fe_io *io)
{
	struct fe_io_cache *c = io_cache(fe);

	td_bufpool_put(fe->pool, io->buf);
	io->buf = NULL;
	td_mutex_lock(&c->lock);
	if (c->nr < IO_KEEP) {
		io->next_free = c->head;
		c->head = io;
		c->nr++;
		io = NULL;
	}
	td_mutex_unlock(&c->lock);
	free(io);
}

/* ---- completions: the replies ---------------------------------------------------------- */

static void fe_io_end(struct td_byte_io *bio_io, int err)
{
	struct fe_io *io = td_container_of(bio_io, struct fe_io, io);
	struct td_frontend *fe = io->fe;

	if (err)
		fuse_reply_err(io->req, -err);
	else if (io->kind == FE_READ)
		fuse_reply_buf(io->req, io->io.data, io->io.len);
	else if (io->kind == FE_WRITE)
		fuse_reply_write(io->req, io->io.len);
	else
		fuse_reply_err(io->req, 0);
	io_put(fe, io);
}

/* Start @io; on a synchronous failure reply with the error. */
static void fe_submit(struct td_frontend *fe, struct fe_io *io)
{
	io->io.end = fe_io_end;
	io->io.pid = (int32_t)fuse_req_ctx(io->req)->pid;
	int err = td_byte_io_submit(fe->q, &io->io);

	if (err) {
		fuse_reply_err(io->req, -err);
		io_put(fe, io);
	}
}

void td_frontend_io_free_all(struct td_frontend *fe)
{
	for (unsigned int i = 0; i < TD_PCPU_SHARDS; i++) {
		struct fe_io_cache *c = &fe->ios[i];

		while (c->head) {
			struct fe_io *io = c->head;

			c->head = io->next_free;
			free(io);
		}
		c->nr = 0;
	}
}

/* ---- the handlers ---------------------------------------------------------------------- */

void td_frontend_io_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);
	struct fe_io *io;

	(void)fi;
	if (ino != DISK_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* Past the end reads nothing; across it reads up to the end. */
	if ((uint64_t)off >= fe->size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	size = (size_t)TD_MIN((uint64_t)size, fe->size - (uint64_t)off);
	io = io_get(fe);
	void *space = io ? td_fuse_reply_space(size) : NULL;

	if (!io || (!space && !(io->buf = td_bufpool_get(fe->pool, size)))) {
		if (io)
			io_put(fe, io);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	io->req = req;
	io->kind = FE_READ;
	io->io.op = TD_OP_READ;
	io->io.data = space ? space : io->buf->mem;
	io->io.len = size;
	io->io.off = (uint64_t)off;
	fe_submit(fe, io);
}

void td_frontend_io_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
			  off_t off, struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);
	struct fe_io *io;

	if (ino != DISK_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (fe->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (size == 0) {
		fuse_reply_write(req, 0);
		return;
	}
	/* Like a block device: no room at the end, and a write across it is cut short. */
	if ((uint64_t)off >= fe->size) {
		fuse_reply_err(req, ENOSPC);
		return;
	}
	size = (size_t)TD_MIN((uint64_t)size, fe->size - (uint64_t)off);
	io = io_get(fe);
	if (!io) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* Zero copy: data in a ring entry, or a large write keeping its receive buffer. */
	if (td_fuse_recv_data_pinned(buf, size)) {
		io->io.data = (void *)buf;
	} else if (size >= STEAL_MIN && (io->buf = td_fuse_steal_recv_buf(buf, size))) {
		io->io.data = (void *)buf;
	} else {
		io->buf = td_bufpool_get(fe->pool, size);
		if (!io->buf) {
			io_put(fe, io);
			fuse_reply_err(req, ENOMEM);
			return;
		}
		memcpy(io->buf->mem, buf, size);
		io->io.data = io->buf->mem;
	}
	io->req = req;
	io->kind = FE_WRITE;
	io->io.op = TD_OP_WRITE;
	io->io.len = size;
	io->io.off = (uint64_t)off;
	/* O_SYNC / O_DSYNC writers ask for write-through: FUA. */
	if (fi && (fi->flags & O_DSYNC))
		io->io.flags |= TD_BIO_FUA;
	fe_submit(fe, io);
}

void td_frontend_io_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
			  struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);
	struct fe_io *io;

	(void)datasync, (void)fi;
	if (ino != DISK_INO) {
		fuse_reply_err(req, 0);
		return;
	}
	io = io_get(fe);
	if (!io) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	io->req = req;
	io->kind = FE_FSYNC;
	io->io.op = TD_OP_FLUSH;
	fe_submit(fe, io);
}

void td_frontend_io_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
			      off_t length, struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);
	enum td_op op;
	struct fe_io *io;

	(void)fi;
	if (ino != DISK_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (offset < 0 || length <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (fe->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	uint64_t off = (uint64_t)offset;
	uint64_t len = (uint64_t)length;

	if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
		op = TD_OP_DISCARD;
	} else if ((mode & ~FALLOC_FL_KEEP_SIZE) == FALLOC_FL_ZERO_RANGE) {
		op = TD_OP_WRITE_ZEROES;
	} else if (mode == 0 || mode == FALLOC_FL_KEEP_SIZE) {
		/* Every byte of a disk is already allocated; growing it is not possible. */
		fuse_reply_err(req, off + len > fe->size && mode == 0 ? ENOSPC : 0);
		return;
	} else {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (off >= fe->size) {
		fuse_reply_err(req, (mode & FALLOC_FL_KEEP_SIZE) ? 0 : ENOSPC);
		return;
	}
	if (len > fe->size - off) {
		if (!(mode & FALLOC_FL_KEEP_SIZE)) {
			fuse_reply_err(req, ENOSPC);
			return;
		}
		len = fe->size - off;
	}
	io = io_get(fe);
	if (!io) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	io->req = req;
	io->kind = FE_FALLOCATE;
	io->io.op = op;
	io->io.off = off;
	io->io.len = len;
	fe_submit(fe, io);
}
