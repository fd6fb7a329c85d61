// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * queue_run.c - running a queue: dispatch (queue.c says what it looks at),
 * the inline runs of a drive that executes in the caller's thread, and the
 * kick thread, td-kblockd (queue_int.h).
 */
#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/log.h"
#include "queue_int.h"
#include "tagdisk/drive.h"
#include "tagdisk/queue.h"
#include "tagdisk/stats.h"
#include "tagdisk/tag.h"
#include "tagdisk/trace.h"
#include "tagdisk/wlog.h"

/*
 * Inline runs. With an inline drive the thread that runs a queue executes what
 * the run dispatched, and the completions of those commands ask for more runs:
 * of the same queue (queued work), of the other users of a tag map that starved
 * (a freed tag), of an hctx waiting for the end of an overlapping write, or of
 * any queue an end_io submits to. None of them runs inside the current one:
 * a run of the queue being run becomes another pass of its loop (inline_rerun),
 * and a run of any other queue waits on this thread's deferred list, which the
 * outermost run works through after its own, one queue at a time. So a
 * thread's stack holds one queue run at most (inline_depth), where it could
 * otherwise nest hctx1 -> hctx2 -> hctx1 without bound.
 *
 * A deferred queue is pinned: it counts one more bio submitted to its drain
 * count until its run is done, so no drainer can find it empty and destroy it
 * while it waits here. A list that is full hands the run to the queue's
 * td-kblockd instead (pinned by the queue itself).
 */
#define INLINE_DEFERRED_MAX 64

static _Thread_local struct td_queue *inline_runner;
static _Thread_local bool inline_rerun;
static _Thread_local unsigned int inline_depth;
static _Thread_local bool inline_draining;
static _Thread_local struct td_queue *inline_deferred[INLINE_DEFERRED_MAX];
static _Thread_local unsigned int nr_inline_deferred;
/*
 * This thread never executes a command (td-kblockd): with an inline drive,
 * what it dispatches goes to the drive's own thread (td_drive_hand_off), so
 * that a backend call that hangs can never stop it redispatching what a
 * reset requeued.
 */
static _Thread_local bool never_executes;

/* ---- dispatch ------------------------------------------------------------------------- */

void td_queue_drain_elevator_locked(struct td_queue *q)
{
	struct td_request *rq;

	assert(td_lock_held(&q->lock));
	while ((rq = td_elv_dispatch(q->elv, true))) {
		rq->state = TD_RQ_DISPATCH;
		td_list_add_tail(&rq->queuelist, &q->dispatch);
		q->nr_dispatch++;
	}
}

static struct td_request *dispatch_head_locked(struct td_queue *q)
{
	if (td_list_empty(&q->dispatch)) {
		struct td_request *rq = td_elv_dispatch(q->elv, false);

		if (!rq)
			return NULL;
		rq->state = TD_RQ_DISPATCH;
		td_list_add_tail(&rq->queuelist, &q->dispatch);
		q->nr_dispatch++;
	}
	return td_list_first_entry(&q->dispatch, struct td_request, queuelist);
}

/*
 * Move what can go from the dispatch list to the drive. Killed requests are
 * ended onto @ends. Return: the number of requests sent to the drive.
 */
static unsigned int dispatch_locked(struct td_queue *q, struct td_bio_list *ends,
				    struct td_list *batch, uint64_t now)
{
	unsigned int sent = 0;

