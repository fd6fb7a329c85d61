// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bio.c - byte-granular I/O on top of the sector-based queue.
 *
 * td_byte_io_submit() turns a byte range into bios:
 *
 *   aligned, fits one request   one bio embedded in the td_byte_io: no allocation;
 *   aligned, larger             split at max_sectors (discards at 2^31 sectors),
 *                               children counted in a td_byte_slow;
 *   unaligned read              read the covering aligned extent into a bounce
 *                               buffer, copy the asked-for bytes out;
 *   unaligned write             read-modify-write: take the extent exclusively in
 *                               the range lock, read the partial first and last
 *                               blocks (this thread waits), patch the caller's
 *                               bytes in, write the whole extent;
 *   unaligned discard / write   the whole blocks inside go down as they are; the
 *   zeroes                      partial blocks at the edges are zeroed by
 *                               read-modify-write, under the same exclusive lock.
 *
 * Every write-like I/O holds its aligned extent in the queue's range lock
 * until it completes: shared for plain writes, exclusive for RMW. So a
 * read-modify-write never writes back stale bytes over a write that
 * completed between its read and its write.
 *
 * Completion counting: a td_byte_slow starts with one reference for the
 * submitter plus one per child bio, so the I/O cannot finish while children
 * are still being submitted.
 */
#include <assert.h>
#include <errno.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "tagdisk/bio.h"
#include "tagdisk/queue.h"
#include "tagdisk/rangelock.h"

/* Largest discard or write-zeroes bio, in sectors: comfortably within a WRITE SAME(16). */
#define TD_MAX_DISCARD_SECTORS (1U << 31)

struct td_byte_slow {
	struct td_byte_io *io;
	struct td_queue *q;
	_Atomic int refs;
	_Atomic int error;   /* the first error, 0 while none */
	uint8_t *bounce;     /* unaligned: the aligned extent's bytes */
	uint64_t extent_off; /* bytes: the aligned extent */
	uint64_t extent_len;
	unsigned int nr_bios;
	unsigned int max_bios;
	struct td_bio bios[]; /* children */
};

static void unlock_range(struct td_queue *q, struct td_byte_io *io)
{
	if (io->range.granted)
		td_range_unlock(td_queue_rangelock(q), &io->range);
}

/* ---- the aligned fast path ------------------------------------------------------------ */

static void fast_end(struct td_bio *bio, int err)
{
	struct td_byte_io *io = bio->private;

	unlock_range(io->q, io);
	io->end(io, err);
}

/* ---- child bios ----------------------------------------------------------------------- */

static void slow_finish(struct td_byte_slow *s)
{
	struct td_byte_io *io = s->io;
	int err = atomic_load(&s->error);

	if (!err && io->op == TD_OP_READ && s->bounce)
		memcpy(io->data, s->bounce + (io->off - s->extent_off), io->len);
	unlock_range(io->q, io);
	free(s->bounce);
	io->slow = NULL;
	free(s);
	io->end(io, err);
}

static void slow_put(struct td_byte_slow *s)
{
	if (atomic_fetch_sub(&s->refs, 1) == 1)
		slow_finish(s);
}

static void slow_bio_end(struct td_bio *bio, int err)
{
	struct td_byte_slow *s = bio->private;
	int none = 0;

	if (err)
		atomic_compare_exchange_strong(&s->error, &none, err);
	slow_put(s);
}

/* Queue children covering [@sector, +@nr_sectors) of @op with @data (may be NULL). */
static void add_children(struct td_byte_slow *s, enum td_op op, uint64_t sector,
			 uint64_t nr_sectors, uint8_t *data, uint32_t max_chunk)
{
	while (nr_sectors) {
		uint32_t chunk = (uint32_t)TD_MIN(nr_sectors, (uint64_t)max_chunk);
		struct td_bio *bio;

		assert(s->nr_bios < s->max_bios);
		bio = &s->bios[s->nr_bios++];
		td_bio_init(bio, op, sector, chunk, data, slow_bio_end, s);
		bio->flags = s->io->flags;
		bio->pid = s->io->pid;
		sector += chunk;
		nr_sectors -= chunk;
		if (data)
			data += (size_t)chunk << TD_SECTOR_SHIFT;
	}
}

static void submit_children(struct td_byte_slow *s)
{
	unsigned int n = s->nr_bios;

	atomic_fetch_add(&s->refs, (int)n);
	for (unsigned int i = 0; i < n; i++)
		td_queue_submit(s->q, &s->bios[i]);
	slow_put(s); /* the submitter's reference */
}

