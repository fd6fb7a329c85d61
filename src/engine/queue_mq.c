// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * queue_mq.c - mq mode: per-CPU software queues in front of hardware
 * dispatch contexts that share one tag set, the shape Linux's blk-mq gave
 * the 2.6 single queue.
 *
 *   submitter on CPU c ──► ctxs[c]            (software queue: bios, its own lock)
 *                            │  c % nr_hw
 *                            ▼
 *                          hctxs[h]           (hardware context: a queue of
 *                            │                 its own, run as rq mode runs one:
 *                            │                 pool, scheduler none | mq-deadline,
 *                            │                 dispatch and in-flight lists, prep)
 *                            ▼
 *                  one tag map (the tag set) ──► the drive ──► td_mq_complete()
 *                                                              ─► the request's hctx
 *
 * A submitter whose hctx is free takes the hctx lock at once and inserts
 * its bios directly, behind whatever the hctx's software queues hold (Linux
 * issues directly in the same case). Otherwise it puts them on its CPU's
 * software queue (sched_getcpu()) and then inserts its hctx's software
 * queues into the hctx, under the hctx lock, so bios reach the hctx in the
 * order they were queued; if another submitter took them first, that one
 * inserts and runs them. The drive's completion is split by hctx and each
 * part completes under that hctx's lock only: no lock is shared by all CPUs
 * on the fast path (the tag map is lock-free, and the drain count is
 * counted per CPU).
 *
 * Each hctx is a struct td_queue in mode RQ whose ->parent is the mq queue;
 * it borrows the mq queue's stats, trace and tag map, and has its own
 * td-kblockd and td-timer threads. What acts on a tag set acts on every hctx
 * at once: a reset or a command timeout stops them all, quiesces the drive
 * once and requeues each hctx's commands (td_queue_reset_set); a bounded
 * drain fails them all (td_queue_abort_set); a depth change kicks them all,
 * a scheduler change switches each. The mq queue owns the drain count
 * (an hctx's bios count there) and the reset lock.
 *
 * Mapping: software queue c feeds hctx c % nr_hw, so with nr_hw equal to the
 * number of CPUs each CPU has a hardware context of its own.
 *
 * Ordering: the queue rules of tagdisk/queue.h (a flush as a barrier, no two
 * overlapping writes in flight) hold within each hctx. Like Linux, mq
 * leaves the order of concurrent I/O from different CPUs to the submitters.
 */
#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "queue_int.h"
#include "tagdisk/drive.h"
#include "tagdisk/queue.h"

/* Return: the number of possible CPUs (at least 1). */
static unsigned int possible_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_CONF);

	return n < 1 ? 1 : (unsigned int)n;
}

/*
 * The drive's completion: hand each request to its own hctx, in the drive's
 * order, and only once all of them are ended run what needs running (a run
 * may execute, and a reset requeue whatever would still be on @done).
 */
static void mq_complete(void *ctx, struct td_list *done)
{
	struct td_queue *q = ctx;
	struct td_queue_completion c;
	struct td_queue *last = NULL;

	td_queue_completion_init(&c);
	while (!td_list_empty(done)) {
		struct td_request *first = td_list_first_entry(done, struct td_request, drive_list);
		struct td_queue *hctx = first->q;
		struct td_list part = TD_LIST_INIT(part);
		struct td_list *pos, *n;

		assert(hctx->parent == q);
		td_list_for_each_safe(pos, n, done) {
			struct td_request *rq = td_list_entry(pos, struct td_request, drive_list);

			if (rq->q != hctx)
				continue;
			td_list_del(&rq->drive_list);
			td_list_add_tail(&rq->drive_list, &part);
		}
		td_queue_complete_part(hctx, &part, &c);
		last = hctx;
	}
	if (last)
		td_queue_complete_finish(last, &c);
}