	assert(td_lock_held(&q->lock));
	if (q->stopped || atomic_load_explicit(&q->dead, memory_order_relaxed))
		return 0;
	/* The tags of one pass are started as one go: see td_tag_start_at(). */
	q->tag_cursor = TD_TAG_CURSOR_HOME;
	while (!q->barrier_inflight) {
		struct td_request *rq = dispatch_head_locked(q);

		if (!rq)
			break;
		/* A flush waits until everything before it has completed. */
		if (rq->op == TD_OP_FLUSH && q->nr_in_flight)
			break;
		if (td_op_is_write(rq->op) && !td_queue_write_reserve_locked(q, rq))
			break;

		q->tag_starved = false;
		enum td_prep_result res = q->prep(q, rq);

		if (res != TD_PREP_OK && (rq->flags & TD_RQ_WRITE_TREE))
			td_queue_write_release_locked(q, rq);

		if (!now)
			now = td_queue_now(q);
		if (res == TD_PREP_DEFER) {
			assert(rq->tag == TD_TAG_NONE);
			td_stats_add(q->stats, TD_STAT_DEFERRED, 1);
			/*
			 * Waiting for a tag needs no timer: the map is marked starved,
			 * so whoever ends a tag next kicks every user of the map (at
			 * once, or through its timer after a reset). Any other deferral
			 * with nothing in flight here would wait for nothing.
			 */
			if (!q->nr_in_flight && !q->defer_retry && !q->tag_starved) {
				q->defer_retry = true;
				td_cond_signal(&q->timer_cond);
			}
			break;
		}
		td_list_del(&rq->queuelist);
		q->nr_dispatch--;
		if (res == TD_PREP_KILL) {
			assert(rq->tag == TD_TAG_NONE);
			td_stats_add(q->stats, TD_STAT_KILLED, 1);
			td_queue_end_request_locked(q, rq, TD_TAG_NONE, rq->error ? rq->error : -EIO,
						    ends, now);
			continue;
		}
		assert(res == TD_PREP_OK && rq->tag >= 0 && rq->cmd_len);
		rq->state = TD_RQ_INFLIGHT;
		rq->gen = q->gen;
		rq->error = 0;
		rq->dispatch_ns = now;
		td_list_add_tail(&rq->queuelist, &q->in_flight);
		q->nr_in_flight++;
		q->nr_dispatched++;
		if (rq->op == TD_OP_FLUSH) {
			q->barrier_inflight = true;
			/* Issued now: its log entry follows every write completed so far. */
			if (q->wlog && !rq->wlog_flush && td_wlog_on(q->wlog))
				rq->wlog_flush = td_wlog_reserve_flush(q->wlog);
		}
		td_queue_trace_rq(q, TD_TA_DISPATCH, rq, 0, now);
		td_list_add_tail(&rq->drive_list, batch);
		sent++;
	}
	if (sent)
		td_drive_submit_locked(q->drive, batch);
	return sent;
}

unsigned int td_queue_inline_depth(void)
{
	return inline_depth;
}

/*
 * A run of @q is asked for. Inside an inline run, leave it to the current run's
 * next pass (@q is being run) or to the outermost run (see the top of this file).
 * @locked: the caller holds @q's lock. Return: true when it was left so; false
 * when the caller runs @q itself.
 */
bool td_queue_inline_defer(struct td_queue *q, bool locked)
{
	struct td_queue *owner = q->parent ? q->parent : q;

	if (!inline_runner)
		return false;
	if (inline_runner == q) {
		inline_rerun = true;
		return true;
	}
	for (unsigned int i = 0; i < nr_inline_deferred; i++)
		if (inline_deferred[i] == q)
			return true;
	if (nr_inline_deferred == INLINE_DEFERRED_MAX) {
		/* Full: td-kblockd runs it. Submitters call here holding q's lock. */
		if (locked)
			td_queue_kick_locked(q, false);
		else
			td_queue_kick(q);
		return true;
	}
	/* The pin: dropped by td_queue_bio_done() once the run is done. */
	td_pcpu_add(&owner->submitted, 1);
	inline_deferred[nr_inline_deferred++] = q;
	return true;
}

/* The outermost run's tail: run each deferred queue, oldest first, then drop its pin. */
static void run_deferred(void)
{
	inline_draining = true;
	while (nr_inline_deferred) {
		struct td_queue *q = inline_deferred[0];

		nr_inline_deferred--;
		memmove(inline_deferred, inline_deferred + 1,
			nr_inline_deferred * sizeof(inline_deferred[0]));
		td_mutex_lock(&q->lock);
		td_queue_run_and_unlock(q, 0, NULL);
		td_queue_bio_done(q);
	}
	inline_draining = false;
}

