// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * prep.c - the default prep function: check, encode the command, take a tag.
 *
 * The checks come first and the tag last, so a request that is killed or
 * deferred never holds a tag.
 */
#include <errno.h>
#include "tagdisk/cdb.h"
#include "tagdisk/prep.h"
#include "tagdisk/queue.h"

enum td_prep_result td_prep_default(struct td_queue *q, struct td_request *rq)
{
	uint32_t per_block = td_queue_logical_block_size(q) >> TD_SECTOR_SHIFT;
	struct td_cdb_cmd cmd = {
		.op = rq->op,
		.fua = rq->op == TD_OP_WRITE && (rq->flags & TD_RQ_FUA),
	};

	if (rq->op != TD_OP_FLUSH) {
		/* Past the end of the disk, or not whole logical blocks: nothing a drive could do. */
		if (rq->sector % per_block || rq->nr_sectors % per_block || rq->nr_sectors == 0 ||
		    td_rq_end_sector(rq) > td_queue_physical_capacity(q)) {
			rq->error = -EIO;
			return TD_PREP_KILL;
		}
		cmd.lba = rq->sector / per_block;
		cmd.nr_blocks = rq->nr_sectors / per_block;
	}
	int len = td_cdb_encode(rq->cmd, &cmd);

	if (len < 0) {
		rq->error = -EIO;
		return TD_PREP_KILL;
	}
	rq->cmd_len = (uint8_t)len;
	if (td_queue_start_tag(q, rq))
		return TD_PREP_DEFER;
	return TD_PREP_OK;
}
