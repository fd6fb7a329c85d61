// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * queue_setup.c - a request queue's life and settings: creation (with its
 * two threads in rq mode, td-kblockd and td-timer) and destruction, the
 * run-time switches (elevator, depth, tunables, timeouts, prep), the
 * accessors, and the snapshots status and tags show. The data path is in
 * queue.c, make_request functions and windows in queue_bio.c, the mq
 * mode's software queues and hardware contexts in queue_mq.c (queue_int.h).
 *
 * In mq mode every setting applies to each hctx, and a snapshot sums them.
 */
#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "queue_int.h"
#include "tagdisk/drive.h"
#include "tagdisk/queue.h"
#include "tagdisk/rangelock.h"
#include "tagdisk/stats.h"
#include "tagdisk/tag.h"

void td_queue_params_default(struct td_queue_params *p)
{
	memset(p, 0, sizeof(*p));
	p->mode = TD_MODE_RQ;
	p->logical_block_size = 512;
	p->max_sectors = 2048;
	p->nr_requests = 128;
	p->elevator = "deadline";
	p->tunables = (struct td_elv_tunables){
		.read_expire_ms = 500,
		.write_expire_ms = 5000,
		.fifo_batch = 16,
		.writes_starved = 2,
	};
	p->depth = 32;
	p->command_timeout_ms = 30000;
	p->max_retries = 5;
}

/* ---- configuration -------------------------------------------------------------------- */

/* The tag map calls this when a tag frees after we starved: a completion path, run here. */
static void queue_tag_kick(void *user)
{
	td_queue_run(user);
}

void td_queue_set_prep(struct td_queue *q, td_prep_fn prep)
{
	for (unsigned int i = 0; i < q->nr_hw; i++)
		td_queue_set_prep(q->hctxs[i], prep);
	q->prep = prep ? prep : td_prep_default;
}

/*
 * The name @name stands for in a queue of the given kind: each mode's
 * scheduler names map to their counterparts in the other (tagdisk/queue.h).
 */
static const char *elv_name_for(const char *name, bool mq)
{
	static const char *const pairs[][2] = {
		{ "noop", "none" },
		{ "deadline", "mq-deadline" },
	};

	for (size_t i = 0; i < TD_ARRAY_SIZE(pairs); i++)
		if (strcmp(name, pairs[i][!mq]) == 0)
			return pairs[i][mq];
	return name;
}

/* Return: true when @q schedules for an mq queue (it is an hctx). */
static bool queue_is_hctx(const struct td_queue *q)
{
	return q->parent != NULL;
}

int td_queue_set_elevator(struct td_queue *q, const char *name)
{
	const struct td_elevator_type *type;
	int err = 0;

	if (q->mode == TD_MODE_MQ) {
		if (!td_elv_find(elv_name_for(name, true)))
			return -EINVAL;
		for (unsigned int i = 0; i < q->nr_hw && !err; i++)
			err = td_queue_set_elevator(q->hctxs[i], name);
		return err;
	}
	name = elv_name_for(name, queue_is_hctx(q));
	type = td_elv_find(name);
	if (!type)
		return -EINVAL;
	if (q->mode != TD_MODE_RQ)
		return 0;
	td_mutex_lock(&q->lock);
	if (strcmp(td_elv_name(q->elv), name) != 0) {
		struct td_elevator *e = td_elv_create(type, &q->eq, q->nr_requests, &err);

		if (e) {
			/* Drain the old elevator, in its own order, ahead of anything it would hold. */
			td_queue_drain_elevator_locked(q);
			td_elv_destroy(q->elv);
			q->elv = e;
		}
	}
	if (!err)
		td_queue_kick_locked(q, false);
	td_mutex_unlock(&q->lock);
	return err;
}

