// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * elv_deadline.c - the deadline I/O scheduler.
 *
 * Per direction (reads; writes, which include discards and write zeroes) the
 * scheduler keeps the queued requests twice: in a tree sorted by start
 * sector, and in a FIFO in arrival order where each request carries a
 * deadline (now + read_expire_ms or write_expire_ms).
 *
 * Dispatch works in batches. A batch serves requests of one direction in
 * ascending sector order (next_rq[dir] is where the sweep continues), up to
 * fifo_batch requests. When a batch ends, or the sweep runs out, the next
 * direction is chosen: reads are preferred, but after writes_starved read
 * batches that passed over waiting writes, writes get a batch. A batch
 * starts at the oldest request of its direction (the FIFO head) when that
 * one's deadline has passed or the sweep has nothing further; otherwise it
 * continues the sweep. These are the semantics of the Linux deadline
 * scheduler; the tunables' defaults and units are in tagdisk/elevator.h.
 *
 * Merges: the core finds back and front merges through its hashes (this
 * elevator asks for front merges), and this elevator offers its sorted
 * neighbours for request merging. When two requests merge,
 * the survivor keeps the earlier deadline and that one's place in the FIFO.
 *
 * LOCKING: called with the queue lock held (see tagdisk/elevator.h).
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include "tagdisk/elevator.h"

enum { DD_READ = 0, DD_WRITE = 1 };

struct deadline_data {
	struct td_rb_root sort_list[2]; /* by sector, through ->rb_node */
	struct td_list fifo_list[2];	/* arrival order, through ->fifo */
	struct td_request *next_rq[2];	/* where the sorted sweep continues */
	uint32_t batching;		/* requests in the current batch */
	uint32_t starved;		/* read batches while writes waited */
	const struct td_elv_queue *eq;
};

static int rq_dir(const struct td_request *rq)
{
	return td_op_is_write(rq->op) ? DD_WRITE : DD_READ;
}

static struct td_request *rb_to_rq(struct td_rb_node *node)
{
	return node ? td_rb_entry(node, struct td_request, rb_node) : NULL;
}

_Static_assert(offsetof(struct td_rb_node, right) ==
		   offsetof(struct td_rb_node, left) + sizeof(struct td_rb_node *),
	       "sort_add() finds the right child one pointer past the left");

static void sort_add(struct deadline_data *dd, struct td_request *rq)
{
	struct td_rb_root *root = &dd->sort_list[rq_dir(rq)];
	struct td_rb_node **link = &root->node;
	struct td_rb_node *parent = NULL;

	while (*link) {
		size_t right;

		parent = *link;
		/*
		 * Equal sectors go right: they keep their arrival order. The
		 * sectors are random to a branch predictor, so the child is picked
		 * by arithmetic instead of a branch it would miss half the time.
		 */
		right = rq->sector >= rb_to_rq(parent)->sector;
		link = (struct td_rb_node **)((char *)parent + offsetof(struct td_rb_node, left) +
					      right * sizeof(struct td_rb_node *));
	}
	td_rb_insert(root, &rq->rb_node, parent, link);
}

static void sort_del(struct deadline_data *dd, struct td_request *rq)
{
	td_rb_erase(&dd->sort_list[rq_dir(rq)], &rq->rb_node);
}

static struct td_request *deadline_latter_request(void *data, struct td_request *rq)
{
	(void)data;
	return rb_to_rq(td_rb_next(&rq->rb_node));
}

static struct td_request *deadline_former_request(void *data, struct td_request *rq)
{
	(void)data;
	return rb_to_rq(td_rb_prev(&rq->rb_node));
}

/* Take @rq out of both lists, moving the sweep past it if it was next. */
static void deadline_remove_request(struct deadline_data *dd, struct td_request *rq)
{
	int dir = rq_dir(rq);

	if (dd->next_rq[dir] == rq)
		dd->next_rq[dir] = deadline_latter_request(dd, rq);
	td_list_del(&rq->fifo);
	sort_del(dd, rq);
}

static int deadline_init(const struct td_elv_queue *eq, void **data)
{
	struct deadline_data *dd = calloc(1, sizeof(*dd));

	if (!dd)
		return -ENOMEM;
	for (int dir = 0; dir < 2; dir++) {
		dd->sort_list[dir].node = NULL;
		td_list_init(&dd->fifo_list[dir]);
	}
	dd->eq = eq;
	*data = dd;
	return 0;
}

static void deadline_exit(void *data)
{
	struct deadline_data *dd = data;

	assert(td_list_empty(&dd->fifo_list[DD_READ]) && td_list_empty(&dd->fifo_list[DD_WRITE]));
	free(dd);
}

static void deadline_add_request(void *data, struct td_request *rq, uint64_t now)
{
	struct deadline_data *dd = data;
	const struct td_elv_tunables *t = dd->eq->tunables;
	int dir = rq_dir(rq);
	uint64_t expire_ms = dir == DD_READ ? t->read_expire_ms : t->write_expire_ms;

	sort_add(dd, rq);
	/*
	 * The deadline counts from the queue's own reading at insertion, so
	 * adding a request reads no clock; the dispatch compares it with the
	 * coarse clock, which is at most a tick behind.
	 */
	rq->fifo_time_ns = now + expire_ms * TD_NSEC_PER_MSEC;
	td_list_add_tail(&rq->fifo, &dd->fifo_list[dir]);
}