static uint32_t chunk_limit(struct td_queue *q, enum td_op op)
{
	uint32_t per_block = td_queue_logical_block_size(q) >> TD_SECTOR_SHIFT;

	if (td_op_has_data(op))
		return td_queue_max_sectors(q);
	return TD_MAX_DISCARD_SECTORS - TD_MAX_DISCARD_SECTORS % per_block;
}

static struct td_byte_slow *slow_alloc(struct td_queue *q, struct td_byte_io *io,
				       unsigned int max_bios)
{
	struct td_byte_slow *s = calloc(1, sizeof(*s) + max_bios * sizeof(struct td_bio));

	if (!s)
		return NULL;
	s->io = io;
	s->q = q;
	s->max_bios = max_bios;
	atomic_init(&s->refs, 1);
	atomic_init(&s->error, 0);
	io->slow = s;
	return s;
}

/* ---- synchronous reads for read-modify-write ------------------------------------------ */

struct sync_wait {
	sem_t done;
	int err;
};

static void sync_end(struct td_bio *bio, int err)
{
	struct sync_wait *w = bio->private;

	w->err = err;
	sem_post(&w->done);
}

/* Read one logical block at byte @off into @buf, waiting for it. */
static int read_block_sync(struct td_queue *q, uint64_t off, void *buf, int32_t pid)
{
	uint32_t lbs = td_queue_logical_block_size(q);
	struct sync_wait w = { .err = 0 };
	struct td_bio bio;

	sem_init(&w.done, 0, 0);
	td_bio_init(&bio, TD_OP_READ, off >> TD_SECTOR_SHIFT, lbs >> TD_SECTOR_SHIFT, buf, sync_end,
		    &w);
	bio.pid = pid;
	td_queue_submit(q, &bio);
	while (sem_wait(&w.done) && errno == EINTR)
		;
	sem_destroy(&w.done);
	return w.err;
}

/* ---- the paths ------------------------------------------------------------------------ */

static int submit_split(struct td_queue *q, struct td_byte_io *io)
{
	uint32_t limit = chunk_limit(q, io->op);
	uint64_t nr_sectors = io->len >> TD_SECTOR_SHIFT;
	struct td_byte_slow *s = slow_alloc(q, io, (unsigned int)TD_DIV_ROUND_UP(nr_sectors, limit));

	if (!s)
		return -ENOMEM;
	add_children(s, io->op, io->off >> TD_SECTOR_SHIFT, nr_sectors,
		     td_op_has_data(io->op) ? io->data : NULL, limit);
	submit_children(s);
	return 0;
}

static int submit_unaligned_read(struct td_queue *q, struct td_byte_io *io, uint64_t a_off,
				 uint64_t a_len)
{
	uint32_t limit = chunk_limit(q, TD_OP_READ);
	struct td_byte_slow *s =
		slow_alloc(q, io, (unsigned int)TD_DIV_ROUND_UP(a_len >> TD_SECTOR_SHIFT, limit));

	if (!s)
		return -ENOMEM;
	s->bounce = malloc(a_len);
	if (!s->bounce) {
		io->slow = NULL;
		free(s);
		return -ENOMEM;
	}
	s->extent_off = a_off;
	s->extent_len = a_len;
	add_children(s, TD_OP_READ, a_off >> TD_SECTOR_SHIFT, a_len >> TD_SECTOR_SHIFT, s->bounce,
		     limit);
	submit_children(s);
	return 0;
}

/*
 * Unaligned write, discard or write zeroes: the caller holds the aligned
 * extent [@a_off, +@a_len) exclusively. A write reads the partial first and
 * last blocks, patches the caller's bytes in and writes the whole extent. A
 * discard or write zeroes zeroes the partial edge blocks the same way and
 * passes the whole blocks inside on as they are.
 */
