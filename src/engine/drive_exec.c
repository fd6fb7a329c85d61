// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive_exec.c - executing one decoded command on the backend: the data
 * buffer list built from the bio chain, the range and length checks, the
 * call itself (through the volatile write cache when there is one;
 * writethrough makes every write FUA), with the executor parked around it
 * so that a quiesce can leave a hung call behind (drive_quiesce.c); the
 * asynchronous backends' operations; and synchronous execution, for bio mode.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/uio.h>
#include "common/clock.h"
#include "drive_int.h"
#include "tagdisk/cdb.h"
#include "tagdisk/drive.h"
#include "tagdisk/inject.h"
#include "tagdisk/wcache.h"

/* ---- executing one command on the backend --------------------------------------------- */

static int backend_call(struct td_drive *d, const struct td_cdb_cmd *c, const struct iovec *iov,
			int iovcnt, uint64_t off, uint64_t len)
{
	switch (c->op) {
	case TD_OP_READ:
		if (d->wc)
			return td_wcache_read(d->wc, iov, iovcnt, off);
		return td_backend_read(&d->be, iov, iovcnt, off);
	case TD_OP_WRITE:
		if (d->wc)
			return td_wcache_write(d->wc, iov, iovcnt, off, c->fua);
		return td_backend_write(&d->be, iov, iovcnt, off,
					c->fua || d->write_cache == TD_WC_WRITETHROUGH);
	case TD_OP_FLUSH:
		return d->wc ? td_wcache_flush(d->wc) : td_backend_flush(&d->be);
	case TD_OP_DISCARD:
		return d->wc ? td_wcache_discard(d->wc, off, len) : td_backend_discard(&d->be, off, len);
	case TD_OP_WRITE_ZEROES:
		return d->wc ? td_wcache_write_zeroes(d->wc, off, len)
			     : td_backend_write_zeroes(&d->be, off, len);
	}
	return -EIO;
}

/*
 * Check @c against the drive and build the data buffer list from @bios into
 * @iov (TD_RQ_MAX_BIOS entries). Return: 0, or -EIO for a command the drive
 * rejects (out of range, or data that does not match its length).
 */
static int cmd_iov(const struct td_drive *d, const struct td_cdb_cmd *c, struct td_bio *bios,
		   struct iovec *iov, int *iovcnt)
{
	uint64_t off = c->lba * d->lbs;
	uint64_t len = (uint64_t)c->nr_blocks * d->lbs;
	uint64_t data = 0;

	*iovcnt = 0;
	if (c->op != TD_OP_FLUSH &&
	    (c->lba > d->capacity_bytes / d->lbs || len > d->capacity_bytes - off))
		return -EIO; /* LBA out of range */
	if (!td_op_has_data(c->op))
		return 0;
	for (struct td_bio *bio = bios; bio; bio = bio->next) {
		if (*iovcnt == TD_RQ_MAX_BIOS)
			return -EIO;
		iov[*iovcnt].iov_base = bio->data;
		iov[*iovcnt].iov_len = (size_t)bio->nr_sectors << TD_SECTOR_SHIFT;
		data += iov[*iovcnt].iov_len;
		(*iovcnt)++;
	}
	return data == len ? 0 : -EIO; /* the data-out buffer must match the command */
}

int td_drive_exec(struct td_drive *d, const struct td_cdb_cmd *c, struct td_bio *bios,
		  struct td_drive_park *park_at)
{
	struct iovec iov[TD_RQ_MAX_BIOS];
	/*
	 * A copy: once parked, a reset may hand the request back to the queue,
	 * which dispatches it again (and the drive decodes it again) while this
	 * call goes on.
	 */
	const struct td_cdb_cmd cmd = *c;
	int iovcnt;
	int err = cmd_iov(d, &cmd, bios, iov, &iovcnt);

	if (err)
		return err;
	/*
	 * Without a slot (a call into memory cannot hang, or bio mode, which
	 * nothing takes back) the executor stays unparked, as between calls.
	 */
	if (park_at && !park_at->slot)
		park_at = NULL;
	if (park_at && !td_drive_park(d, park_at, &cmd))
		return -EIO;
	err = backend_call(d, &cmd, iov, iovcnt, cmd.lba * d->lbs,
			   (uint64_t)cmd.nr_blocks * d->lbs);
	if (park_at)
		td_drive_unpark(d, park_at);
	return err;
}

/* ---- asynchronous backends ------------------------------------------------------------ */

/* One command as one backend operation; the bounce buffer follows it. */
struct async_cmd {
	struct td_backend_io io;
	struct td_drive *d;
	struct td_request *rq;
	unsigned int seq;
	int iovcnt;
	struct iovec iov[TD_RQ_MAX_BIOS]; /* the request's buffers, for a read's copy-out */
	char data[];
};