int td_queue_set_depth(struct td_queue *q, unsigned int depth)
{
	int err = td_tag_resize(q->tags, depth);

	if (err)
		return err;
	/* Every user of the map may go further now: kick the map once, then run every hctx. */
	struct td_queue *single[1] = { q };
	struct td_queue **qs = q->mode == TD_MODE_MQ ? q->hctxs : single;
	unsigned int n = q->mode == TD_MODE_MQ ? q->nr_hw : 1;

	for (unsigned int i = 0; i < n; i++) {
		td_mutex_lock(&qs[i]->lock);
		td_queue_kick_locked(qs[i], i == 0);
		td_mutex_unlock(&qs[i]->lock);
	}
	return 0;
}

void td_queue_set_tunables(struct td_queue *q, const struct td_elv_tunables *t)
{
	for (unsigned int i = 0; i < q->nr_hw; i++)
		td_queue_set_tunables(q->hctxs[i], t);
	td_mutex_lock(&q->lock);
	q->tunables = *t;
	td_mutex_unlock(&q->lock);
}

int td_queue_set_timeout(struct td_queue *q, uint32_t command_timeout_ms, uint32_t max_retries)
{
	for (unsigned int i = 0; i < q->nr_hw; i++)
		td_queue_set_timeout(q->hctxs[i], command_timeout_ms, max_retries);
	td_mutex_lock(&q->lock);
	q->command_timeout_ms = command_timeout_ms;
	q->max_retries = max_retries;
	td_cond_signal(&q->timer_cond);
	td_mutex_unlock(&q->lock);
	return 0;
}

/* ---- creation ------------------------------------------------------------------------- */

static int check_params(const struct td_queue_params *p)
{
	uint32_t per_block;

	if (!p->drive || (p->logical_block_size != 512 && p->logical_block_size != 4096))
		return -EINVAL;
	per_block = p->logical_block_size >> TD_SECTOR_SHIFT;
	if (!p->capacity_sectors || p->capacity_sectors % per_block)
		return -EINVAL;
	if (p->max_sectors < per_block || p->max_sectors % per_block || !p->nr_requests)
		return -EINVAL;
	if (!p->tags && (p->depth < 1 || p->depth > TD_TAG_DEPTH_MAX))
		return -EINVAL;
	if (p->mode != TD_MODE_BIO &&
	    (!p->elevator || !td_elv_find(elv_name_for(p->elevator, p->mode == TD_MODE_MQ))))
		return -EINVAL;
	if (p->mode == TD_MODE_MQ && p->nr_hw_queues > TD_QUEUE_HW_MAX)
		return -EINVAL;
	if (!p->tunables.fifo_batch)
		return -EINVAL;
	return 0;
}

/* Stop and join the threads td_queue_create() started. */
static void stop_threads(struct td_queue *q)
{
	td_mutex_lock(&q->lock);
	q->timer_stop = true;
	td_cond_signal(&q->timer_cond);
	q->kblockd_stop = true;
	td_cond_signal(&q->kblockd_cond);
	td_mutex_unlock(&q->lock);
	if (q->timer_started)
		pthread_join(q->timer, NULL);
	if (q->kblockd_started)
		pthread_join(q->kblockd, NULL);
	q->timer_started = false;
	q->kblockd_started = false;
}

/*
 * Create a queue: rq or bio mode, an mq queue (mode MQ), or, with @parent,
 * hardware context @index of the mq queue @parent (mode RQ, borrowing the
 * parent's stats and tag map; @p->elevator in mq names).
 */
