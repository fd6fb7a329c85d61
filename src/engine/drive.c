// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive.c - the drive core: accepting commands, the executors (worker
 * threads or the inline runner) with fault injection and delays, quiesce and
 * abandon. The backend call itself is in drive_exec.c; the latency models
 * (which command next, and how long it takes) are in model_hdd.c and
 * model_ssd.c behind struct td_drive_model_ops (drive_int.h); model "none" is
 * the table with no members: oldest first, no delay.
 *
 * Commands arrive through td_drive_submit_locked() and wait on d->pending.
 * When the drive accepts a command it decodes the command bytes once
 * (rq->drive_cmd); from then on it never looks at the request's own fields,
 * only at its decode and at the bio chain, which is the data buffer list.
 *
 * Who executes:
 *   inline (0 threads)   the thread that ran the queue, in td_drive_run_inline(),
 *                        in arrival order;
 *   executor threads     as many as the model asks for (model none and ssd:
 *                        workers; hdd: one actuator), each taking the command
 *                        the model picks, in parallel.
 *
 * A command's life in the drive: pending -> executing (inject check, then a
 * delay if the model or an injected latency asks for one, then the backend
 * call) -> handed to the queue's completion function; or pending -> hung (an
 * injected hang) until a reset. d->executing counts worker commands taken off
 * pending whose completion has not returned; inline commands are counted in
 * d->cmds. Delayed commands wait on their own condition variable (delay_cond),
 * so a submission's wake-up always goes to an idle worker (work_cond).
 *
 * Giving commands back:
 *   td_drive_quiesce()  (a reset) bumps d->quiesce_seq, drops what is pending
 *                       or hung, wakes the delayed ones, which give up, and
 *                       waits until every executor has let go of its commands,
 *                       backend calls included;
 *   td_drive_abandon()  (a bounded drain) does the same but does not wait for
 *                       backend calls: an executor parked in one (d->cmds) is
 *                       left to it, and when the call returns it sees the
 *                       sequence moved and drops the result without touching
 *                       the request, which the queue has failed meanwhile.
 * The rule for executors is the same in both cases: after a backend call, if
 * the quiesce sequence moved, the commands are the queue's again.
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

/* Take the command the model picks off pending. Drive lock held; pending is not empty. */
static struct td_request *model_take_locked(struct td_drive *d, uint64_t *service_ns)
{
	struct td_request *rq;

	assert(td_lock_held(&d->lock) && d->nr_pending);
	*service_ns = 0;
	if (d->ops->next_locked)
		rq = d->ops->next_locked(d, service_ns);
	else
		rq = td_list_first_entry(&d->pending, struct td_request, drive_list);
	assert(rq && !td_list_empty(&rq->drive_list));
	td_list_del(&rq->drive_list);
	d->nr_pending--;
	d->executing++;
	return rq;
}

/* ---- the command life cycle ----------------------------------------------------------- */

/*
 * Wait until @deadline unless a quiesce starts. Drive lock held.
 * Return: false when the command was given up.
 */
static bool wait_delay_locked(struct td_drive *d, uint64_t deadline, unsigned int seq)
{
	bool expired = false;

	assert(td_lock_held(&d->lock));
	d->nr_delayed++;
	while (d->quiesce_seq == seq && !d->stop) {
		if (!td_cond_wait_until(&d->delay_cond, &d->lock, deadline) &&
		    td_now_ns() >= deadline) {
			expired = true;
			break;
		}
	}
	d->nr_delayed--;
	return expired;
}

/* The command leaves the drive's books (completed, dropped or hung). Drive lock held. */
static void put_executing_locked(struct td_drive *d)
{
	assert(d->executing > 0);
	if (--d->executing == 0 && atomic_load(&d->quiescing))
		td_cond_broadcast(&d->idle_cond);
}

/*
 * Run @rq, which was taken off pending with the lock held (executing counted)
 * at quiesce sequence @seq, with @model_ns of modelled service time. Called
 * and returns with the drive lock held; drops it around delays, I/O and the
 * completion call. Return: true when @rq was completed.
 */