static void iov_copy(struct async_cmd *ac, bool to_bounce)
{
	char *p = ac->data;

	for (int i = 0; i < ac->iovcnt; p += ac->iov[i].iov_len, i++) {
		if (to_bounce)
			memcpy(p, ac->iov[i].iov_base, ac->iov[i].iov_len);
		else
			memcpy(ac->iov[i].iov_base, p, ac->iov[i].iov_len);
	}
}

/*
 * An operation submitted at quiesce sequence @seq for @rq ended with @err:
 * complete @rq (copying a read out of @ac's bounce buffer), or, when a
 * quiesce came since, drop the stale result. The caller frees @ac.
 */
static void async_finish(struct td_drive *d, struct td_request *rq, unsigned int seq, int err,
			 struct async_cmd *ac)
{
	td_mutex_lock(&d->lock);
	if (seq != d->quiesce_seq) {
		/* Stale: its request was requeued by a reset and may be anywhere now. */
		assert(d->ops_stale > 0);
		d->ops_stale--;
		td_drive_fence_update_locked(d); /* the fence may lift */
		td_mutex_unlock(&d->lock);
		return;
	}
	assert(d->ops_current > 0);
	d->ops_current--;
	/* A completion call in progress: a quiesce from now on waits for it. */
	d->executing++;
	atomic_fetch_add_explicit(&d->completing, 1, memory_order_relaxed);
	td_mutex_unlock(&d->lock);

	if (!err && ac && ac->io.op == TD_OP_READ)
		iov_copy(ac, false);
	rq->error = err;
	td_pcpu_add(&d->commands, 1);

	struct td_list done = TD_LIST_INIT(done);

	td_list_add_tail(&rq->drive_list, &done);
	d->complete(d->complete_ctx, &done);

	td_mutex_lock(&d->lock);
	atomic_fetch_sub_explicit(&d->completing, 1, memory_order_relaxed);
	d->executing--;
	td_drive_wake_quiesce_locked(d);
	td_mutex_unlock(&d->lock);
}

static void async_done(struct td_backend_io *io, int err)
{
	struct async_cmd *ac = td_container_of(io, struct async_cmd, io);

	async_finish(ac->d, ac->rq, ac->seq, err, ac);
	free(ac);
}

bool td_drive_exec_async(struct td_drive *d, struct td_request *rq, unsigned int seq)
{
	const struct td_cdb_cmd *c = &rq->drive_cmd;
	uint64_t len = (uint64_t)c->nr_blocks * d->lbs;
	struct iovec iov[TD_RQ_MAX_BIOS];
	struct async_cmd *ac = NULL;
	int iovcnt;
	int err = cmd_iov(d, c, rq->bio, iov, &iovcnt);

	if (!err) {
		uint64_t data_len = td_op_has_data(c->op) ? len : 0;

		ac = malloc(sizeof(*ac) + data_len);
		if (!ac) {
			err = -ENOMEM;
		} else {
			*ac = (struct async_cmd){
				.io = { .op = c->op,
					.fua = c->op == TD_OP_WRITE &&
					       (c->fua || d->write_cache == TD_WC_WRITETHROUGH),
					.off = c->op == TD_OP_FLUSH ? 0 : c->lba * d->lbs,
					.len = c->op == TD_OP_FLUSH ? 0 : len,
					.buf = data_len ? ac->data : NULL,
					.done = async_done },
				.d = d,
				.rq = rq,
				.seq = seq,
				.iovcnt = iovcnt,
			};
			memcpy(ac->iov, iov, (size_t)iovcnt * sizeof(iov[0]));
			if (c->op == TD_OP_WRITE)
				iov_copy(ac, true);
		}
	}

	td_mutex_lock(&d->lock);
	if (d->quiesce_seq != seq) {
		td_mutex_unlock(&d->lock);
		free(ac);
		return false;
	}
	/* Counted before the backend sees it: its completion may come before submit returns. */
	d->ops_current++;
	td_mutex_unlock(&d->lock);
	if (!err) {
		err = d->be.ops->submit(d->be.priv, &ac->io);
		if (!err)
			return true;
	}
	/* Rejected, or refused by the backend: complete it with the error. */
	async_finish(d, rq, seq, err, NULL);
	free(ac);
	return true;
}

int td_drive_execute_sync(struct td_drive *d, const uint8_t *cdb, unsigned int cdb_len,
			  struct td_bio *bio)
{
	struct td_inject_verdict v;
	struct td_cdb_cmd c;

	if (td_cdb_decode(cdb, cdb_len, &c))
		return -EIO;
	td_inject_check(d->inject, c.op, td_drive_cmd_sector(d, &c),
			c.nr_blocks * (d->lbs >> TD_SECTOR_SHIFT), &v);
	uint64_t delay = (uint64_t)v.latency_us * TD_NSEC_PER_USEC;

	if (d->ops->sync_ns)
		delay += d->ops->sync_ns(d, &c);
	if (delay)
		td_sleep_until(td_now_ns() + delay);
	td_pcpu_add(&d->commands, 1);
	if (v.error)
		return v.error;
	return td_drive_exec(d, &c, bio, NULL);
}