static struct td_queue *queue_create(const struct td_queue_params *p, struct td_queue *parent,
				     unsigned int index, int *err)
{
	struct td_queue *q;
	int ret = check_params(p);

	if (ret)
		goto out;
	ret = -ENOMEM;
	/* Cache-line aligned: the lock and the drain count's shards have lines of their own. */
	q = aligned_alloc(_Alignof(struct td_queue), sizeof(*q));
	if (!q)
		goto out;
	memset(q, 0, sizeof(*q));
	td_mutex_init(&q->lock);
	td_mutex_init(&q->reset_lock);
	td_mutex_init(&q->write_lock);
	td_cond_init(&q->drain_cond);
	td_cond_init(&q->timer_cond);
	td_cond_init(&q->kblockd_cond);
	td_list_init(&q->dispatch);
	td_list_init(&q->in_flight);
	q->mode = p->mode;
	q->parent = parent;
	q->hctx_index = index;
	q->capacity = p->capacity_sectors;
	q->lbs = p->logical_block_size;
	q->max_sectors = p->max_sectors;
	q->nr_requests = p->nr_requests;
	q->drive = p->drive;
	q->trace = p->trace;
	q->wlog = p->wlog;
	q->clock = p->clock;
	q->prep = td_prep_default;
	q->tunables = p->tunables;
	q->command_timeout_ms = p->command_timeout_ms;
	q->max_retries = p->max_retries;
	q->eq.tunables = &q->tunables;
	q->eq.clock = &q->clock;
	q->eq.max_sectors = p->max_sectors;
	td_pcpu_init(&q->submitted);
	td_pcpu_init(&q->ended);
	atomic_init(&q->dead, false);
	atomic_init(&q->write_blocked, false);

	if (parent) {
		q->stats = parent->stats;
	} else {
		/*
		 * mq and bio queues count per CPU, with no lock: their submitters run
		 * on every CPU at once. rq mode keeps the exact busy-time integrals
		 * (its queue lock serialises it anyway).
		 */
		q->stats = q->mode == TD_MODE_RQ ? td_stats_create() : td_stats_create_percpu();
		if (!q->stats)
			goto out_destroy_locks;
		q->rangelock = td_rangelock_create();
		if (!q->rangelock)
			goto out_destroy_stats;
	}
	/* An mq queue keeps no requests: its hctxs do. */
	if (q->mode != TD_MODE_MQ) {
		ret = td_rq_pool_init(&q->pool, q, p->nr_requests);
		if (ret)
			goto out_destroy_rangelock;
		const char *elv = q->mode == TD_MODE_RQ ? elv_name_for(p->elevator, parent != NULL)
							: "noop";

		q->elv = td_elv_create(td_elv_find(elv), &q->eq, p->nr_requests, &ret);
		if (!q->elv)
			goto out_destroy_pool;
	}

	struct td_tag_map *map = p->tags;

	if (!map) {
		/* An mq tag set is started and ended from every CPU: spread it. */
		map = q->mode == TD_MODE_MQ ? td_tag_map_create_spread(p->depth)
					    : td_tag_map_create(p->depth);
		ret = -ENOMEM;
		if (!map)
			goto out_destroy_elv;
	}
	/* An mq queue holds the tag set for its hctxs, which are the map's users that run. */
	ret = td_tag_map_attach(map, q->mode == TD_MODE_MQ ? NULL : queue_tag_kick, q);
	if (ret) {
		if (!p->tags)
			td_tag_map_destroy(map);
		goto out_destroy_elv;
	}
	q->tags = map;
	if (q->mode == TD_MODE_MQ) {
		ret = td_queue_mq_init(q, p);
		if (ret)
			goto out_detach_tags;
	} else if (!parent) {
		td_drive_attach(q->drive, td_queue_complete, td_queue_unpinned, q);
	}

	if (q->mode == TD_MODE_RQ) {
		ret = -pthread_create(&q->kblockd, NULL, td_queue_kblockd_main, q);
		if (ret)
			goto out_detach_tags;
		q->kblockd_started = true;
		ret = -pthread_create(&q->timer, NULL, td_queue_timer_main, q);
		if (ret)
			goto out_stop_threads;
		q->timer_started = true;
	}
	return q;

out_stop_threads:
	stop_threads(q);
out_detach_tags:
	td_tag_map_detach(q->tags, q);
out_destroy_elv:
	if (q->elv)
		td_elv_destroy(q->elv);
out_destroy_pool:
	if (q->mode != TD_MODE_MQ)
		td_rq_pool_destroy(&q->pool);
out_destroy_rangelock:
	if (!parent)
		td_rangelock_destroy(q->rangelock);
out_destroy_stats:
	if (!parent)
		td_stats_destroy(q->stats);
out_destroy_locks:
	td_cond_destroy(&q->kblockd_cond);
	td_cond_destroy(&q->timer_cond);
	td_cond_destroy(&q->drain_cond);
	td_mutex_destroy(&q->write_lock);
	td_mutex_destroy(&q->reset_lock);
	td_mutex_destroy(&q->lock);
	free(q);
out:
	*err = ret;
	return NULL;
}

