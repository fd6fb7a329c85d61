// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * elv_noop.c - the noop elevator: first in, first out.
 *
 * Requests leave in the order they arrived. Merging still happens, through
 * the core's back-merge hash (a bio that continues a queued request joins
 * it); there is no sorted order, so no front merges and no request merging.
 * For devices where order does not matter, or to see what a workload looks
 * like unsorted.
 */
#include <errno.h>
#include <stdlib.h>
#include "tagdisk/elevator.h"

struct noop_data {
	struct td_list queue; /* QUEUED requests through ->fifo, arrival order */
};

static int noop_init(const struct td_elv_queue *eq, void **data)
{
	struct noop_data *nd = malloc(sizeof(*nd));

	(void)eq;
	if (!nd)
		return -ENOMEM;
	td_list_init(&nd->queue);
	*data = nd;
	return 0;
}

static void noop_exit(void *data)
{
	free(data);
}

static void noop_add_request(void *data, struct td_request *rq, uint64_t now)
{
	struct noop_data *nd = data;

	(void)now;
	td_list_add_tail(&rq->fifo, &nd->queue);
}

static struct td_request *noop_dispatch(void *data, bool force)
{
	struct noop_data *nd = data;

	(void)force;
	if (td_list_empty(&nd->queue))
		return NULL;
	struct td_request *rq = td_list_first_entry(&nd->queue, struct td_request, fifo);

	td_list_del(&rq->fifo);
	return rq;
}

static bool noop_has_work(void *data)
{
	struct noop_data *nd = data;

	return !td_list_empty(&nd->queue);
}

const struct td_elevator_type td_elv_noop = {
	.name = "noop",
	.init = noop_init,
	.exit = noop_exit,
	.add_request = noop_add_request,
	.dispatch = noop_dispatch,
	.has_work = noop_has_work,
};

/* none: an mq hardware context's FIFO, the noop policy under blk-mq's name. */
const struct td_elevator_type td_elv_none = {
	.name = "none",
	.mq = true,
	.init = noop_init,
	.exit = noop_exit,
	.add_request = noop_add_request,
	.dispatch = noop_dispatch,
	.has_work = noop_has_work,
};