int td_queue_mq_init(struct td_queue *q, const struct td_queue_params *p)
{
	struct td_queue_params hp = *p;
	unsigned int nr_ctx = possible_cpus();
	unsigned int nr_hw = p->nr_hw_queues ? p->nr_hw_queues : nr_ctx;
	int ret = -ENOMEM;

	if (nr_hw > TD_QUEUE_HW_MAX)
		nr_hw = TD_QUEUE_HW_MAX;
	q->ctxs = aligned_alloc(TD_CACHELINE, nr_ctx * sizeof(*q->ctxs));
	if (!q->ctxs)
		return -ENOMEM;
	memset(q->ctxs, 0, nr_ctx * sizeof(*q->ctxs));
	q->hctxs = calloc(nr_hw, sizeof(*q->hctxs));
	if (!q->hctxs)
		goto out_free_ctxs;
	q->nr_ctx = nr_ctx;

	hp.mode = TD_MODE_RQ;
	hp.tags = q->tags;
	for (unsigned int i = 0; i < nr_hw; i++) {
		struct td_queue *h = td_queue_hctx_create(q, &hp, i, &ret);

		if (!h)
			goto out_destroy_hctxs;
		/* Software queues c with c % nr_hw == i: the first is i, then every nr_hw-th. */
		h->nr_hctx_ctx = i < nr_ctx ? (nr_ctx - i + nr_hw - 1) / nr_hw : 0;
		h->hctx_ctx = calloc(h->nr_hctx_ctx ? h->nr_hctx_ctx : 1, sizeof(*h->hctx_ctx));
		if (!h->hctx_ctx) {
			td_queue_destroy(h);
			ret = -ENOMEM;
			goto out_destroy_hctxs;
		}
		q->hctxs[i] = h;
		q->nr_hw = i + 1;
	}
	for (unsigned int c = 0; c < nr_ctx; c++) {
		struct td_mq_ctx *ctx = &q->ctxs[c];
		struct td_queue *h = q->hctxs[c % nr_hw];

		td_mutex_init(&ctx->lock);
		atomic_init(&ctx->pending, false);
		ctx->hctx = h;
		h->hctx_ctx[c / nr_hw] = ctx;
	}
	td_drive_attach(q->drive, mq_complete, td_queue_unpinned, q);
	return 0;

out_destroy_hctxs:
	for (unsigned int i = q->nr_hw; i-- > 0;) {
		free(q->hctxs[i]->hctx_ctx);
		td_queue_destroy(q->hctxs[i]);
	}
	free(q->hctxs);
	q->hctxs = NULL;
	q->nr_hw = 0;
out_free_ctxs:
	free(q->ctxs);
	q->ctxs = NULL;
	q->nr_ctx = 0;
	return ret;
}

void td_queue_mq_exit(struct td_queue *q)
{
	for (unsigned int i = q->nr_hw; i-- > 0;) {
		free(q->hctxs[i]->hctx_ctx);
		td_queue_destroy(q->hctxs[i]);
	}
	for (unsigned int c = 0; c < q->nr_ctx; c++) {
		assert(!q->ctxs[c].head);
		td_mutex_destroy(&q->ctxs[c].lock);
	}
	free(q->hctxs);
	free(q->ctxs);
	q->hctxs = NULL;
	q->ctxs = NULL;
	q->nr_hw = 0;
	q->nr_ctx = 0;
}

void td_queue_mq_submit(struct td_queue *q, struct td_bio *list)
{
	if (td_unlikely(atomic_load_explicit(&q->dead, memory_order_relaxed))) {
		while (list) {
			struct td_bio *next = list->next;

			list->next = NULL;
			td_queue_end_bio(q, list, -EIO);
			list = next;
		}
		return;
	}
	int cpu = sched_getcpu();
	struct td_mq_ctx *ctx = &q->ctxs[cpu < 0 ? 0 : (unsigned int)cpu % q->nr_ctx];
	struct td_queue *hctx = ctx->hctx;
	struct td_bio *tail = list;
	uint64_t n = 1;

	while (tail->next) {
		tail = tail->next;
		n++;
	}
	if (td_mutex_trylock(&hctx->lock)) {
		/*
		 * Direct insert: the hctx is free, so take it now instead of passing
		 * through the software queue, whose lock would be taken twice for
		 * nothing. Bios other submitters left on the software queues still
		 * go in first.
		 */
		ctx->nr_direct += n;
		td_queue_insert_ctxs_locked(hctx, list);
		return;
	}
	td_mutex_lock(&ctx->lock);
	if (ctx->tail)
		ctx->tail->next = list;
	else
		ctx->head = list;
	ctx->tail = tail;
	ctx->nr_queued += n;
	atomic_store_explicit(&ctx->pending, true, memory_order_relaxed);
	td_mutex_unlock(&ctx->lock);

	td_queue_insert_ctxs(hctx);
}

struct td_bio *td_queue_mq_collect_locked(struct td_queue *hctx, struct td_bio **tailp)
{
	struct td_bio *head = NULL;
	struct td_bio *tail = NULL;

	assert(td_lock_held(&hctx->lock));
	for (unsigned int i = 0; i < hctx->nr_hctx_ctx; i++) {
		struct td_mq_ctx *ctx = hctx->hctx_ctx[i];

		/*
		 * A push this load misses is inserted by its own submitter, which
		 * takes the hctx lock after pushing and sees its own flag.
		 */
		if (!atomic_load_explicit(&ctx->pending, memory_order_relaxed))
			continue;
		td_mutex_lock(&ctx->lock);
		if (ctx->head) {
			if (tail)
				tail->next = ctx->head;
			else
				head = ctx->head;
			tail = ctx->tail;
			ctx->head = ctx->tail = NULL;
		}
		atomic_store_explicit(&ctx->pending, false, memory_order_relaxed);
		td_mutex_unlock(&ctx->lock);
	}
	*tailp = tail;
	return head;
}