static bool run_command_locked(struct td_drive *d, struct td_request *rq, unsigned int seq,
			       uint64_t model_ns)
{
	struct td_drive_park p = { .nr = 1, .seq = seq };
	struct td_inject_verdict v;
	const struct td_cdb_cmd *c = &rq->drive_cmd;
	int err;

	td_mutex_unlock(&d->lock);
	td_inject_check(d->inject, c->op, td_drive_cmd_sector(d, c),
			c->nr_blocks * (d->lbs >> TD_SECTOR_SHIFT), &v);
	td_mutex_lock(&d->lock);
	if (d->quiesce_seq != seq) {
		/* A reset began while we looked: the command is the queue's again. */
		put_executing_locked(d);
		return false;
	}
	if (v.hang) {
		td_list_add_tail(&rq->drive_list, &d->hung);
		d->nr_hung++;
		put_executing_locked(d);
		return false;
	}
	uint64_t delay = model_ns + (uint64_t)v.latency_us * TD_NSEC_PER_USEC;

	if (delay && !wait_delay_locked(d, td_now_ns() + delay, seq)) {
		put_executing_locked(d);
		return false;
	}
	td_mutex_unlock(&d->lock);

	if (d->async && !rq->drive_decode_err && !v.error) {
		/* Submitted: the backend's completion completes it (drive_exec.c). */
		bool taken = td_drive_exec_async(d, rq, seq);

		td_mutex_lock(&d->lock);
		put_executing_locked(d);
		return taken;
	}
	if (rq->drive_decode_err)
		err = -EIO; /* an invalid command: the drive rejects it */
	else if (v.error)
		err = v.error;
	else
		err = td_drive_exec(d, c, rq->bio, &p);
	if (p.abandoned) {
		/* Taken back while we were in the backend: @rq may be someone else's now. */
		td_mutex_lock(&d->lock);
		put_executing_locked(d);
		return false;
	}
	rq->error = err;
	td_pcpu_add(&d->commands, 1);

	struct td_list done = TD_LIST_INIT(done);

	td_list_add_tail(&rq->drive_list, &done);
	atomic_fetch_add_explicit(&d->completing, 1, memory_order_relaxed);
	d->complete(d->complete_ctx, &done);

	td_mutex_lock(&d->lock);
	put_executing_locked(d);
	atomic_fetch_sub_explicit(&d->completing, 1, memory_order_relaxed);
	return true;
}

static void *worker_main(void *arg)
{
	struct td_drive *d = arg;

	td_thread_name(d->ops->thread_name);
	td_mutex_lock(&d->lock);
	while (!d->stop) {
		/* The fence: nothing starts while a stale backend operation is out. */
		if (!d->nr_pending || d->ops_stale) {
			td_cond_wait(&d->work_cond, &d->lock);
			continue;
		}
		uint64_t service_ns;
		struct td_request *rq = model_take_locked(d, &service_ns);

		run_command_locked(d, rq, d->quiesce_seq, service_ns);
	}
	td_mutex_unlock(&d->lock);
	return NULL;
}

/* ---- the API -------------------------------------------------------------------------- */

void td_drive_attach(struct td_drive *d, td_drive_complete_fn fn, void *ctx)
{
	d->complete = fn;
	d->complete_ctx = ctx;
}