static int submit_rmw(struct td_queue *q, struct td_byte_io *io, uint64_t a_off, uint64_t a_len)
{
	uint32_t lbs = td_queue_logical_block_size(q);
	uint64_t end = io->off + io->len;
	uint64_t last_blk = a_off + a_len - lbs;
	bool head = io->off % lbs || (a_len == lbs && end % lbs); /* first block partial */
	bool tail = end % lbs && a_len > lbs;			   /* last block partial too */
	uint32_t limit = chunk_limit(q, TD_OP_WRITE);
	unsigned int max_bios = (unsigned int)TD_DIV_ROUND_UP(a_len >> TD_SECTOR_SHIFT, limit) + 2;
	struct td_byte_slow *s;
	int err;

	if (io->op != TD_OP_WRITE)
		max_bios += (unsigned int)TD_DIV_ROUND_UP(a_len >> TD_SECTOR_SHIFT,
							  chunk_limit(q, io->op));
	s = slow_alloc(q, io, max_bios);
	if (!s)
		return -ENOMEM;
	s->extent_off = a_off;
	s->extent_len = a_len;
	s->bounce = malloc(io->op == TD_OP_WRITE ? a_len : 2 * (size_t)lbs);
	err = -ENOMEM;
	if (!s->bounce)
		goto out_free;

	/* The edge blocks as they are now: nobody can change them while we hold the extent. */
	uint8_t *head_buf = s->bounce;
	uint8_t *tail_buf = io->op == TD_OP_WRITE ? s->bounce + a_len - lbs : s->bounce + lbs;

	if (head) {
		err = read_block_sync(q, a_off, head_buf, io->pid);
		if (err)
			goto out_free;
	}
	if (tail) {
		err = read_block_sync(q, last_blk, tail_buf, io->pid);
		if (err)
			goto out_free;
	}

	if (io->op == TD_OP_WRITE) {
		memcpy(s->bounce + (io->off - a_off), io->data, io->len);
		add_children(s, TD_OP_WRITE, a_off >> TD_SECTOR_SHIFT, a_len >> TD_SECTOR_SHIFT,
			     s->bounce, limit);
	} else {
		uint64_t in_start = head ? a_off + lbs : a_off;
		uint64_t in_end = tail ? last_blk : a_off + a_len;

		if (head) {
			memset(head_buf + (io->off - a_off), 0,
			       TD_MIN(end - a_off, (uint64_t)lbs) - (io->off - a_off));
			add_children(s, TD_OP_WRITE, a_off >> TD_SECTOR_SHIFT,
				     lbs >> TD_SECTOR_SHIFT, head_buf, limit);
		}
		if (tail) {
			memset(tail_buf, 0, end - last_blk);
			add_children(s, TD_OP_WRITE, last_blk >> TD_SECTOR_SHIFT,
				     lbs >> TD_SECTOR_SHIFT, tail_buf, limit);
		}
		if (in_end > in_start)
			add_children(s, io->op, in_start >> TD_SECTOR_SHIFT,
				     (in_end - in_start) >> TD_SECTOR_SHIFT, NULL,
				     chunk_limit(q, io->op));
		for (unsigned int i = 0; i < s->nr_bios; i++)
			s->bios[i].flags = 0;
	}
	submit_children(s);
	return 0;

out_free:
	free(s->bounce);
	io->slow = NULL;
	free(s);
	return err;
}

int td_byte_io_submit(struct td_queue *q, struct td_byte_io *io)
{
	uint32_t lbs = td_queue_logical_block_size(q);
	uint64_t capacity = td_queue_capacity(q) << TD_SECTOR_SHIFT;
	bool writes = td_op_is_write(io->op);
	int err;

	io->slow = NULL;
	io->q = q;
	io->range.granted = false;
	if (io->op == TD_OP_FLUSH) {
		if (io->len)
			return -EINVAL;
		td_bio_init(&io->bio, TD_OP_FLUSH, 0, 0, NULL, fast_end, io);
		io->bio.pid = io->pid;
		td_queue_submit(q, &io->bio);
		return 0;
	}
	if (!io->len || io->off > capacity || io->len > capacity - io->off ||
	    (td_op_has_data(io->op) && !io->data) || (uint64_t)io->op >= TD_OP_COUNT)
		return -EINVAL;

	uint64_t a_off = io->off / lbs * lbs;
	uint64_t a_len = TD_DIV_ROUND_UP(io->off + io->len, lbs) * lbs - a_off;
	bool aligned = a_off == io->off && a_len == io->len;

	if (writes)
		td_range_lock(td_queue_rangelock(q), &io->range, a_off, a_off + a_len, !aligned);

	if (!aligned) {
		err = io->op == TD_OP_READ ? submit_unaligned_read(q, io, a_off, a_len)
					   : submit_rmw(q, io, a_off, a_len);
		goto out;
	}
	if ((io->len >> TD_SECTOR_SHIFT) > chunk_limit(q, io->op)) {
		err = submit_split(q, io);
		goto out;
	}
	td_bio_init(&io->bio, io->op, io->off >> TD_SECTOR_SHIFT,
		    (uint32_t)(io->len >> TD_SECTOR_SHIFT), td_op_has_data(io->op) ? io->data : NULL,
		    fast_end, io);
	io->bio.flags = io->flags;
	io->bio.pid = io->pid;
	td_queue_submit(q, &io->bio); /* fast_end releases the range */
	return 0;

out:
	if (err)
		unlock_range(q, io);
	return err;
}