struct td_queue *td_queue_create(const struct td_queue_params *p, int *err)
{
	return queue_create(p, NULL, 0, err);
}

struct td_queue *td_queue_hctx_create(struct td_queue *parent, const struct td_queue_params *p,
				      unsigned int index, int *err)
{
	return queue_create(p, parent, index, err);
}

void td_queue_destroy(struct td_queue *q)
{
	assert(td_queue_outstanding(q) == 0);
	stop_threads(q);
	assert(q->nr_in_flight == 0 && q->nr_dispatch == 0);
	if (q->mode == TD_MODE_MQ)
		td_queue_mq_exit(q);
	td_tag_map_detach(q->tags, q);
	if (q->elv)
		td_elv_destroy(q->elv);
	if (q->mode != TD_MODE_MQ)
		td_rq_pool_destroy(&q->pool);
	if (!q->parent) {
		td_rangelock_destroy(q->rangelock);
		td_stats_destroy(q->stats);
	}
	td_cond_destroy(&q->kblockd_cond);
	td_cond_destroy(&q->timer_cond);
	td_cond_destroy(&q->drain_cond);
	td_mutex_destroy(&q->write_lock);
	td_mutex_destroy(&q->reset_lock);
	td_mutex_destroy(&q->lock);
	free(q);
}

/* ---- accessors and snapshots ---------------------------------------------------------- */

uint64_t td_queue_capacity(const struct td_queue *q)
{
	return q->window_nr ? q->window_nr : q->capacity;
}

uint64_t td_queue_physical_capacity(const struct td_queue *q)
{
	return q->capacity;
}

uint32_t td_queue_logical_block_size(const struct td_queue *q)
{
	return q->lbs;
}

uint32_t td_queue_max_sectors(const struct td_queue *q)
{
	return q->max_sectors;
}

enum td_queue_mode td_queue_mode(const struct td_queue *q)
{
	return q->mode;
}

struct td_stats *td_queue_stats(struct td_queue *q)
{
	return q->stats;
}

struct td_tag_map *td_queue_tag_map(struct td_queue *q)
{
	return q->tags;
}

struct td_rangelock *td_queue_rangelock(struct td_queue *q)
{
	return q->rangelock;
}

struct td_drive *td_queue_drive(struct td_queue *q)
{
	return q->drive;
}

/* Add @q's queue state (not its settings) to @st; in mq mode, @q is one hctx. */
static void add_status(struct td_queue *q, struct td_queue_status *st)
{
	struct td_list *pos;

	td_mutex_lock(&q->lock);
	st->in_flight += q->nr_in_flight;
	st->queued += q->nr_dispatch + td_elv_count(q->elv);
	st->requests_used += q->pool.nr - q->pool.nr_free;
	st->nr_requests += q->pool.nr;
	st->barrier_pending |= q->barrier_inflight;
	td_list_for_each(pos, &q->dispatch) {
		if (td_list_entry(pos, struct td_request, queuelist)->op == TD_OP_FLUSH)
			st->barrier_pending = true;
	}
	td_mutex_unlock(&q->lock);
}