/*
 * Dispatch, with q->lock held on entry and released on return; then end the
 * bios on @ends (may be NULL) and those prep killed. With an inline drive,
 * execute what was dispatched in this thread and go round again while that
 * freed tags for more; then, unless a run further out does it, run the queues
 * the completions asked for meanwhile.
 */
void td_queue_run_and_unlock(struct td_queue *q, uint64_t now, struct td_bio_list *ends_in)
{
	struct td_bio_list local;
	struct td_bio_list *ends = ends_in ? ends_in : &local;
	bool is_inline = td_drive_is_inline(q->drive);

	assert(td_lock_held(&q->lock));
	/* Runs never nest: callers inside an inline run go through td_queue_inline_defer(). */
	assert(!inline_runner);
	if (!ends_in)
		td_bio_list_init(&local);
	for (;;) {
		struct td_list batch = TD_LIST_INIT(batch);

		dispatch_locked(q, ends, &batch, now);
		now = 0; /* later passes read the clock when they dispatch */

		td_mutex_unlock(&q->lock);
		td_queue_end_bios(q, ends);
		if (!is_inline)
			return;
		if (never_executes) {
			td_drive_hand_off(q->drive, &batch);
			return;
		}

		inline_runner = q;
		inline_rerun = false;
		inline_depth++;
		td_drive_run_inline(q->drive, &batch);
		inline_depth--;
		bool again = inline_rerun;

		inline_runner = NULL;
		/* A completion that saw queued work asked for another pass. */
		if (!again)
			break;
		td_mutex_lock(&q->lock);
	}
	if (!inline_draining && nr_inline_deferred)
		run_deferred();
}

void td_queue_run(struct td_queue *q)
{
	if (q->mode == TD_MODE_MQ) {
		for (unsigned int i = 0; i < q->nr_hw; i++)
			td_queue_run(q->hctxs[i]);
		return;
	}
	if (q->mode != TD_MODE_RQ)
		return;
	if (td_queue_inline_defer(q, false))
		return;
	td_mutex_lock(&q->lock);
	td_queue_run_and_unlock(q, 0, NULL);
}

/* ---- the kick thread ------------------------------------------------------------------ */

void td_queue_kick_locked(struct td_queue *q, bool map)
{
	assert(td_lock_held(&q->lock));
	if (!q->kblockd_started)
		return; /* bio mode: nothing to run */
	q->kick_map |= map;
	if (!q->kick_pending) {
		q->kick_pending = true;
		td_cond_signal(&q->kblockd_cond);
	}
}

void td_queue_kick(struct td_queue *q)
{
	if (q->mode == TD_MODE_MQ) {
		for (unsigned int i = 0; i < q->nr_hw; i++)
			td_queue_kick(q->hctxs[i]);
		return;
	}
	td_mutex_lock(&q->lock);
	td_queue_kick_locked(q, false);
	td_mutex_unlock(&q->lock);
}

void *td_queue_kblockd_main(void *arg)
{
	struct td_queue *q = arg;

	td_thread_name("td-kblockd");
	never_executes = true;
	td_mutex_lock(&q->lock);
	for (;;) {
		while (!q->kick_pending && !q->kblockd_stop)
			td_cond_wait(&q->kblockd_cond, &q->lock);
		if (q->kblockd_stop)
			break;
		bool map = q->kick_map;

		q->kick_pending = false;
		q->kick_map = false;
		if (map) {
			/* Every user of the map, us included, may have starved for a tag. */
			td_mutex_unlock(&q->lock);
			td_tag_map_kick(q->tags);
			td_mutex_lock(&q->lock);
		}
		td_queue_run_and_unlock(q, 0, NULL);
		td_mutex_lock(&q->lock);
	}
	td_mutex_unlock(&q->lock);
	return NULL;
}

