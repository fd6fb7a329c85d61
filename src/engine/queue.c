// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * queue.c - the request queue's data path: submission and insert, the
 * in-flight write tree, completion and drain. Dispatch, runs and the kick
 * thread are in queue_run.c, resets and timeouts in timeout.c, creation and
 * settings in queue_setup.c (queue_int.h).
 *
 * Where a request is (all guarded by q->lock):
 *
 *   elevator      QUEUED requests of the current barrier epoch, sorted and
 *                 merged by the elevator;
 *   q->dispatch   DISPATCH requests in the order they will be prepped: what
 *                 the elevator handed out, everything drained ahead of a
 *                 flush, the flush itself, and requeued requests at the head;
 *   q->in_flight  INFLIGHT requests in dispatch order (so the head is the
 *                 oldest command, which the timeout checks);
 *   q->write_tree the INFLIGHT writes, by sector (in mq mode one tree in the mq
 *                 queue for all its hctxs, under its write_lock, so the rule
 *                 holds across CPUs). They never overlap (a write
 *                 overlapping one in flight waits at the head of q->dispatch),
 *                 so the tree holds disjoint intervals and one lookup finds a
 *                 conflict.
 *
 * Dispatch (dispatch_locked) looks at the head of q->dispatch, refilling it
 * from the elevator when empty; stops at a flush until nothing is in flight,
 * and stops entirely while a flush is in flight; stops at a conflicting
 * write; otherwise calls prep: OK sends the request to the drive (in one
 * batch per run), DEFER leaves it at the head and stops (a tag ending runs the
 * queue again), KILL fails it.
 *
 * Completion (td_queue_complete, called by the drive) ends the tag, then ends
 * the request: stats, trace, back to the pool, and finally the bios' end_io
 * with no lock held. Completions whose generation is older than the queue's
 * belong to commands a reset has already taken back, and are ignored. Every
 * request of the drive's list is dealt with before anything runs a queue
 * (which, with an inline drive, may execute and park in a backend call that
 * a reset leaves behind, requeueing whatever is still on a list of ours).
 *
 * Bio mode and stacking make_request functions (windows) are in queue_bio.c.
 *
 * Who runs the queue, and so, with an inline drive, executes the commands it
 * dispatches: submitters, and the drive's completion path. Nobody else.
 * Resets, the timer, elevator and depth changes call td_queue_kick_locked(),
 * which hands the run to the queue's own thread, td-kblockd (Linux's kblockd
 * does the same job); td-kblockd dispatches but executes nothing itself (an
 * inline drive's own thread does), so a slow or hung command holds up the
 * submitter it came from, never the admin socket, the timeouts or the
 * redispatch of what a reset requeued.
 *
 * Drain: q->submitted and q->ended count bios at submission and after
 * end_io, per CPU; a drainer waits for the two sums to meet.
 */
#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/log.h"
#include "queue_int.h"
#include "tagdisk/queue.h"
#include "tagdisk/stats.h"
#include "tagdisk/tag.h"
#include "tagdisk/trace.h"
#include "tagdisk/wlog.h"

/* ---- ending bios ---------------------------------------------------------------------- */

static void account_bio_list(struct td_queue *q, struct td_bio_list *bl)
{
	for (unsigned int i = 0; i < bl->nr_acct; i++)
		td_stats_io_account(q->stats, (enum td_op)bl->acct[i].op, bl->acct[i].nr_sectors,
				    bl->acct[i].latency_ns, bl->acct[i].error);
	bl->nr_acct = 0;
}

static void bio_list_add_chain(struct td_bio_list *bl, struct td_bio *chain, int error)
{
	struct td_bio *last = NULL;

	for (struct td_bio *bio = chain; bio; bio = bio->next) {
		bio->error = error;
		last = bio;
	}
	if (!last)
		return;
	if (bl->tail)
		bl->tail->next = chain;
	else
		bl->head = chain;
	bl->tail = last;
}

/*
 * A bio has ended: drop it from the drain count. Nothing of the queue may be
 * touched after the count reaches zero, because a drainer may then destroy
 * it. Without drainers the count just drops; a drainer that arrives at that
 * very moment may miss the wake-up, which is why td_queue_drain() also
 * looks again every few milliseconds. With drainers, the last bio takes the
 * lock to wake them, and the drainer cannot return before it lets go.
 */
void td_queue_bio_done(struct td_queue *q)
{
	/* An hctx counts nothing: its mq queue holds the drain count. */
	if (q->parent)
		q = q->parent;
	/*
	 * With nobody draining, the count is the last thing of @q we touch. A
	 * drainer that arrives just after the check misses our wake-up and
	 * sees the count when it looks again (wait_drained() polls).
	 */
	if (td_likely(!atomic_load(&q->drain_waiters))) {
		td_pcpu_add(&q->ended, 1);
		return;
	}
	td_mutex_lock(&q->lock);
	td_pcpu_add(&q->ended, 1);
	td_cond_broadcast(&q->drain_cond);
	td_mutex_unlock(&q->lock);
}

void td_queue_end_bio(struct td_queue *q, struct td_bio *bio, int error)
{
	bio->error = error;
	bio->end_io(bio, error);
	td_queue_bio_done(q);
}

void td_queue_end_bios(struct td_queue *q, struct td_bio_list *bl)
{
	struct td_bio *bio = bl->head;

	if (bl->wlog_flushes) {
		td_wlog_write_flushes(q->wlog, bl->wlog_flushes);
		bl->wlog_flushes = NULL;
	}
	account_bio_list(q, bl);
	if (bl->nr_rqs) {
		td_stats_io_end_n(q->stats, bl->now, bl->nr_rqs);
		bl->nr_rqs = 0;
	}

	while (bio) {
		struct td_bio *next = bio->next;

		bio->next = NULL;
		td_queue_end_bio(q, bio, bio->error);
		bio = next;
	}
	bl->head = bl->tail = NULL;
}

/* ---- the in-flight write tree --------------------------------------------------------- */

static struct td_request *write_node_rq(struct td_rb_node *node)
{
	return td_rb_entry(node, struct td_request, write_node);
}

/* Return: true when @rq overlaps a write in @q's tree. */
static bool write_conflict_locked(struct td_queue *q, const struct td_request *rq)
{
	uint64_t end = td_rq_end_sector(rq);
	struct td_rb_node *node = q->write_tree.node;
	struct td_request *best = NULL;

	/* The in-flight write starting last before @rq's end is the only one that can overlap. */
	while (node) {
		struct td_request *w = write_node_rq(node);

		if (w->sector < end) {
			best = w;
			node = node->right;
		} else {
			node = node->left;
		}
	}
	return best && td_rq_end_sector(best) > rq->sector;
}

static void write_tree_add_locked(struct td_queue *q, struct td_request *rq)
{
	struct td_rb_node **link = &q->write_tree.node;
	struct td_rb_node *parent = NULL;

	while (*link) {
		parent = *link;
		link = rq->sector < write_node_rq(parent)->sector ? &parent->left : &parent->right;
	}
	td_rb_insert(&q->write_tree, &rq->write_node, parent, link);
	rq->flags |= TD_RQ_WRITE_TREE;
}

/*
 * Put the write @rq in the tree of writes in flight unless it overlaps one
 * there. An hctx uses its mq queue's tree, under the write lock, and when it
 * must wait, marks itself blocked so that the end of the write it waits for
 * runs it again. Return: true when @rq went in.
 */
bool td_queue_write_reserve_locked(struct td_queue *q, struct td_request *rq)
{
	struct td_queue *mq = q->parent;
	bool ok;

	if (!mq) {
		if (write_conflict_locked(q, rq))
			return false;
		write_tree_add_locked(q, rq);
		return true;
	}
	td_mutex_lock(&mq->write_lock);
	ok = !write_conflict_locked(mq, rq);
	if (ok) {
		write_tree_add_locked(mq, rq);
	} else if (!atomic_load_explicit(&q->write_blocked, memory_order_relaxed)) {
		atomic_store_explicit(&q->write_blocked, true, memory_order_relaxed);
		mq->nr_write_blocked++;
	}
	td_mutex_unlock(&mq->write_lock);
	return ok;
}

/* Take @rq out of the tree of writes in flight (see td_queue_write_reserve_locked()). */
void td_queue_write_release_locked(struct td_queue *q, struct td_request *rq)
{
	struct td_queue *mq = q->parent;

	rq->flags &= ~TD_RQ_WRITE_TREE;
	if (!mq) {
		td_rb_erase(&q->write_tree, &rq->write_node);
		return;
	}
	td_mutex_lock(&mq->write_lock);
	td_rb_erase(&mq->write_tree, &rq->write_node);
	if (mq->nr_write_blocked)
		q->kick_writers = true;
	td_mutex_unlock(&mq->write_lock);
}

/* An hctx ended a write: run the hctxs that stopped at an overlapping one. No lock held. */
static void run_write_blocked(struct td_queue *mq)
{
	for (unsigned int i = 0; i < mq->nr_hw; i++) {
		struct td_queue *h = mq->hctxs[i];

		if (!atomic_load_explicit(&h->write_blocked, memory_order_relaxed))
			continue;
		td_mutex_lock(&mq->write_lock);
		bool was = atomic_load_explicit(&h->write_blocked, memory_order_relaxed);

		if (was) {
			atomic_store_explicit(&h->write_blocked, false, memory_order_relaxed);
			mq->nr_write_blocked--;
		}
		td_mutex_unlock(&mq->write_lock);
		if (was)
			td_queue_run(h);
	}
}

/* ---- request lifecycle ---------------------------------------------------------------- */

bool td_queue_detach_inflight_locked(struct td_queue *q, struct td_request *rq)
{
	bool kick;

	assert(td_lock_held(&q->lock));
	assert(rq->state == TD_RQ_INFLIGHT && rq->tag >= 0);
	kick = td_tag_end(q->tags, rq->tag);
	rq->tag = TD_TAG_NONE;
	td_list_del(&rq->queuelist);
	q->nr_in_flight--;
	if (rq->flags & TD_RQ_WRITE_TREE)
		td_queue_write_release_locked(q, rq);
	if (rq->op == TD_OP_FLUSH)
		q->barrier_inflight = false;
	td_elv_completed(q->elv, rq);
	return kick;
}

void td_queue_end_request_locked(struct td_queue *q, struct td_request *rq, int tag, int error,
				 struct td_bio_list *ends, uint64_t now)
{
	assert(td_lock_held(&q->lock));
	td_trace_emit(q->trace, TD_TA_COMPLETE, rq->op, rq->flags & TD_RQ_FUA, rq->sector,
		      rq->nr_sectors, rq->pid, tag, error, now);
	if (rq->wlog_flush) {
		/* A flush that failed (one that succeeded was taken by td_queue_complete). */
		rq->wlog_flush->err = error ? error : -EIO;
		rq->wlog_flush->next = ends->wlog_flushes;
		ends->wlog_flushes = rq->wlog_flush;
		rq->wlog_flush = NULL;
	}
	/* Counters are lock-free: keep them out of the critical section while there is room. */
	if (ends->nr_acct == TD_ARRAY_SIZE(ends->acct))
		account_bio_list(q, ends);
	ends->acct[ends->nr_acct].op = (uint8_t)rq->op;
	ends->acct[ends->nr_acct].nr_sectors = rq->nr_sectors;
	ends->acct[ends->nr_acct].error = (int16_t)error;
	ends->acct[ends->nr_acct].latency_ns = now - rq->start_ns;
	ends->nr_acct++;
	ends->nr_rqs++;
	ends->now = now;
	bio_list_add_chain(ends, rq->bio, error);
	td_rq_pool_put_locked(&q->pool, rq);
}

/*
 * The write log's entry for @rq, completing: a write is reserved now, in the
 * same hold of the lock that takes it off the in-flight list, so that a flush
 * dispatched after (which needs that list empty) is numbered after it; a
 * flush's entry was reserved when it was dispatched. @wb gets them.
 */
static void wlog_complete_locked(struct td_queue *q, struct td_request *rq, bool logging,
				 struct td_wlog_batch *wb)
{
	assert(td_lock_held(&q->lock));
	if (rq->wlog_flush) {
		td_wlog_batch_add_flush(wb, rq->wlog_flush, rq->error);
		rq->wlog_flush = NULL;
	} else if (logging && !rq->error && td_op_is_write(rq->op)) {
		td_wlog_reserve_write(q->wlog, wb, rq->op, rq->flags & TD_RQ_FUA, rq->sector,
				      rq->nr_sectors, rq->bio, rq->nr_bios);
	}
}

void td_queue_complete_part(struct td_queue *q, struct td_list *done,
			    struct td_queue_completion *c)
{
	struct td_wlog_batch wb;
	struct td_list *pos, *n;
	bool kick = false;
	bool logging = q->wlog && td_wlog_on(q->wlog);

	td_wlog_batch_init(&wb);
	td_mutex_lock(&q->lock);
	uint64_t now = td_queue_now(q);

	td_list_for_each_safe(pos, n, done) {
		struct td_request *rq = td_list_entry(pos, struct td_request, drive_list);

		td_list_del(&rq->drive_list);
		/* A reset took this command back; its result does not count. */
		if (rq->state != TD_RQ_INFLIGHT || rq->gen != q->gen)
			continue;
		int tag = rq->tag;

		if (td_wlog_batch_full(&wb)) {
			/* The bios of those entries have not ended: their data is still there. */
			td_mutex_unlock(&q->lock);
			td_wlog_write_batch(q->wlog, &wb);
			td_mutex_lock(&q->lock);
			if (rq->state != TD_RQ_INFLIGHT || rq->gen != q->gen)
				continue;
		}
		kick |= td_queue_detach_inflight_locked(q, rq);
		if (q->wlog)
			wlog_complete_locked(q, rq, logging, &wb);
		td_queue_end_request_locked(q, rq, tag, rq->error, &c->ends, now);
	}
	c->kick_map |= kick;
	c->writers |= q->kick_writers;
	q->kick_writers = false;
	if (q->nr_dispatch || td_elv_has_work(q->elv)) {
		if (c->nr_runs < TD_ARRAY_SIZE(c->runs))
			c->runs[c->nr_runs++] = q;
		else
			c->run_all = true;
	}
	td_mutex_unlock(&q->lock);

	/* Before anyone hears of the completions: the log has what the drive acknowledged. */
	if (!td_wlog_batch_empty(&wb))
		td_wlog_write_batch(q->wlog, &wb);
}

void td_queue_complete_finish(struct td_queue *q, struct td_queue_completion *c)
{
	if (c->writers)
		run_write_blocked(q->parent);
	if (c->kick_map)
		td_tag_map_kick(q->tags);
	if (c->run_all)
		td_queue_run(q->parent); /* an mq queue runs every hctx */
	else
		for (unsigned int i = 0; i < c->nr_runs; i++)
			td_queue_run(c->runs[i]);
	/* Last: once the final bio has ended, a drainer may destroy the queue. */
	td_queue_end_bios(q, &c->ends);
}

void td_queue_complete(void *ctx, struct td_list *done)
{
	struct td_queue *q = ctx;
	struct td_queue_completion c;

	td_queue_completion_init(&c);
	td_queue_complete_part(q, done, &c);
	td_queue_complete_finish(q, &c);
}

/* ---- submission ----------------------------------------------------------------------- */

/* Put a flush behind everything queued so far: the elevator drains to the dispatch list. */
static void insert_flush_locked(struct td_queue *q, struct td_request *rq, uint64_t now)
{
	td_queue_drain_elevator_locked(q);
	rq->state = TD_RQ_DISPATCH;
	td_list_add_tail(&rq->queuelist, &q->dispatch);
	q->nr_dispatch++;
	td_queue_trace_rq(q, TD_TA_INSERT, rq, 0, now);
}

static void account_started(struct td_queue *q, uint64_t now, int64_t delta)
{
	if (delta > 0)
		td_stats_io_start_n(q->stats, now, (uint64_t)delta);
	else if (delta < 0)
		td_stats_io_end_n(q->stats, now, (uint64_t)-delta);
}

/*
 * Merge @bio into a queued request, or give it a request of its own. May wait
 * for the pool. On a dead queue @bio goes to @ends with -EIO instead.
 * Return: the change in the number of requests: 1 when @bio took a new
 * request, 0 when it merged (or failed), -1 when the merge also joined two
 * requests. The caller applies it to the stats once per batch.
 */
static int queue_bio_locked(struct td_queue *q, struct td_bio *bio, uint64_t now,
			    struct td_bio_list *ends)
{
	struct td_request *rq;

	if (td_unlikely(atomic_load_explicit(&q->dead, memory_order_relaxed)))
		goto out_dead;
	td_queue_trace_bio(q, TD_TA_QUEUE, bio, TD_TAG_NONE, 0, now);
	if (bio->op != TD_OP_FLUSH) {
		enum td_elv_merge type = td_elv_merge(q->elv, bio, &rq);

		if (type != TD_ELV_NO_MERGE) {
			struct td_request *gone = td_elv_merge_bio(q->elv, rq, bio, type);

			td_stats_merge(q->stats, bio->op, type == TD_ELV_FRONT_MERGE);
			td_queue_trace_bio(q, type == TD_ELV_FRONT_MERGE ? TD_TA_FRONTMERGE : TD_TA_BACKMERGE,
				  bio, TD_TAG_NONE, 0, now);
			if (gone) {
				/*
				 * The grown request swallowed its neighbour: a merge too, as
				 * Linux counts it, so that every bio is either a completed
				 * request or a merge.
				 */
				td_stats_merge(q->stats, bio->op, type == TD_ELV_FRONT_MERGE);
				td_rq_pool_put_locked(&q->pool, gone);
				return -1;
			}
			return 0;
		}
	}

	bool wait = !q->pool.nr_free;

	rq = td_rq_pool_get_locked(&q->pool, &q->lock);
	if (td_unlikely(atomic_load_explicit(&q->dead, memory_order_relaxed))) {
		/* The queue died while we waited for a request. */
		td_rq_pool_put_locked(&q->pool, rq);
		goto out_dead;
	}
	if (wait)
		now = td_queue_now(q); /* the pool made us wait */
	td_rq_init_from_bio(rq, bio);
	rq->seq = q->seq++;
	rq->start_ns = now;
	td_queue_trace_rq(q, TD_TA_GETRQ, rq, 0, now);
	if (rq->op == TD_OP_FLUSH) {
		insert_flush_locked(q, rq, now);
		return 1;
	}
	td_elv_add(q->elv, rq, now);
	td_queue_trace_rq(q, TD_TA_INSERT, rq, 0, now);
	return 1;

out_dead:
	bio->next = NULL;
	bio_list_add_chain(ends, bio, -EIO);
	return 0;
}

void td_queue_submit(struct td_queue *q, struct td_bio *bio)
{
	struct td_bio_list ends;

	assert(bio->end_io);
	td_bio_list_init(&ends);
	td_pcpu_add(&q->submitted, 1);
	if (q->make_request && td_queue_stacked_make_request(q, bio))
		return;
	if (q->mode == TD_MODE_BIO) {
		td_queue_bio_make_request(q, bio);
		return;
	}
	if (q->mode == TD_MODE_MQ) {
		bio->next = NULL;
		td_queue_mq_submit(q, bio);
		return;
	}
	td_mutex_lock(&q->lock);
	uint64_t now = td_queue_now(q);

	int delta = queue_bio_locked(q, bio, now, &ends);

	if (delta > 0)
		td_stats_io_start(q->stats, now);
	else if (delta < 0)
		td_stats_io_cancel(q->stats, now);
	if (td_queue_inline_defer(q, true)) {
		td_mutex_unlock(&q->lock);
		td_queue_end_bios(q, &ends);
		return;
	}
	td_queue_run_and_unlock(q, now, &ends); /* insert and dispatch under one hold of the lock */
}

/*
 * Insert the bios of @list (already counted in the drain count) and run the
 * queue: the rq path of td_queue_submit_list(), and an hctx's insert.
 */
static void insert_list(struct td_queue *q, struct td_bio *list)
{
	struct td_bio_list ends;
	struct td_bio *bio = list;

	assert(td_lock_held(&q->lock));
	td_bio_list_init(&ends);
	uint64_t now = td_queue_now(q);
	int64_t started = 0; /* requests gained, not yet counted in the stats */

	do {
		struct td_bio *next = bio->next;

		assert(bio->end_io);
		/*
		 * Unplug before waiting for a request, as 2.6 does in get_request_wait():
		 * the requests this batch holds must reach the drive, or nothing would
		 * ever complete to refill the pool.
		 */
		if (!q->pool.nr_free) {
			/* Count them before they can complete. */
			account_started(q, now, started);
			started = 0;
			td_mutex_unlock(&q->lock);
			td_queue_run(q);
			td_mutex_lock(&q->lock);
		}
		started += queue_bio_locked(q, bio, now, &ends);
		bio = next;
	} while (bio);
	account_started(q, now, started);
	if (td_queue_inline_defer(q, true)) {
		td_mutex_unlock(&q->lock);
		td_queue_end_bios(q, &ends);
		return;
	}
	td_queue_run_and_unlock(q, now, &ends);
}

void td_queue_submit_list(struct td_queue *q, struct td_bio *list)
{
	struct td_bio *bio = list; /* @list is never NULL; the walk ends at NULL */

	if (q->mode == TD_MODE_BIO || q->make_request) {
		do {
			struct td_bio *next = bio->next;

			bio->next = NULL;
			td_queue_submit(q, bio);
			bio = next;
		} while (bio);
		return;
	}
	uint64_t n = 0;

	for (bio = list; bio; bio = bio->next)
		n++;
	td_pcpu_add(&q->submitted, n);
	if (q->mode == TD_MODE_MQ) {
		td_queue_mq_submit(q, list);
		return;
	}
	td_mutex_lock(&q->lock);
	insert_list(q, list);
}

void td_queue_insert_ctxs_locked(struct td_queue *hctx, struct td_bio *list)
{
	struct td_bio *queued_tail;
	/* Taken under the hctx lock, so bios are inserted in the order they were queued. */
	struct td_bio *queued = td_queue_mq_collect_locked(hctx, &queued_tail);

	if (queued) {
		queued_tail->next = list;
		list = queued;
	}
	if (!list) {
		/* Whoever took ours inserts and runs them. */
		td_mutex_unlock(&hctx->lock);
		return;
	}
	insert_list(hctx, list);
}

void td_queue_insert_ctxs(struct td_queue *hctx)
{
	td_mutex_lock(&hctx->lock);
	td_queue_insert_ctxs_locked(hctx, NULL);
}

/* ---- drain ---------------------------------------------------------------------------- */

/* Wait until nothing is outstanding or CLOCK_MONOTONIC passes @deadline. Return: drained. */
static bool wait_drained(struct td_queue *q, uint64_t deadline)
{
	bool drained;

	td_mutex_lock(&q->lock);
	atomic_fetch_add(&q->drain_waiters, 1);
	while (td_queue_outstanding(q) > 0) {
		uint64_t now = td_now_ns();

		if (now >= deadline)
			break;
		/* bio_done() may miss a drainer that just arrived: look again now and then. */
		td_cond_wait_until(&q->drain_cond, &q->lock,
				   TD_MIN(now + 5 * TD_NSEC_PER_MSEC, deadline));
	}
	atomic_fetch_sub(&q->drain_waiters, 1);
	drained = td_queue_outstanding(q) == 0;
	td_mutex_unlock(&q->lock);
	return drained;
}

void td_queue_drain(struct td_queue *q)
{
	wait_drained(q, UINT64_MAX);
}

int td_queue_drain_timeout(struct td_queue *q, uint32_t timeout_ms)
{
	if (wait_drained(q, td_now_ns() + (uint64_t)timeout_ms * TD_NSEC_PER_MSEC))
		return 0;
	if (q->mode == TD_MODE_RQ)
		return (int)td_queue_abort(q, timeout_ms);
	if (q->mode == TD_MODE_MQ) {
		/*
		 * New bios fail at once; bios a submitter has just put on a software
		 * queue are failed by its own insert, which finds the hctx dead.
		 */
		atomic_store(&q->dead, true);
		return (int)td_queue_abort_set(q->hctxs, q->nr_hw, timeout_ms);
	}

	/* Bio mode: each bio is in its submitter's hands; only new ones can be refused. */
	td_mutex_lock(&q->lock);
	atomic_store(&q->dead, true);
	td_mutex_unlock(&q->lock);
	uint64_t left = td_queue_outstanding(q);

	td_warnx("queue: %llu bio%s still outstanding after %u ms; new ones fail with EIO",
		 (unsigned long long)left, left == 1 ? "" : "s", timeout_ms);
	return -ETIMEDOUT;
}

/* ---- tags ----------------------------------------------------------------------------- */

int td_queue_start_tag(struct td_queue *q, struct td_request *rq)
{
	assert(td_lock_held(&q->lock));
	int tag = td_tag_start_at(q->tags, rq, &q->tag_cursor);

	if (tag < 0) {
		q->tag_starved = true;
		return -EBUSY;
	}
	rq->tag = tag;
	return 0;
}