bool td_drive_submit_locked(struct td_drive *d, struct td_list *rqs)
{
	unsigned int seq = atomic_load(&d->quiesce_seq);
	struct td_list *pos;
	unsigned int n = 0;

	td_list_for_each(pos, rqs) {
		struct td_request *rq = td_list_entry(pos, struct td_request, drive_list);

		rq->drive_decode_err = td_cdb_decode(rq->cmd, rq->cmd_len, &rq->drive_cmd);
		/*
		 * A failed decode leaves drive_cmd as the request's last command was.
		 * Rejected commands address nothing: like a flush, no error rule can
		 * match them and the head does not move for them.
		 */
		if (rq->drive_decode_err)
			rq->drive_cmd = (struct td_cdb_cmd){ .op = TD_OP_FLUSH };
		rq->drive_seq = seq;
		n++;
	}
	if (!d->nr_threads) {
		/*
		 * Inline: the caller runs these as soon as it drops its queue lock.
		 * They count as claimed from now on, so a reset (which bumps the
		 * queue's generation under that lock before quiescing us) waits for
		 * them; seq_cst pairs with the load in td_drive_quiesce().
		 */
		atomic_fetch_add(&d->cmds, n * TD_DRIVE_CLAIMED);
		return true;
	}
	td_mutex_lock(&d->lock);
	td_list_splice_tail_init(rqs, &d->pending);
	d->nr_pending += n;
	/* Only idle workers wait on work_cond: the wake-up cannot go to a delayed command. */
	if (n > 1)
		td_cond_broadcast(&d->work_cond);
	else
		td_cond_signal(&d->work_cond);
	td_mutex_unlock(&d->lock);
	return false;
}

bool td_drive_is_inline(const struct td_drive *d)
{
	return d->nr_threads == 0;
}

/* Inline runners let go of @claimed commands (@handed of them completed). */
static void inline_release(struct td_drive *d, unsigned int claimed, unsigned int handed)
{
	uint64_t was = atomic_fetch_sub(&d->cmds, claimed * TD_DRIVE_CLAIMED + handed * TD_DRIVE_HANDED);

	if (td_drive_cmds_claimed(was) == claimed && atomic_load(&d->quiescing)) {
		td_mutex_lock(&d->lock);
		td_cond_broadcast(&d->idle_cond);
		td_mutex_unlock(&d->lock);
	}
}

unsigned int td_drive_run_inline(struct td_drive *d, struct td_list *batch)
{
	struct td_list done = TD_LIST_INIT(done);
	unsigned int n = 0, ran = 0;
	struct td_list *pos;

	/* Ours until we park in a backend call: nobody else touches them before. */
	td_list_for_each(pos, batch)
		n++;
	while (!td_list_empty(batch)) {
		struct td_request *rq = td_list_first_entry(batch, struct td_request, drive_list);
		const struct td_cdb_cmd *c = &rq->drive_cmd;
		struct td_drive_park p = { .nr = n, .seq = rq->drive_seq };
		struct td_inject_verdict v;

		td_list_del(&rq->drive_list);
		/* A reset began: the command is the queue's again. */
		if (atomic_load(&d->quiesce_seq) != p.seq)
			continue;
		td_inject_check(d->inject, c->op, td_drive_cmd_sector(d, c),
				c->nr_blocks * (d->lbs >> TD_SECTOR_SHIFT), &v);
		if (td_unlikely(v.hang || v.latency_us)) {
			bool keep = true;

			td_mutex_lock(&d->lock);
			if (d->quiesce_seq != p.seq) {
				keep = false;
			} else if (v.hang) {
				td_list_add_tail(&rq->drive_list, &d->hung);
				d->nr_hung++;
				keep = false;
			} else {
				keep = wait_delay_locked(
					d, td_now_ns() + (uint64_t)v.latency_us * TD_NSEC_PER_USEC,
					p.seq);
			}
			td_mutex_unlock(&d->lock);
			if (!keep)
				continue;
		}
		if (rq->drive_decode_err) {
			rq->error = -EIO;
		} else if (v.error) {
			rq->error = v.error;
		} else {
			int err = td_drive_exec(d, c, rq->bio, &p);

			if (p.abandoned) {
				/*
				 * Taken back while we were in the backend: every request of
				 * the batch may be someone else's now, and so may the links
				 * of @batch and @done. Let go of them all, unseen.
				 */
				td_list_init(batch);
				inline_release(d, n, 0);
				return 0;
			}
			rq->error = err;
		}
		td_list_add_tail(&rq->drive_list, &done);
		ran++;
	}
	td_pcpu_add(&d->commands, ran);
	if (ran) {
		atomic_fetch_add_explicit(&d->cmds, ran * TD_DRIVE_HANDED, memory_order_relaxed);
		d->complete(d->complete_ctx, &done);
	}
	/* Off the books only after the completions returned (see td_drive_quiesce()). */
	inline_release(d, n, ran);
	return ran;
}

