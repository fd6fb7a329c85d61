// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive_exec.c - executing one decoded command on the backend: the data
 * buffer list built from the bio chain, the range and length checks, the
 * call itself (through the volatile write cache when there is one;
 * writethrough makes every write FUA), and the parking of the executor
 * around it, which lets td_drive_abandon() leave a hung call behind (see
 * drive_int.h). Also synchronous execution, for bio mode.
 */
#include <errno.h>
#include <stdatomic.h>
#include <sys/uio.h>
#include "common/clock.h"
#include "drive_int.h"
#include "tagdisk/cdb.h"
#include "tagdisk/drive.h"
#include "tagdisk/inject.h"
#include "tagdisk/wcache.h"

/* ---- executing one command on the backend --------------------------------------------- */

/*
 * Park before a backend call. seq_cst, like the bump of quiesce_seq in
 * td_drive_quiesce() and td_drive_abandon() followed by their read of d->cmds:
 * either they see us parked, or we see the sequence moved and do not call.
 * Return: false when the commands were taken back (no call may be made).
 */
static bool park(struct td_drive *d, struct td_drive_park *p)
{
	atomic_fetch_add(&d->cmds, p->nr * TD_DRIVE_PARKED);
	if (atomic_load(&d->quiesce_seq) == p->seq)
		return true;
	atomic_fetch_sub(&d->cmds, p->nr * TD_DRIVE_PARKED);
	p->abandoned = true;
	return false;
}

/* Unpark after a backend call; the same pairing as park(). */
static void unpark(struct td_drive *d, struct td_drive_park *p)
{
	atomic_fetch_sub(&d->cmds, p->nr * TD_DRIVE_PARKED);
	p->abandoned = atomic_load(&d->quiesce_seq) != p->seq;
}

static int backend_call(struct td_drive *d, const struct td_cdb_cmd *c, const struct iovec *iov,
			int iovcnt, uint64_t off, uint64_t len)
{
	switch (c->op) {
	case TD_OP_READ:
		if (d->wc)
			return td_wcache_read(d->wc, iov, iovcnt, off);
		return d->be.ops->read(d->be.priv, iov, iovcnt, off);
	case TD_OP_WRITE:
		if (d->wc)
			return td_wcache_write(d->wc, iov, iovcnt, off, c->fua);
		return d->be.ops->write(d->be.priv, iov, iovcnt, off,
					c->fua || d->write_cache == TD_WC_WRITETHROUGH);
	case TD_OP_FLUSH:
		return d->wc ? td_wcache_flush(d->wc) : d->be.ops->flush(d->be.priv);
	case TD_OP_DISCARD:
		return d->wc ? td_wcache_discard(d->wc, off, len)
			     : d->be.ops->discard(d->be.priv, off, len);
	case TD_OP_WRITE_ZEROES:
		return d->wc ? td_wcache_write_zeroes(d->wc, off, len)
			     : d->be.ops->write_zeroes(d->be.priv, off, len);
	}
	return -EIO;
}

int td_drive_exec(struct td_drive *d, const struct td_cdb_cmd *c, struct td_bio *bios,
		  struct td_drive_park *park_at)
{
	uint64_t off = c->lba * d->lbs;
	uint64_t len = (uint64_t)c->nr_blocks * d->lbs;
	struct iovec iov[TD_RQ_MAX_BIOS];
	int iovcnt = 0;
	uint64_t data = 0;
	int err;

	if (c->op != TD_OP_FLUSH &&
	    (c->lba > d->capacity_bytes / d->lbs || len > d->capacity_bytes - off))
		return -EIO; /* LBA out of range */
	if (td_op_has_data(c->op)) {
		for (struct td_bio *bio = bios; bio; bio = bio->next) {
			if (iovcnt == TD_RQ_MAX_BIOS)
				return -EIO;
			iov[iovcnt].iov_base = bio->data;
			iov[iovcnt].iov_len = (size_t)bio->nr_sectors << TD_SECTOR_SHIFT;
			data += iov[iovcnt].iov_len;
			iovcnt++;
		}
		if (data != len)
			return -EIO; /* the data-out buffer does not match the command */
	}
	if (park_at && !park(d, park_at))
		return -EIO;
	err = backend_call(d, c, iov, iovcnt, off, len);
	if (park_at)
		unpark(d, park_at);
	return err;
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
	atomic_fetch_add_explicit(&d->commands, 1, memory_order_relaxed);
	if (v.error)
		return v.error;
	return td_drive_exec(d, &c, bio, NULL);
}
