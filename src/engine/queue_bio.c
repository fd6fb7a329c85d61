// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * queue_bio.c - bios that do not take the request path: bio mode, where the
 * make_request function builds the command and the drive executes it in the
 * submitter's thread (no elevator, no requests, no tags: the ramdisk path of
 * the 2.6 block layer), and stacking make_request functions that see every
 * bio first, such as the window that exposes part of the disk.
 */
#include <errno.h>
#include <stdatomic.h>
#include "queue_int.h"
#include "tagdisk/cdb.h"
#include "tagdisk/drive.h"
#include "tagdisk/queue.h"
#include "tagdisk/stats.h"
#include "tagdisk/wlog.h"

/*
 * The write log's entry of @bio, which ended with @err: a flush's was
 * reserved (@flush) before it was executed, a write's is reserved now,
 * before the bio ends, so that a flush its submitter issues after hearing
 * of it is numbered after it.
 */
static void bio_wlog(struct td_queue *q, struct td_bio *bio, struct td_wlog_slot *flush, int err)
{
	struct td_wlog_batch wb;

	td_wlog_batch_init(&wb);
	if (flush)
		td_wlog_batch_add_flush(&wb, flush, err);
	else if (err || !td_op_is_write(bio->op) ||
		 !td_wlog_reserve_write(q->wlog, &wb, bio->op, bio->flags & TD_BIO_FUA, bio->sector,
					bio->nr_sectors, bio, 1))
		return;
	td_wlog_write_batch(q->wlog, &wb);
}

/* Bio mode: build the command and execute it in this thread. */
void td_queue_bio_make_request(struct td_queue *q, struct td_bio *bio)
{
	uint32_t per_block = q->lbs >> TD_SECTOR_SHIFT;
	struct td_cdb_cmd cmd = {
		.op = bio->op,
		.fua = bio->op == TD_OP_WRITE && (bio->flags & TD_BIO_FUA),
	};
	uint8_t cdb[TD_CMD_MAX];
	uint64_t start = td_queue_now(q);
	struct td_wlog_slot *flush = NULL;
	int err = -EIO;

	td_queue_trace_bio(q, TD_TA_QUEUE, bio, TD_TAG_NONE, 0, start);
	td_stats_io_start(q->stats, start);
	if (atomic_load_explicit(&q->dead, memory_order_relaxed))
		goto out;
	if (bio->op != TD_OP_FLUSH) {
		if (bio->sector % per_block || bio->nr_sectors % per_block || !bio->nr_sectors ||
		    bio->sector + bio->nr_sectors > q->capacity) {
			td_stats_add(q->stats, TD_STAT_KILLED, 1);
			goto out;
		}
		cmd.lba = bio->sector / per_block;
		cmd.nr_blocks = bio->nr_sectors / per_block;
	}
	int len = td_cdb_encode(cdb, &cmd);

	if (len < 0)
		goto out;
	td_queue_trace_bio(q, TD_TA_DISPATCH, bio, TD_TAG_NONE, 0, start);
	bio->next = NULL;
	if (bio->op == TD_OP_FLUSH && q->wlog && td_wlog_on(q->wlog))
		flush = td_wlog_reserve_flush(q->wlog);
	err = td_drive_execute_sync(q->drive, cdb, (unsigned int)len, bio);
	if (q->wlog && (flush || td_wlog_on(q->wlog)))
		bio_wlog(q, bio, flush, err);
out:;
	uint64_t end = td_queue_now(q);

	td_stats_io_done(q->stats, bio->op, bio->nr_sectors, end - start, err, end);
	td_queue_trace_bio(q, TD_TA_COMPLETE, bio, TD_TAG_NONE, err, end);
	td_queue_end_bio(q, bio, err);
}

bool td_queue_stacked_make_request(struct td_queue *q, struct td_bio *bio)
{
	if (q->make_request(q, bio, q->make_request_data) == 0) {
		/* The function ended the bio itself: balance the drain count. */
		td_queue_bio_done(q);
		return true;
	}
	return false;
}

static int window_make_request(struct td_queue *q, struct td_bio *bio, void *data)
{
	(void)data;
	if (bio->op != TD_OP_FLUSH) {
		if (bio->sector >= q->window_nr || bio->nr_sectors > q->window_nr - bio->sector) {
			bio->error = -EIO;
			bio->end_io(bio, -EIO);
			return 0;
		}
		bio->sector += q->window_start;
	}
	return 1;
}

int td_queue_set_window(struct td_queue *q, uint64_t start, uint64_t nr_sectors)
{
	uint32_t per_block = q->lbs >> TD_SECTOR_SHIFT;

	if (!nr_sectors || start % per_block || nr_sectors % per_block || start >= q->capacity ||
	    nr_sectors > q->capacity - start)
		return -EINVAL;
	q->window_start = start;
	q->window_nr = nr_sectors;
	td_queue_set_make_request(q, window_make_request, NULL);
	return 0;
}

void td_queue_set_make_request(struct td_queue *q, td_make_request_fn fn, void *data)
{
	q->make_request = fn;
	q->make_request_data = data;
}
