// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * queue.c - the request queue: insert, dispatch, barriers, completion, reset.
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
 *   q->write_tree the INFLIGHT writes, by sector. They never overlap (a write
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
 * Completion (queue_complete, called by the drive) ends the tag, then ends
 * the request: stats, trace, back to the pool, and finally the bios' end_io
 * with no lock held. Completions whose generation is older than the queue's
 * belong to commands a reset has already taken back, and are ignored.
 *
 * Drain: q->outstanding counts bios between submission and end_io.
 *
 * The timer thread (rq mode) runs a deferred queue again after a short delay
 * when nothing in flight would do it, and resets the drive when the oldest
 * command is older than command_timeout_ms.
 */
#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/log.h"
#include "tagdisk/cdb.h"
#include "tagdisk/drive.h"
#include "tagdisk/queue.h"
#include "tagdisk/rangelock.h"
#include "tagdisk/stats.h"
#include "tagdisk/tag.h"
#include "tagdisk/trace.h"

/* How soon a queue whose prep deferred, with nothing in flight, is run again. */
#define TD_DEFER_RETRY_NS (1 * TD_NSEC_PER_MSEC)
/* How often the timer looks at the oldest command when no timeout is shorter. */
#define TD_TIMER_PERIOD_NS (100 * TD_NSEC_PER_MSEC)

struct td_queue {
	/* Fixed at creation; read without the lock, so kept off the lock's cache line. */
	enum td_queue_mode mode;
	uint64_t capacity;	 /* sectors, whole disk */
	uint32_t lbs;		 /* logical block size, bytes */
	uint32_t max_sectors;
	uint32_t nr_requests;
	struct td_drive *drive;
	struct td_tag_map *tags;
	struct td_stats *stats;
	struct td_trace *trace;
	struct td_rangelock *rangelock;
	struct td_clock clock;
	td_prep_fn prep;
	td_make_request_fn make_request;
	void *make_request_data;
	uint64_t window_start; /* sectors; window_nr 0: no window */
	uint64_t window_nr;

	_Alignas(64) struct td_mutex lock;
	struct td_mutex reset_lock; /* serialises resets; taken before lock */

	/* Guarded by lock. */
	struct td_elv_tunables tunables;
	struct td_elv_queue eq; /* what the elevator sees: points at tunables and clock */
	struct td_elevator *elv;
	struct td_rq_pool pool;
	struct td_list dispatch;
	struct td_list in_flight;
	struct td_rb_root write_tree;
	uint32_t nr_dispatch;
	uint32_t nr_in_flight;
	uint64_t seq;
	unsigned int gen;     /* bumped by every reset */
	unsigned int stopped; /* dispatch is stopped while non-zero (reset in progress) */
	bool barrier_inflight;
	bool defer_retry; /* prep deferred with nothing in flight: the timer reruns us */
	uint32_t command_timeout_ms;
	uint32_t max_retries;
	_Atomic unsigned int drain_waiters; /* changed under lock, read without it */
	struct td_cond drain_cond;

	/* Timer thread; guarded by lock. */
	pthread_t timer;
	bool timer_started;
	bool timer_stop;
	struct td_cond timer_cond;

	/* Bios submitted and not yet ended: changed by every submission and end. */
	_Alignas(64) _Atomic uint64_t outstanding;
};

/* The queue this thread is currently running with an inline drive, to flatten recursion. */
static _Thread_local struct td_queue *inline_runner;
static _Thread_local bool inline_rerun;

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

static uint64_t now_ns(const struct td_queue *q)
{
	return td_clock_now(&q->clock);
}

static void trace_rq(struct td_queue *q, enum td_trace_action action, const struct td_request *rq,
		     int error, uint64_t now)
{
	td_trace_emit(q->trace, action, rq->op, rq->flags & TD_RQ_FUA, rq->sector, rq->nr_sectors,
		      rq->pid, rq->tag, error, now);
}

static void trace_bio(struct td_queue *q, enum td_trace_action action, const struct td_bio *bio,
		      int tag, int error, uint64_t now)
{
	td_trace_emit(q->trace, action, bio->op, bio->flags & TD_BIO_FUA, bio->sector,
		      bio->nr_sectors, bio->pid, tag, error, now);
}

/* ---- ending bios ---------------------------------------------------------------------- */

/*
 * Bios to end once no lock is held, each with its ->error set, and the
 * number of requests they came from (for the stats' in-flight count).
 */
struct bio_list {
	struct td_bio *head;
	struct td_bio *tail;
	unsigned int nr_rqs;
	uint64_t now;
	/* Per-request accounting, done after the lock is dropped (a batch at a time). */
	unsigned int nr_acct;
	struct {
		uint64_t latency_ns;
		uint32_t nr_sectors;
		int16_t error;
		uint8_t op;
	} acct[32];
};

static void account_bio_list(struct td_queue *q, struct bio_list *bl)
{
	for (unsigned int i = 0; i < bl->nr_acct; i++)
		td_stats_io_account(q->stats, (enum td_op)bl->acct[i].op, bl->acct[i].nr_sectors,
				    bl->acct[i].latency_ns, bl->acct[i].error);
	bl->nr_acct = 0;
}

static void bio_list_add_chain(struct bio_list *bl, struct td_bio *chain, int error)
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
static void bio_done(struct td_queue *q)
{
	uint64_t n = atomic_load(&q->outstanding);

	while (n > 1 || !atomic_load(&q->drain_waiters)) {
		if (atomic_compare_exchange_weak(&q->outstanding, &n, n - 1))
			return;
	}
	td_mutex_lock(&q->lock);
	if (atomic_fetch_sub(&q->outstanding, 1) == 1)
		td_cond_broadcast(&q->drain_cond);
	td_mutex_unlock(&q->lock);
}

static void end_bio(struct td_queue *q, struct td_bio *bio, int error)
{
	bio->error = error;
	bio->end_io(bio, error);
	bio_done(q);
}

static void end_bio_list(struct td_queue *q, struct bio_list *bl)
{
	struct td_bio *bio = bl->head;

	account_bio_list(q, bl);
	if (bl->nr_rqs) {
		td_stats_io_end_n(q->stats, bl->now, bl->nr_rqs);
		bl->nr_rqs = 0;
	}

	while (bio) {
		struct td_bio *next = bio->next;

		bio->next = NULL;
		end_bio(q, bio, bio->error);
		bio = next;
	}
	bl->head = bl->tail = NULL;
}

/* ---- the in-flight write tree --------------------------------------------------------- */

static struct td_request *write_node_rq(struct td_rb_node *node)
{
	return td_rb_entry(node, struct td_request, write_node);
}

/* Return: true when @rq overlaps a write in flight. */
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

/* ---- request lifecycle ---------------------------------------------------------------- */

/*
 * Take @rq (INFLIGHT) off the drive's books: end its tag first (so the tag is
 * free before anyone hears of the completion), unlink it from the in-flight
 * list, the write tree and the barrier. Return: true when tag users must be kicked.
 */
static bool detach_inflight_locked(struct td_queue *q, struct td_request *rq)
{
	bool kick;

	assert(rq->state == TD_RQ_INFLIGHT && rq->tag >= 0);
	kick = td_tag_end(q->tags, rq->tag);
	rq->tag = TD_TAG_NONE;
	td_list_del(&rq->queuelist);
	q->nr_in_flight--;
	if (rq->flags & TD_RQ_WRITE_TREE) {
		td_rb_erase(&q->write_tree, &rq->write_node);
		rq->flags &= ~TD_RQ_WRITE_TREE;
	}
	if (rq->op == TD_OP_FLUSH)
		q->barrier_inflight = false;
	td_elv_completed(q->elv, rq);
	return kick;
}

/*
 * Account @rq as finished with @error, queue its bios on @ends and free it.
 * @tag is the tag it completed under (already ended), for the C event.
 */
static void end_request_locked(struct td_queue *q, struct td_request *rq, int tag, int error,
			       struct bio_list *ends, uint64_t now)
{
	td_trace_emit(q->trace, TD_TA_COMPLETE, rq->op, rq->flags & TD_RQ_FUA, rq->sector,
		      rq->nr_sectors, rq->pid, tag, error, now);
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

static void queue_complete(void *ctx, struct td_list *done)
{
	struct td_queue *q = ctx;
	struct bio_list ends = { 0 };
	struct td_list *pos, *n;
	bool kick = false;

	td_mutex_lock(&q->lock);
	uint64_t now = now_ns(q);

	td_list_for_each_safe(pos, n, done) {
		struct td_request *rq = td_list_entry(pos, struct td_request, drive_list);

		td_list_del(&rq->drive_list);
		/* A reset took this command back; its result does not count. */
		if (rq->state != TD_RQ_INFLIGHT || rq->gen != q->gen)
			continue;
		int tag = rq->tag;

		kick |= detach_inflight_locked(q, rq);
		end_request_locked(q, rq, tag, rq->error, &ends, now);
	}
	bool more = q->nr_dispatch || td_elv_has_work(q->elv);

	td_mutex_unlock(&q->lock);

	if (kick)
		td_tag_map_kick(q->tags);
	if (more)
		td_queue_run(q);
	/* Last: once the final bio has ended, a drainer may destroy the queue. */
	end_bio_list(q, &ends);
}

/* ---- dispatch ------------------------------------------------------------------------- */

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
static unsigned int dispatch_locked(struct td_queue *q, struct bio_list *ends,
				    struct td_list *batch, uint64_t now)
{
	unsigned int sent = 0;

	assert(td_lock_held(&q->lock));
	if (q->stopped)
		return 0;
	while (!q->barrier_inflight) {
		struct td_request *rq = dispatch_head_locked(q);

		if (!rq)
			break;
		/* A flush waits until everything before it has completed. */
		if (rq->op == TD_OP_FLUSH && q->nr_in_flight)
			break;
		if (td_op_is_write(rq->op) && write_conflict_locked(q, rq))
			break;

		enum td_prep_result res = q->prep(q, rq);

		if (!now)
			now = now_ns(q);
		if (res == TD_PREP_DEFER) {
			assert(rq->tag == TD_TAG_NONE);
			td_stats_add(q->stats, TD_STAT_DEFERRED, 1);
			if (!q->nr_in_flight && !q->defer_retry) {
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
			end_request_locked(q, rq, TD_TAG_NONE, rq->error ? rq->error : -EIO, ends, now);
			continue;
		}
		assert(res == TD_PREP_OK && rq->tag >= 0 && rq->cmd_len);
		rq->state = TD_RQ_INFLIGHT;
		rq->gen = q->gen;
		rq->error = 0;
		rq->dispatch_ns = now;
		td_list_add_tail(&rq->queuelist, &q->in_flight);
		q->nr_in_flight++;
		if (td_op_is_write(rq->op))
			write_tree_add_locked(q, rq);
		if (rq->op == TD_OP_FLUSH)
			q->barrier_inflight = true;
		trace_rq(q, TD_TA_DISPATCH, rq, 0, now);
		td_list_add_tail(&rq->drive_list, batch);
		sent++;
	}
	if (sent)
		td_drive_submit_locked(q->drive, batch);
	return sent;
}

/*
 * Dispatch, with q->lock held on entry and released on return. With an
 * inline drive, execute what was dispatched in this thread and go round
 * again while that freed tags for more.
 */
static void run_and_unlock(struct td_queue *q, uint64_t now)
{
	struct bio_list ends = { 0 };
	bool is_inline = td_drive_is_inline(q->drive);

	assert(td_lock_held(&q->lock));
	for (;;) {
		struct td_list batch = TD_LIST_INIT(batch);

		dispatch_locked(q, &ends, &batch, now);
		now = 0; /* later passes read the clock when they dispatch */

		td_mutex_unlock(&q->lock);
		end_bio_list(q, &ends);
		if (!is_inline)
			return;

		struct td_queue *outer = inline_runner;

		inline_runner = q;
		inline_rerun = false;
		td_drive_run_inline(q->drive, &batch);
		bool again = inline_rerun;

		inline_runner = outer;
		/* A completion that saw queued work asked for another pass. */
		if (!again)
			return;
		td_mutex_lock(&q->lock);
	}
}

void td_queue_run(struct td_queue *q)
{
	if (q->mode != TD_MODE_RQ)
		return;
	/* Completions inside an inline run ask for another pass instead of recursing. */
	if (inline_runner == q) {
		inline_rerun = true;
		return;
	}
	td_mutex_lock(&q->lock);
	run_and_unlock(q, 0);
}

/* ---- submission ----------------------------------------------------------------------- */

/* Put a flush behind everything queued so far: the elevator drains to the dispatch list. */
static void insert_flush_locked(struct td_queue *q, struct td_request *rq, uint64_t now)
{
	struct td_request *prev;

	while ((prev = td_elv_dispatch(q->elv, true))) {
		prev->state = TD_RQ_DISPATCH;
		td_list_add_tail(&prev->queuelist, &q->dispatch);
		q->nr_dispatch++;
	}
	rq->state = TD_RQ_DISPATCH;
	td_list_add_tail(&rq->queuelist, &q->dispatch);
	q->nr_dispatch++;
	trace_rq(q, TD_TA_INSERT, rq, 0, now);
}

/* Merge @bio into a queued request, or give it a request of its own. May wait for the pool. */
static void account_started(struct td_queue *q, uint64_t now, int64_t delta)
{
	if (delta > 0)
		td_stats_io_start_n(q->stats, now, (uint64_t)delta);
	else if (delta < 0)
		td_stats_io_end_n(q->stats, now, (uint64_t)-delta);
}

/*
 * Return: the change in the number of requests: 1 when @bio took a new
 * request, 0 when it merged, -1 when the merge also joined two requests.
 * The caller applies it to the stats once per batch.
 */
static int queue_bio_locked(struct td_queue *q, struct td_bio *bio, uint64_t now)
{
	struct td_request *rq;

	trace_bio(q, TD_TA_QUEUE, bio, TD_TAG_NONE, 0, now);
	if (bio->op != TD_OP_FLUSH) {
		enum td_elv_merge type = td_elv_merge(q->elv, bio, &rq);

		if (type != TD_ELV_NO_MERGE) {
			struct td_request *gone = td_elv_merge_bio(q->elv, rq, bio, type);

			td_stats_merge(q->stats, bio->op, type == TD_ELV_FRONT_MERGE);
			trace_bio(q, type == TD_ELV_FRONT_MERGE ? TD_TA_FRONTMERGE : TD_TA_BACKMERGE,
				  bio, TD_TAG_NONE, 0, now);
			if (gone) {
				td_rq_pool_put_locked(&q->pool, gone);
				return -1;
			}
			return 0;
		}
	}

	bool wait = !q->pool.nr_free;

	rq = td_rq_pool_get_locked(&q->pool, &q->lock);
	if (wait)
		now = now_ns(q); /* the pool made us wait */
	td_rq_init_from_bio(rq, bio);
	rq->seq = q->seq++;
	rq->start_ns = now;
	trace_rq(q, TD_TA_GETRQ, rq, 0, now);
	if (rq->op == TD_OP_FLUSH) {
		insert_flush_locked(q, rq, now);
		return 1;
	}
	td_elv_add(q->elv, rq);
	trace_rq(q, TD_TA_INSERT, rq, 0, now);
	return 1;
}

/* Bio mode: build the command and execute it in this thread. */
static void bio_make_request(struct td_queue *q, struct td_bio *bio)
{
	uint32_t per_block = q->lbs >> TD_SECTOR_SHIFT;
	struct td_cdb_cmd cmd = {
		.op = bio->op,
		.fua = bio->op == TD_OP_WRITE && (bio->flags & TD_BIO_FUA),
	};
	uint8_t cdb[TD_CMD_MAX];
	uint64_t start = now_ns(q);
	int err = -EIO;

	trace_bio(q, TD_TA_QUEUE, bio, TD_TAG_NONE, 0, start);
	td_stats_io_start(q->stats, start);
	if (bio->op != TD_OP_FLUSH) {
		if (bio->sector % per_block || bio->nr_sectors % per_block || !bio->nr_sectors ||
		    bio->sector + bio->nr_sectors > q->capacity) {
			td_stats_add(q->stats, TD_STAT_KILLED, 1);
			goto out;
		}
		cmd.lba = bio->sector / per_block;
		cmd.nr_blocks = bio->nr_sectors / per_block;
	}
	int len = td_cdb_encode(cdb, &cmd);

	if (len < 0)
		goto out;
	trace_bio(q, TD_TA_DISPATCH, bio, TD_TAG_NONE, 0, start);
	bio->next = NULL;
	err = td_drive_execute_sync(q->drive, cdb, (unsigned int)len, bio);
out:;
	uint64_t end = now_ns(q);

	td_stats_io_done(q->stats, bio->op, bio->nr_sectors, end - start, err, end);
	trace_bio(q, TD_TA_COMPLETE, bio, TD_TAG_NONE, err, end);
	end_bio(q, bio, err);
}

/* Return: true when @bio was handled (ended) by the stacking make_request function. */
static bool stacked_make_request(struct td_queue *q, struct td_bio *bio)
{
	if (!q->make_request)
		return false;
	if (q->make_request(q, bio, q->make_request_data) == 0) {
		/* The function ended the bio itself: balance the drain count. */
		bio_done(q);
		return true;
	}
	return false;
}

void td_queue_submit(struct td_queue *q, struct td_bio *bio)
{
	assert(bio->end_io);
	atomic_fetch_add(&q->outstanding, 1);
	if (stacked_make_request(q, bio))
		return;
	if (q->mode == TD_MODE_BIO) {
		bio_make_request(q, bio);
		return;
	}
	td_mutex_lock(&q->lock);
	uint64_t now = now_ns(q);

	int delta = queue_bio_locked(q, bio, now);

	if (delta > 0)
		td_stats_io_start(q->stats, now);
	else if (delta < 0)
		td_stats_io_cancel(q->stats, now);
	if (inline_runner == q) {
		inline_rerun = true;
		td_mutex_unlock(&q->lock);
		return;
	}
	run_and_unlock(q, now); /* insert and dispatch under one hold of the lock */
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
	td_mutex_lock(&q->lock);
	uint64_t now = now_ns(q);
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
		atomic_fetch_add(&q->outstanding, 1);
		started += queue_bio_locked(q, bio, now);
		bio = next;
	} while (bio);
	account_started(q, now, started);
	if (inline_runner == q) {
		inline_rerun = true;
		td_mutex_unlock(&q->lock);
		return;
	}
	run_and_unlock(q, now);
}

void td_queue_drain(struct td_queue *q)
{
	td_mutex_lock(&q->lock);
	atomic_fetch_add(&q->drain_waiters, 1);
	while (atomic_load(&q->outstanding) > 0)
		td_cond_wait_until(&q->drain_cond, &q->lock, td_now_ns() + 5 * TD_NSEC_PER_MSEC);
	atomic_fetch_sub(&q->drain_waiters, 1);
	td_mutex_unlock(&q->lock);
}

/* ---- tags, reset ---------------------------------------------------------------------- */

int td_queue_start_tag(struct td_queue *q, struct td_request *rq)
{
	assert(td_lock_held(&q->lock));
	int tag = td_tag_start(q->tags, rq);

	if (tag < 0)
		return -EBUSY;
	rq->tag = tag;
	return 0;
}

unsigned int td_queue_invalidate_tags_locked(struct td_queue *q, struct td_list *failed)
{
	struct td_list requeue = TD_LIST_INIT(requeue);
	uint64_t now = now_ns(q);
	unsigned int n = 0;
	bool kick = false;

	assert(td_lock_held(&q->lock));
	while (!td_list_empty(&q->in_flight)) {
		struct td_request *rq =
			td_list_first_entry(&q->in_flight, struct td_request, queuelist);

		/* The tag is gone with the reset; the request keeps its place in line. */
		trace_rq(q, TD_TA_REQUEUE, rq, 0, now);
		kick |= detach_inflight_locked(q, rq);
		rq->retries++;
		if (rq->retries > q->max_retries) {
			rq->error = -EIO;
			td_stats_add(q->stats, TD_STAT_RETRIES_EXHAUSTED, 1);
			td_list_add_tail(&rq->queuelist, failed);
			continue;
		}
		rq->state = TD_RQ_DISPATCH;
		td_list_add_tail(&rq->queuelist, &requeue);
		q->nr_dispatch++;
		n++;
	}
	td_list_splice_init(&requeue, &q->dispatch);
	td_stats_add(q->stats, TD_STAT_REQUEUED, n);
	if (kick)
		q->defer_retry = true; /* the timer kicks other users of the map soon */
	return n;
}

unsigned int td_queue_reset(struct td_queue *q, bool timeout)
{
	struct td_list failed = TD_LIST_INIT(failed);
	struct bio_list ends = { 0 };
	unsigned int n;

	if (q->mode != TD_MODE_RQ)
		return 0;
	td_mutex_lock(&q->reset_lock);

	/* Stop dispatching; completions from now on belong to the old generation. */
	td_mutex_lock(&q->lock);
	q->stopped++;
	q->gen++;
	td_mutex_unlock(&q->lock);

	td_drive_quiesce(q->drive);

	td_mutex_lock(&q->lock);
	n = td_queue_invalidate_tags_locked(q, &failed);
	uint64_t now = now_ns(q);

	while (!td_list_empty(&failed)) {
		struct td_request *rq = td_list_first_entry(&failed, struct td_request, queuelist);

		td_list_del(&rq->queuelist);
		end_request_locked(q, rq, TD_TAG_NONE, rq->error, &ends, now);
	}
	q->stopped--;
	td_stats_add(q->stats, TD_STAT_RESETS, 1);
	if (timeout)
		td_stats_add(q->stats, TD_STAT_TIMEOUTS, 1);
	td_mutex_unlock(&q->lock);

	end_bio_list(q, &ends);
	td_tag_map_kick(q->tags);
	td_queue_run(q);
	td_mutex_unlock(&q->reset_lock);
	td_notice("queue: drive reset%s, %u command%s requeued", timeout ? " after a command timeout" : "",
		  n, n == 1 ? "" : "s");
	return n;
}

/* ---- timer ---------------------------------------------------------------------------- */

static void *timer_main(void *arg)
{
	struct td_queue *q = arg;

	td_thread_name("td-timer");
	td_mutex_lock(&q->lock);
	while (!q->timer_stop) {
		uint64_t now = td_now_ns();
		uint64_t period = TD_TIMER_PERIOD_NS;
		uint64_t timeout_ns = (uint64_t)q->command_timeout_ms * TD_NSEC_PER_MSEC;

		if (timeout_ns && timeout_ns / 4 < period)
			period = TD_MAX(timeout_ns / 4, TD_NSEC_PER_MSEC);
		if (q->defer_retry)
			period = TD_DEFER_RETRY_NS;
		td_cond_wait_until(&q->timer_cond, &q->lock, now + period);
		if (q->timer_stop)
			break;

		if (q->defer_retry) {
			/* Deferred requests, or other users of a shared tag map, need a run. */
			q->defer_retry = false;
			td_mutex_unlock(&q->lock);
			td_tag_map_kick(q->tags);
			td_queue_run(q);
			td_mutex_lock(&q->lock);
		}
		if (timeout_ns && !td_list_empty(&q->in_flight)) {
			struct td_request *oldest =
				td_list_first_entry(&q->in_flight, struct td_request, queuelist);
			uint64_t age = now_ns(q) - oldest->dispatch_ns;

			if (age > timeout_ns) {
				td_warnx("queue: tag %d (%s, sector %llu) timed out after %llu ms",
					 oldest->tag, td_op_name(oldest->op),
					 (unsigned long long)oldest->sector,
					 (unsigned long long)(age / TD_NSEC_PER_MSEC));
				td_mutex_unlock(&q->lock);
				td_queue_reset(q, true);
				td_mutex_lock(&q->lock);
			}
		}
	}
	td_mutex_unlock(&q->lock);
	return NULL;
}

/* ---- configuration -------------------------------------------------------------------- */

static void queue_kick(void *user)
{
	td_queue_run(user);
}

static int window_make_request(struct td_queue *q, struct td_bio *bio, void *data)
{
	(void)data;
	if (bio->op != TD_OP_FLUSH) {
		if (bio->sector >= q->window_nr || bio->nr_sectors > q->window_nr - bio->sector) {
			bio->error = -EIO;
			bio->end_io(bio, -EIO);
			return 0;
		}
		bio->sector += q->window_start;
	}
	return 1;
}

int td_queue_set_window(struct td_queue *q, uint64_t start, uint64_t nr_sectors)
{
	uint32_t per_block = q->lbs >> TD_SECTOR_SHIFT;

	if (!nr_sectors || start % per_block || nr_sectors % per_block || start >= q->capacity ||
	    nr_sectors > q->capacity - start)
		return -EINVAL;
	q->window_start = start;
	q->window_nr = nr_sectors;
	td_queue_set_make_request(q, window_make_request, NULL);
	return 0;
}

void td_queue_set_make_request(struct td_queue *q, td_make_request_fn fn, void *data)
{
	q->make_request = fn;
	q->make_request_data = data;
}

void td_queue_set_prep(struct td_queue *q, td_prep_fn prep)
{
	q->prep = prep ? prep : td_prep_default;
}

int td_queue_set_elevator(struct td_queue *q, const char *name)
{
	const struct td_elevator_type *type = td_elv_find(name);
	int err = 0;

	if (!type)
		return -EINVAL;
	if (q->mode != TD_MODE_RQ)
		return 0;
	td_mutex_lock(&q->lock);
	if (strcmp(td_elv_name(q->elv), name) != 0) {
		struct td_elevator *e = td_elv_create(type, &q->eq, q->nr_requests, &err);

		if (e) {
			/* Drain the old elevator, in its own order, ahead of anything it would hold. */
			struct td_request *rq;

			while ((rq = td_elv_dispatch(q->elv, true))) {
				rq->state = TD_RQ_DISPATCH;
				td_list_add_tail(&rq->queuelist, &q->dispatch);
				q->nr_dispatch++;
			}
			td_elv_destroy(q->elv);
			q->elv = e;
		}
	}
	td_mutex_unlock(&q->lock);
	if (!err)
		td_queue_run(q);
	return err;
}

int td_queue_set_depth(struct td_queue *q, unsigned int depth)
{
	int err = td_tag_resize(q->tags, depth);

	if (!err) {
		td_tag_map_kick(q->tags);
		td_queue_run(q);
	}
	return err;
}

void td_queue_set_tunables(struct td_queue *q, const struct td_elv_tunables *t)
{
	td_mutex_lock(&q->lock);
	q->tunables = *t;
	td_mutex_unlock(&q->lock);
}

int td_queue_set_timeout(struct td_queue *q, uint32_t command_timeout_ms, uint32_t max_retries)
{
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
	if (p->mode == TD_MODE_RQ && (!p->elevator || !td_elv_find(p->elevator)))
		return -EINVAL;
	if (!p->tunables.fifo_batch)
		return -EINVAL;
	return 0;
}

struct td_queue *td_queue_create(const struct td_queue_params *p, int *err)
{
	struct td_queue *q;
	int ret = check_params(p);

	if (ret)
		goto out;
	ret = -ENOMEM;
	/* Cache-line aligned: the lock and the outstanding count have lines of their own. */
	q = aligned_alloc(_Alignof(struct td_queue), sizeof(*q));
	if (!q)
		goto out;
	memset(q, 0, sizeof(*q));
	td_mutex_init(&q->lock);
	td_mutex_init(&q->reset_lock);
	td_cond_init(&q->drain_cond);
	td_cond_init(&q->timer_cond);
	td_list_init(&q->dispatch);
	td_list_init(&q->in_flight);
	q->mode = p->mode;
	q->capacity = p->capacity_sectors;
	q->lbs = p->logical_block_size;
	q->max_sectors = p->max_sectors;
	q->nr_requests = p->nr_requests;
	q->drive = p->drive;
	q->trace = p->trace;
	q->clock = p->clock;
	q->prep = td_prep_default;
	q->tunables = p->tunables;
	q->command_timeout_ms = p->command_timeout_ms;
	q->max_retries = p->max_retries;
	q->eq.tunables = &q->tunables;
	q->eq.clock = &q->clock;
	q->eq.max_sectors = p->max_sectors;
	atomic_init(&q->outstanding, 0);

	q->stats = td_stats_create();
	if (!q->stats)
		goto out_destroy_locks;
	q->rangelock = td_rangelock_create();
	if (!q->rangelock)
		goto out_destroy_stats;
	ret = td_rq_pool_init(&q->pool, q, p->nr_requests);
	if (ret)
		goto out_destroy_rangelock;
	q->elv = td_elv_create(td_elv_find(p->mode == TD_MODE_RQ ? p->elevator : "noop"), &q->eq,
			       p->nr_requests, &ret);
	if (!q->elv)
		goto out_destroy_pool;

	struct td_tag_map *map = p->tags;

	if (!map) {
		map = td_tag_map_create(p->depth);
		ret = -ENOMEM;
		if (!map)
			goto out_destroy_elv;
	}
	ret = td_tag_map_attach(map, queue_kick, q);
	if (ret) {
		if (!p->tags)
			td_tag_map_destroy(map);
		goto out_destroy_elv;
	}
	q->tags = map;
	td_drive_attach(q->drive, queue_complete, q);

	if (q->mode == TD_MODE_RQ) {
		ret = -pthread_create(&q->timer, NULL, timer_main, q);
		if (ret)
			goto out_detach_tags;
		q->timer_started = true;
	}
	return q;

out_detach_tags:
	td_tag_map_detach(q->tags, q);
out_destroy_elv:
	td_elv_destroy(q->elv);
out_destroy_pool:
	td_rq_pool_destroy(&q->pool);
out_destroy_rangelock:
	td_rangelock_destroy(q->rangelock);
out_destroy_stats:
	td_stats_destroy(q->stats);
out_destroy_locks:
	td_cond_destroy(&q->timer_cond);
	td_cond_destroy(&q->drain_cond);
	td_mutex_destroy(&q->reset_lock);
	td_mutex_destroy(&q->lock);
	free(q);
out:
	*err = ret;
	return NULL;
}

void td_queue_destroy(struct td_queue *q)
{
	assert(atomic_load(&q->outstanding) == 0);
	if (q->timer_started) {
		td_mutex_lock(&q->lock);
		q->timer_stop = true;
		td_cond_signal(&q->timer_cond);
		td_mutex_unlock(&q->lock);
		pthread_join(q->timer, NULL);
	}
	assert(q->nr_in_flight == 0 && q->nr_dispatch == 0);
	td_tag_map_detach(q->tags, q);
	td_elv_destroy(q->elv);
	td_rq_pool_destroy(&q->pool);
	td_rangelock_destroy(q->rangelock);
	td_stats_destroy(q->stats);
	td_cond_destroy(&q->timer_cond);
	td_cond_destroy(&q->drain_cond);
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

void td_queue_get_status(struct td_queue *q, struct td_queue_status *st)
{
	memset(st, 0, sizeof(*st));
	td_mutex_lock(&q->lock);
	st->mode = q->mode;
	snprintf(st->elevator, sizeof(st->elevator), "%s",
		 q->mode == TD_MODE_RQ ? td_elv_name(q->elv) : "none");
	st->in_flight = q->nr_in_flight;
	st->queued = q->nr_dispatch + td_elv_count(q->elv);
	st->requests_used = q->pool.nr - q->pool.nr_free;
	st->nr_requests = q->pool.nr;
	st->max_sectors = q->max_sectors;
	st->command_timeout_ms = q->command_timeout_ms;
	st->max_retries = q->max_retries;
	st->barrier_pending = q->barrier_inflight;
	st->tunables = q->tunables;
	struct td_list *pos;

	td_list_for_each(pos, &q->dispatch) {
		if (td_list_entry(pos, struct td_request, queuelist)->op == TD_OP_FLUSH)
			st->barrier_pending = true;
	}
	td_mutex_unlock(&q->lock);
	st->depth = td_tag_depth(q->tags);
	st->tags_in_use = td_tag_busy(q->tags);
}

unsigned int td_queue_get_tags(struct td_queue *q, struct td_tag_info *out, unsigned int max)
{
	unsigned int n = 0;
	struct td_list *pos;

	td_mutex_lock(&q->lock);
	uint64_t now = now_ns(q);

	td_list_for_each(pos, &q->in_flight) {
		struct td_request *rq = td_list_entry(pos, struct td_request, queuelist);

		if (n < max && out) {
			struct td_tag_info *ti = &out[n];

			ti->tag = rq->tag;
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