/*
 * Drop what is pending or hung (the queue still lists them in flight), and
 * make the outstanding asynchronous operations stale, which fences the
 * drive until they have returned. Drive lock held; the quiesce sequence has
 * just moved. Return: the commands taken back.
 */
static unsigned int drop_waiting_locked(struct td_drive *d)
{
	unsigned int dropped = d->nr_pending + d->nr_hung + d->ops_current;

	if (d->ops_current) {
		d->ops_stale += d->ops_current;
		d->ops_current = 0;
		d->fences++;
	}

	assert(td_lock_held(&d->lock));
	while (!td_list_empty(&d->pending))
		td_list_del(d->pending.next);
	while (!td_list_empty(&d->hung))
		td_list_del(d->hung.next);
	d->nr_pending = 0;
	d->nr_hung = 0;
	td_cond_broadcast(&d->delay_cond); /* delayed commands give up */
	return dropped;
}

unsigned int td_drive_quiesce(struct td_drive *d)
{
	unsigned int dropped;

	td_mutex_lock(&d->lock);
	d->quiescing++;
	atomic_fetch_add(&d->quiesce_seq, 1);
	dropped = drop_waiting_locked(d);
	/* Inline runners signal without our lock: look again every millisecond too. */
	while (d->executing || td_drive_cmds_claimed(atomic_load(&d->cmds)))
		td_cond_wait_until(&d->idle_cond, &d->lock, td_now_ns() + TD_NSEC_PER_MSEC);
	d->quiescing--;
	td_mutex_unlock(&d->lock);
	return dropped;
}

unsigned int td_drive_abandon(struct td_drive *d)
{
	unsigned int dropped;
	uint64_t cmds;

	td_mutex_lock(&d->lock);
	d->quiescing++;
	/* seq_cst: pairs with park() and unpark(), which read it after changing d->cmds. */
	atomic_fetch_add(&d->quiesce_seq, 1);
	dropped = drop_waiting_locked(d);
	/* Wait for every executor that is not parked in a backend call to let go. */
	for (;;) {
		cmds = atomic_load(&d->cmds);
		if (d->executing + td_drive_cmds_claimed(cmds) <= td_drive_cmds_parked(cmds))
			break;
		td_cond_wait_until(&d->idle_cond, &d->lock, td_now_ns() + TD_NSEC_PER_MSEC);
	}
	d->quiescing--;
	td_mutex_unlock(&d->lock);
	return dropped + td_drive_cmds_parked(cmds);
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
	 * after its submitter had the answer.
	 */
	unsigned int completing = atomic_load(&d->completing);
	uint64_t cmds = atomic_load(&d->cmds);
	unsigned int executing =
		d->executing + td_drive_cmds_claimed(cmds) - td_drive_cmds_handed(cmds);

	st->executing = (executing > completing ? executing - completing : 0) + d->ops_current;
	st->backend_ops = d->ops_current;
	st->stale_ops = d->ops_stale;
	st->fences = d->fences;
	st->delayed = d->nr_delayed;
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
	td_pcpu_init(&d->commands);
	atomic_init(&d->cmds, 0);
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
		int r = pthread_create(&d->threads[i], NULL, worker_main, d);

		if (r) {
			ret = -r;
			d->nr_threads = i;
			goto out_stop_threads;
		}
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
	assert(!d->nr_pending);
	/*
	 * The queue's last bio may have ended while its worker is still on its
	 * way out of the completion function: let it get off the books first.
	 */
	d->quiescing++;
	/* Asynchronous operations too, stale ones included: they hold our pointer. */
	while (d->executing || td_drive_cmds_claimed(atomic_load(&d->cmds)) || d->ops_current ||
	       d->ops_stale)
		td_cond_wait_until(&d->idle_cond, &d->lock, td_now_ns() + TD_NSEC_PER_MSEC);
	d->quiescing--;
	td_mutex_unlock(&d->lock);
	stop_threads(d);
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