static void deadline_merged(void *data, struct td_request *rq, enum td_elv_merge type)
{
	struct deadline_data *dd = data;

	/* A front merge moved the request's start: re-sort it. */
	if (type == TD_ELV_FRONT_MERGE) {
		sort_del(dd, rq);
		sort_add(dd, rq);
	}
}

static void deadline_merged_requests(void *data, struct td_request *rq, struct td_request *next)
{
	struct deadline_data *dd = data;

	/* The survivor inherits the earlier deadline and its place in the FIFO. */
	if (next->fifo_time_ns < rq->fifo_time_ns) {
		td_list_del(&rq->fifo);
		td_list_add(&rq->fifo, &next->fifo);
		rq->fifo_time_ns = next->fifo_time_ns;
	}
	deadline_remove_request(dd, next);
}

/* Return: true when the oldest request of @dir has passed its deadline. */
static bool deadline_check_fifo(struct deadline_data *dd, int dir)
{
	if (td_list_empty(&dd->fifo_list[dir]))
		return false;
	struct td_request *rq = td_list_first_entry(&dd->fifo_list[dir], struct td_request, fifo);

	return td_clock_now_coarse(dd->eq->clock) >= rq->fifo_time_ns;
}

/* Hand @rq out: the sweep in its direction continues after it, the other one restarts. */
static void deadline_move_request(struct deadline_data *dd, struct td_request *rq)
{
	int dir = rq_dir(rq);

	dd->next_rq[DD_READ] = NULL;
	dd->next_rq[DD_WRITE] = NULL;
	dd->next_rq[dir] = deadline_latter_request(dd, rq);
	td_list_del(&rq->fifo);
	sort_del(dd, rq);
}

static struct td_request *deadline_dispatch(void *data, bool force)
{
	struct deadline_data *dd = data;
	const struct td_elv_tunables *t = dd->eq->tunables;
	bool reads = !td_list_empty(&dd->fifo_list[DD_READ]);
	bool writes = !td_list_empty(&dd->fifo_list[DD_WRITE]);
	struct td_request *rq;
	int dir;

	(void)force; /* dispatch always returns a request when one is queued */

	/* Continue the current batch while it is entitled to. */
	rq = dd->next_rq[DD_WRITE] ? dd->next_rq[DD_WRITE] : dd->next_rq[DD_READ];
	if (rq && dd->batching < t->fifo_batch)
		goto dispatch_request;

	/* Choose the direction of a new batch. */
	if (reads) {
		if (writes && dd->starved++ >= t->writes_starved)
			goto dispatch_writes;
		dir = DD_READ;
		goto dispatch_find_request;
	}
	if (writes) {
dispatch_writes:
		dd->starved = 0;
		dir = DD_WRITE;
		goto dispatch_find_request;
	}
	return NULL;

dispatch_find_request:
	/*
	 * Start from the oldest request when a deadline has passed, when the
	 * last batch went the other way, or when the sweep reached the end;
	 * otherwise keep sweeping upwards. (The clock is read only when the
	 * choice depends on it.)
	 */
	if (!dd->next_rq[dir] || deadline_check_fifo(dd, dir))
		rq = td_list_first_entry(&dd->fifo_list[dir], struct td_request, fifo);
	else
		rq = dd->next_rq[dir];
	dd->batching = 0;

dispatch_request:
	dd->batching++;
	deadline_move_request(dd, rq);
	return rq;
}

static bool deadline_has_work(void *data)
{
	struct deadline_data *dd = data;

	return !td_list_empty(&dd->fifo_list[DD_READ]) || !td_list_empty(&dd->fifo_list[DD_WRITE]);
}

/* The deadline policy's operations, shared by the rq elevator and the mq scheduler. */
#define DEADLINE_OPS                                        \
	.init = deadline_init, .exit = deadline_exit,       \
	.front_merges = true, .merged = deadline_merged,    \
	.merged_requests = deadline_merged_requests,        \
	.former_request = deadline_former_request,          \
	.latter_request = deadline_latter_request,          \
	.add_request = deadline_add_request,                \
	.dispatch = deadline_dispatch, .has_work = deadline_has_work

const struct td_elevator_type td_elv_deadline = {
	.name = "deadline",
	DEADLINE_OPS,
};

/*
 * mq-deadline: the scheduler of an mq queue's hardware contexts. Each hctx
 * has an instance of its own, so the sorted lists, the read/write FIFOs with
 * their expiry, fifo_batch and writes_starved work per hctx, as in Linux's
 * block/mq-deadline.c; the policy is the one above.
 */
const struct td_elevator_type td_elv_mq_deadline = {
	.name = "mq-deadline",
	.mq = true,
	DEADLINE_OPS,
};
