// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive.c - the drive core: parameters and model tables, creation and
 * destruction, the status snapshot and the small accessors. The executors
 * (the inline runner, the worker threads, an inline drive's own thread) are
 * in drive_run.c; the backend call itself in drive_exec.c; taking commands
 * back (quiesce and abandon, parking, stale calls, the fence, pins) in
 * drive_quiesce.c; the latency models (which command next, and how long it
 * takes) in model_hdd.c and model_ssd.c behind struct td_drive_model_ops
 * (drive_int.h); model "none" is the table with no members: oldest first,
 * no delay.
 */
#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "common/clock.h"
#include "common/lock.h"
#include "common/log.h"
#include "drive_int.h"
#include "tagdisk/cdb.h"
#include "tagdisk/drive.h"
#include "tagdisk/inject.h"
#include "tagdisk/wcache.h"

/* Drive ids: the key of each executor thread's slot cache (drive_quiesce.c). */
static _Atomic uint64_t next_drive_id = 1;

void td_drive_params_default(struct td_drive_params *p)
{
	memset(p, 0, sizeof(*p));
	p->logical_block_size = 512;
	p->workers = 2;
	p->model = TD_MODEL_NONE;
	p->hdd = (struct td_hdd_params){
		.rpm = 7200,
		.seek_track_us = 500,
		.seek_full_us = 12000,
		.transfer_mb_s = 150,
		.overhead_us = 50,
		.sectors_per_track = 2048,
	};
	p->ssd = (struct td_ssd_params){ .latency_us = 80, .transfer_mb_s = 2000 };
	p->write_cache = TD_WC_WRITEBACK;
	p->cache_size = 64ULL << 20;
	p->seed = 1;
}

const char *td_drive_model_name(enum td_drive_model m)
{
	switch (m) {
	case TD_MODEL_NONE:
		return "none";
	case TD_MODEL_HDD:
		return "hdd";
	case TD_MODEL_SSD:
		return "ssd";
	}
	return "unknown";
}

const char *td_write_cache_name(enum td_write_cache wc)
{
	switch (wc) {
	case TD_WC_WRITEBACK:
		return "writeback";
	case TD_WC_WRITETHROUGH:
		return "writethrough";
	case TD_WC_VOLATILE:
		return "volatile";
	}
	return "unknown";
}

/* ---- latency models ------------------------------------------------------------------- */

static unsigned int none_nr_threads(const struct td_drive_params *p)
{
	return p->workers;
}

/* Model none: workers threads (or inline), oldest command first, no delay. */
static const struct td_drive_model_ops model_none = {
	.name = "none",
	.thread_name = "td-drive",
	.nr_threads = none_nr_threads,
};

static const struct td_drive_model_ops *model_ops(enum td_drive_model m)
{
	switch (m) {
	case TD_MODEL_NONE:
		return &model_none;
	case TD_MODEL_HDD:
		return &td_model_hdd;
	case TD_MODEL_SSD:
		return &td_model_ssd;
	}
	return NULL;
}

/* ---- the API -------------------------------------------------------------------------- */

void td_drive_attach(struct td_drive *d, td_drive_complete_fn fn, td_drive_unpin_fn unpin,
		     void *ctx)
{
	d->complete = fn;
	d->unpin = unpin;
	d->complete_ctx = ctx;
}

struct td_inject *td_drive_inject(struct td_drive *d)
{
	return d->inject;
}

void td_drive_get_status(struct td_drive *d, struct td_drive_status *st)
{
	memset(st, 0, sizeof(*st));
	td_mutex_lock(&d->lock);
	st->model = d->model;
	st->write_cache = d->write_cache;
	st->workers = d->nr_threads;
	st->queued = d->nr_pending + d->nr_hung;
	/*
	 * Completing first: a command that finished between the two loads is
	 * then left out (at worst a moment early), never shown as executing
	 * after its submitter had the answer. Commands held by a thread whose
	 * call a reset left behind are the queue's again: left out too.
	 */
	unsigned int completing = atomic_load(&d->completing);
	uint64_t cmds = atomic_load(&d->cmds);
	unsigned int executing = d->executing + td_drive_cmds_claimed(cmds) -
				 td_drive_cmds_handed(cmds) + d->nr_timed;
	unsigned int gone = completing + d->stale_held;

	st->executing = (executing > gone ? executing - gone : 0) + d->ops_current;
	st->backend_ops = d->ops_current;
	st->stale_ops = d->ops_stale;
	st->stale_calls = d->calls_stale;
	st->fences = d->fences;
	st->delayed = d->nr_delayed + d->nr_timed;
	st->hung = d->nr_hung;
	if (d->ops->status_locked)
		d->ops->status_locked(d, st);
	td_mutex_unlock(&d->lock);
	st->commands = td_pcpu_sum(&d->commands);
}

static int check_params(const struct td_drive_params *p, const struct td_drive_model_ops *ops)
{
	const struct td_backend_ops *be = p->backend.ops;

	if (!ops || !be || (p->logical_block_size != 512 && p->logical_block_size != 4096))
		return -EINVAL;
	/* A backend is either kind, wholly. */
	if (!be->submit != (be->read && be->write && be->flush && be->discard && be->write_zeroes))
		return -EINVAL;
	if (!p->capacity_bytes || p->capacity_bytes % p->logical_block_size)
		return -EINVAL;
	if (ops->check && ops->check(p))
		return -EINVAL;
	if (p->write_cache == TD_WC_VOLATILE && p->cache_size < TD_WCACHE_LINE)
		return -EINVAL;
	return 0;
}

/* Stop the executor threads (those started) and wait for them. */
static void stop_threads(struct td_drive *d)
{
	td_mutex_lock(&d->lock);
	d->stop = true;
	td_cond_broadcast(&d->work_cond);
	td_cond_broadcast(&d->delay_cond);
	td_mutex_unlock(&d->lock);
	for (unsigned int i = 0; i < d->nr_threads; i++)
		pthread_join(d->threads[i], NULL);
	free(d->threads);
	if (d->timer_started)
		pthread_join(d->timer, NULL);
}

struct td_drive *td_drive_create(const struct td_drive_params *p, int *err)
{
	const struct td_drive_model_ops *ops = model_ops(p->model);
	struct td_drive *d;
	int ret = check_params(p, ops);

	if (ret)
		goto out;
	ret = -ENOMEM;
	/* Aligned: the command counter's shards have cache lines of their own. */
	d = aligned_alloc(_Alignof(struct td_drive), sizeof(*d));
	if (!d)
		goto out;
	memset(d, 0, sizeof(*d));
	td_mutex_init(&d->lock);
	td_cond_init(&d->work_cond);
	td_cond_init(&d->delay_cond);
	td_cond_init(&d->idle_cond);
	td_list_init(&d->pending);
	td_list_init(&d->hung);
	td_list_init(&d->timed);
	td_list_init(&d->slots);
	d->id = atomic_fetch_add(&next_drive_id, 1);
	d->be = p->backend;
	d->lbs = p->logical_block_size;
	d->capacity_bytes = p->capacity_bytes;
	d->model = p->model;
	d->ops = ops;
	d->write_cache = p->write_cache;
	d->nr_threads = ops->nr_threads(p);
	d->async = td_backend_is_async(&p->backend) && p->write_cache != TD_WC_VOLATILE &&
		   p->model != TD_MODEL_HDD;
	/* A fenced command needs a thread to start it when the fence lifts. */
	if (d->async && !d->nr_threads)
		d->nr_threads = 1;
	d->parks = !p->backend.ops->memory_only || p->write_cache == TD_WC_VOLATILE;
	td_pcpu_init(&d->commands);
	atomic_init(&d->cmds, 0);
	atomic_init(&d->fenced, false);
	if (ops->init) {
		ret = ops->init(d, p);
		if (ret)
			goto out_free;
	}
	ret = -ENOMEM;
	d->inject = td_inject_create(p->seed);
	if (!d->inject)
		goto out_exit_model;
	if (d->write_cache == TD_WC_VOLATILE) {
		d->wc = td_wcache_create(&d->be, d->capacity_bytes, p->cache_size);
		if (!d->wc)
			goto out_destroy_inject;
	}
	if (d->nr_threads) {
		d->threads = calloc(d->nr_threads, sizeof(*d->threads));
		if (!d->threads)
			goto out_destroy_wcache;
	}
	for (unsigned int i = 0; i < d->nr_threads; i++) {
		int r = pthread_create(&d->threads[i], NULL, td_drive_worker_main, d);

		if (r) {
			ret = -r;
			d->nr_threads = i;
			goto out_stop_threads;
		}
	}
	if (!d->nr_threads) {
		int r = pthread_create(&d->timer, NULL, td_drive_timer_main, d);

		if (r) {
			ret = -r;
			goto out_stop_threads;
		}
		d->timer_started = true;
	}
	return d;

out_stop_threads:
	stop_threads(d);
out_destroy_wcache:
	if (d->wc)
		td_wcache_destroy(d->wc);
out_destroy_inject:
	td_inject_destroy(d->inject);
out_exit_model:
	if (ops->exit)
		ops->exit(d);
out_free:
	td_cond_destroy(&d->idle_cond);
	td_cond_destroy(&d->delay_cond);
	td_cond_destroy(&d->work_cond);
	td_mutex_destroy(&d->lock);
	free(d);
out:
	*err = ret;
	return NULL;
}

uint64_t td_drive_destroy(struct td_drive *d)
{
	uint64_t lost = 0;

	td_mutex_lock(&d->lock);
	assert(!d->nr_pending && !d->nr_timed);
	/*
	 * The queue's last bio may have ended while its worker is still on its
	 * way out of the completion function: let it get off the books first.
	 */
	atomic_fetch_add(&d->quiescing, 1);
	/* Backend operations and calls too, stale ones included: they hold our pointer. */
	while (d->executing || td_drive_cmds_claimed(atomic_load(&d->cmds)) || d->ops_current ||
	       d->ops_stale || d->calls_stale)
		td_cond_wait_until(&d->idle_cond, &d->lock, td_now_ns() + TD_NSEC_PER_MSEC);
	atomic_fetch_sub(&d->quiescing, 1);
	td_mutex_unlock(&d->lock);
	stop_threads(d);
	td_drive_slots_free(d);
	td_inject_destroy(d->inject);
	if (d->wc)
		lost = td_wcache_destroy(d->wc);
	if (d->ops->exit)
		d->ops->exit(d);
	if (d->be.ops->destroy)
		d->be.ops->destroy(d->be.priv);
	td_cond_destroy(&d->idle_cond);
	td_cond_destroy(&d->delay_cond);
	td_cond_destroy(&d->work_cond);
	td_mutex_destroy(&d->lock);
	free(d);
	return lost;
}

int td_drive_powerfail(struct td_drive *d, unsigned int keep_pct, uint64_t seed,
		       struct td_powerfail_result *res)
{
	if (!d->wc)
		return -EOPNOTSUPP;
	return td_wcache_powerfail(d->wc, keep_pct, seed, res);
}

bool td_drive_cache_stats(struct td_drive *d, struct td_wcache_stats *st)
{
	if (!d->wc)
		return false;
	td_wcache_get_stats(d->wc, st);
	return true;
}

struct td_wcache *td_drive_wcache(struct td_drive *d)
{
	return d->wc;
}
