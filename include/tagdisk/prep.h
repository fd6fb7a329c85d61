/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * prep.h - the prep stage: turn a request into a command before dispatch.
 *
 * As in the 2.6 block layer, the queue calls its prep function on the
 * request at the head of its dispatch list, immediately before handing it to
 * the drive. Prep pregenerates the command bytes (cmd[16], cmd_len) and
 * starts the tag; it says whether the request may go (OK), must wait at the
 * head of the queue until a resource frees (DEFER: the queue stops
 * dispatching and retries when a tag ends), or is hopeless (KILL: the queue
 * fails it with rq->error, or -EIO when prep left that 0).
 *
 * Prep runs with the queue lock held, must not block, and is called again
 * for a request that was requeued by a reset (its old tag is gone).
 * A prep function that returns DEFER or KILL must not hold a tag.
 */
#ifndef TAGDISK_PREP_H
#define TAGDISK_PREP_H

#include "common/compiler.h"
#include "tagdisk/request.h"

enum td_prep_result {
	TD_PREP_OK,
	TD_PREP_DEFER,
	TD_PREP_KILL,
};

struct td_queue;

typedef enum td_prep_result (*td_prep_fn)(struct td_queue *q, struct td_request *rq);

/*
 * The default prep: KILL (-EIO) a request that is misaligned to the logical
 * block size or reaches past the end of the disk; encode the CDB (see
 * tagdisk/cdb.h) in logical blocks; then start a tag with
 * td_queue_start_tag(), returning DEFER when none is free.
 */
enum td_prep_result td_prep_default(struct td_queue *q, struct td_request *rq) td_nonnull(1, 2);

#endif /* TAGDISK_PREP_H */