void td_queue_get_status(struct td_queue *q, struct td_queue_status *st)
{
	memset(st, 0, sizeof(*st));
	td_mutex_lock(&q->lock);
	st->mode = q->mode;
	st->max_sectors = q->max_sectors;
	st->command_timeout_ms = q->command_timeout_ms;
	st->max_retries = q->max_retries;
	st->tunables = q->tunables;
	td_mutex_unlock(&q->lock);
	if (q->mode == TD_MODE_MQ) {
		st->nr_hw_queues = q->nr_hw;
		td_mutex_lock(&q->hctxs[0]->lock);
		snprintf(st->elevator, sizeof(st->elevator), "%s", td_elv_name(q->hctxs[0]->elv));
		td_mutex_unlock(&q->hctxs[0]->lock);
		for (unsigned int i = 0; i < q->nr_hw; i++)
			add_status(q->hctxs[i], st);
	} else {
		td_mutex_lock(&q->lock);
		snprintf(st->elevator, sizeof(st->elevator), "%s",
			 q->mode == TD_MODE_RQ ? td_elv_name(q->elv) : "none");
		td_mutex_unlock(&q->lock);
		add_status(q, st);
	}
	st->depth = td_tag_depth(q->tags);
	st->tags_in_use = td_tag_busy(q->tags);
}

uint64_t td_queue_bios_outstanding(struct td_queue *q)
{
	return td_queue_outstanding(q);
}

int td_queue_get_hctx_status(struct td_queue *q, unsigned int index, struct td_hctx_status *st)
{
	if (q->mode != TD_MODE_MQ || index >= q->nr_hw)
		return -EINVAL;
	struct td_queue *h = q->hctxs[index];

	memset(st, 0, sizeof(*st));
	td_mutex_lock(&h->lock);
	st->queued = h->nr_dispatch + td_elv_count(h->elv);
	st->in_flight = h->nr_in_flight;
	st->dispatched = h->nr_dispatched;
	for (unsigned int i = 0; i < h->nr_hctx_ctx; i++) {
		/* Software queue locks come after the hctx lock. */
		td_mutex_lock(&h->hctx_ctx[i]->lock);
		st->ctx_queued += h->hctx_ctx[i]->nr_queued + h->hctx_ctx[i]->nr_direct;
		td_mutex_unlock(&h->hctx_ctx[i]->lock);
	}
	td_mutex_unlock(&h->lock);
	return 0;
}

/* Copy @q's outstanding commands into @out from @n on. Return: @n plus their number. */
static unsigned int add_tags(struct td_queue *q, int hctx, struct td_tag_info *out,
			     unsigned int max, unsigned int n)
{
	struct td_list *pos;

	td_mutex_lock(&q->lock);
	uint64_t now = td_queue_now(q);

	td_list_for_each(pos, &q->in_flight) {
		struct td_request *rq = td_list_entry(pos, struct td_request, queuelist);

		if (n < max && out) {
			struct td_tag_info *ti = &out[n];

			ti->tag = rq->tag;
			ti->hctx = hctx;
			ti->op = rq->op;
			ti->sector = rq->sector;
			ti->nr_sectors = rq->nr_sectors;
			ti->age_us = (now - rq->dispatch_ns) / TD_NSEC_PER_USEC;
			ti->retries = rq->retries;
			ti->pid = rq->pid;
			memcpy(ti->cmd, rq->cmd, sizeof(ti->cmd));
			ti->cmd_len = rq->cmd_len;
		}
		n++;
	}
	td_mutex_unlock(&q->lock);
	return n;
}

static int cmp_tag_age(const void *a, const void *b)
{
	const struct td_tag_info *x = a;
	const struct td_tag_info *y = b;

	if (x->age_us != y->age_us)
		return x->age_us > y->age_us ? -1 : 1;
	return x->tag - y->tag;
}

unsigned int td_queue_get_tags(struct td_queue *q, struct td_tag_info *out, unsigned int max)
{
	unsigned int n = 0;

	if (q->mode != TD_MODE_MQ)
		return add_tags(q, -1, out, max, 0);
	for (unsigned int i = 0; i < q->nr_hw; i++)
		n = add_tags(q->hctxs[i], (int)i, out, max, n);
	/* Each hctx's are oldest first; merge them into one such list. */
	if (out)
		qsort(out, TD_MIN(n, max), sizeof(*out), cmp_tag_age);
	return n;
}
