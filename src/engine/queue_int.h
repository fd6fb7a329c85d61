/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * queue_int.h - what the request queue's files share: the queue itself
 * and the helpers that take requests off the drive's books and end them.
 *
 *   queue.c        submission and insert, dispatch, barriers, completion,
 *                  drain, and the kick thread (td-kblockd);
 *   queue_bio.c    bio mode and stacking make_request functions (windows);
 *   timeout.c      resets, command timeouts (the td-timer thread) and the
 *                  abort that ends a bounded drain;
 *   queue_setup.c  creation and destruction, run-time settings, snapshots;
 *   queue_mq.c     mq mode: the per-CPU software queues, the hardware
 *                  contexts (each a queue of its own, run as rq mode runs
 *                  one) and what acts on all of them.
 *
 * LOCKING: each field says what guards it; the lock order is in
 * tagdisk/queue.h. Functions named _locked expect q->lock held.
 */
#ifndef TAGDISK_QUEUE_INT_H
#define TAGDISK_QUEUE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "common/clock.h"
#include "common/compiler.h"
#include "common/list.h"
#include "common/lock.h"
#include "common/pcpu.h"
#include "common/rbtree.h"
#include "tagdisk/elevator.h"
#include "tagdisk/queue.h"
#include "tagdisk/request.h"
#include "tagdisk/trace.h"

struct td_drive;
struct td_tag_map;
struct td_stats;
struct td_rangelock;
struct td_mq_ctx;
struct td_wlog_slot;

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
	struct td_wlog *wlog;
	struct td_rangelock *rangelock;
	struct td_clock clock;
	td_prep_fn prep;
	td_make_request_fn make_request;
	void *make_request_data;
	uint64_t window_start; /* sectors; window_nr 0: no window */
	uint64_t window_nr;

	/*
	 * mq mode (queue_mq.c), fixed at creation. The mq queue (mode MQ) holds
	 * the software queues and the hctxs; each hctx is a queue in mode RQ
	 * whose parent is the mq queue, sharing its stats, trace and tag map.
	 */
	struct td_queue *parent;     /* an hctx: its mq queue; else NULL */
	unsigned int hctx_index;     /* an hctx: its index */
	unsigned int nr_hw;	     /* the mq queue: hardware contexts */
	struct td_queue **hctxs;     /* the mq queue: [nr_hw] */
	unsigned int nr_ctx;	     /* the mq queue: software queues, one per possible CPU */
	struct td_mq_ctx *ctxs;	     /* the mq queue: [nr_ctx] */
	struct td_mq_ctx **hctx_ctx; /* an hctx: the software queues mapped to it */
	unsigned int nr_hctx_ctx;

	_Alignas(64) struct td_mutex lock;
	struct td_mutex reset_lock; /* serialises resets; taken before lock */

	/* Guarded by lock. */
	struct td_elv_tunables tunables;
	struct td_elv_queue eq; /* what the elevator sees: points at tunables and clock */
	struct td_elevator *elv;
	struct td_rq_pool pool;
	struct td_list dispatch;
	struct td_list in_flight;
	struct td_rb_root write_tree; /* rq: its writes in flight; an hctx's are its parent's */
	bool kick_writers; /* an hctx ended a write another hctx may be waiting for */
	/* An hctx stopped at a write overlapping one in flight; set under the parent's write_lock. */
	atomic_bool write_blocked;
	/*
	 * The mq queue: guards write_tree, the writes in flight of every hctx
	 * (taken after an hctx lock, before the drive lock), and nr_write_blocked.
	 */
	struct td_mutex write_lock;
	unsigned int nr_write_blocked;
	uint32_t nr_dispatch;
	uint32_t nr_in_flight;
	uint64_t nr_dispatched; /* sent to the drive since creation */
	uint64_t seq;
	unsigned int gen;     /* bumped by every reset and by the abort */
	unsigned int stopped; /* dispatch is stopped while non-zero (reset in progress) */
	bool barrier_inflight;
	bool defer_retry; /* prep deferred with nothing in flight: the timer reruns us */
	bool tag_starved; /* the last prep found no free tag; lock */
	unsigned int tag_cursor; /* where the next tag start looks first (td_tag_start_at); lock */
	uint32_t command_timeout_ms;
	uint32_t max_retries;
	_Atomic unsigned int drain_waiters; /* changed under lock, read without it */
	struct td_cond drain_cond;
	/*
	 * A bounded drain gave up: nothing is dispatched any more and every new
	 * bio fails with -EIO. Set under lock, read without it (bio mode).
	 */
	atomic_bool dead;

	/* Timer thread (td-timer); guarded by lock. */
	pthread_t timer;
	bool timer_started;
	bool timer_stop;
	struct td_cond timer_cond;

	/* Kick thread (td-kblockd); guarded by lock. */
	pthread_t kblockd;
	bool kblockd_started;
	bool kblockd_stop;
	bool kick_pending; /* run the queue */
	bool kick_map;	   /* and kick every user of the tag map first */
	struct td_cond kblockd_cond;

	/*
	 * The drain count: bios submitted and bios ended, each counted on the
	 * shard of the CPU that submitted or ended it, so submitters on
	 * different CPUs share no line (td_queue_outstanding() subtracts).
	 */
	struct td_pcpu_counter submitted;
	struct td_pcpu_counter ended;
};

/*
 * Bios to end once no lock is held, each with its ->error set, and the
 * number of requests they came from (for the stats' in-flight count).
 */
struct td_bio_list {
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
	/* Write log entries of flushes that failed, written once no lock is held. */
	struct td_wlog_slot *wlog_flushes;
};

/*
 * Empty @bl. Only the header is cleared: acct[] is read up to nr_acct, and
 * zeroing all of it (half a kilobyte) cost more than a lone request's
 * accounting.
 */
static inline void td_bio_list_init(struct td_bio_list *bl)
{
	bl->head = bl->tail = NULL;
	bl->nr_rqs = 0;
	bl->now = 0;
	bl->nr_acct = 0;
	bl->wlog_flushes = NULL;
}

/* Return: the queue clock's time. */
static inline uint64_t td_queue_now(const struct td_queue *q)
{
	return td_clock_now(&q->clock);
}

static inline void td_queue_trace_bio(struct td_queue *q, enum td_trace_action action,
				      const struct td_bio *bio, int tag, int error, uint64_t now)
{
	td_trace_emit(q->trace, action, bio->op, bio->flags & TD_BIO_FUA, bio->sector,
		      bio->nr_sectors, bio->pid, tag, error, now);
}

static inline void td_queue_trace_rq(struct td_queue *q, enum td_trace_action action,
				     const struct td_request *rq, int error, uint64_t now)
{
	td_trace_emit(q->trace, action, rq->op, rq->flags & TD_RQ_FUA, rq->sector, rq->nr_sectors,
		      rq->pid, rq->tag, error, now);
}

/* queue.c */

/*
 * Take @rq (INFLIGHT) off the drive's books: end its tag first (so the tag is
 * free before anyone hears of the completion), unlink it from the in-flight
 * list, the write tree and the barrier. Return: true when tag users must be kicked.
 */
bool td_queue_detach_inflight_locked(struct td_queue *q, struct td_request *rq) td_nonnull(1, 2);

/*
 * Account @rq as finished with @error, queue its bios on @ends and free it.
 * @tag is the tag it completed under (already ended), for the C event.
 */
void td_queue_end_request_locked(struct td_queue *q, struct td_request *rq, int tag, int error,
				 struct td_bio_list *ends, uint64_t now) td_nonnull(1, 2, 5);

/*
 * A bio has ended: count it in the drain count (q->ended). After the
 * count reaches zero a drainer may destroy @q: touch nothing of it after.
 */
void td_queue_bio_done(struct td_queue *q) td_nonnull(1);

/* Return: bios submitted to @q and not ended (an upper bound while they move). */
static inline uint64_t td_queue_outstanding(struct td_queue *q)
{
	return td_pcpu_pending(&q->submitted, &q->ended);
}

/* End @bio with @error (its end_io, then td_queue_bio_done()). No lock held. */
void td_queue_end_bio(struct td_queue *q, struct td_bio *bio, int error) td_nonnull(1, 2);

/* End the bios on @ends. No lock held; after the last one, @q may be gone. */
void td_queue_end_bios(struct td_queue *q, struct td_bio_list *ends) td_nonnull(1, 2);

/* Move everything the elevator holds to the tail of the dispatch list, in its order. */
void td_queue_drain_elevator_locked(struct td_queue *q) td_nonnull(1);

/*
 * Ask td-kblockd to run the queue (and, with @map, to kick every user of the
 * tag map first). Never blocks; several kicks before it runs make one run.
 */
void td_queue_kick_locked(struct td_queue *q, bool map) td_nonnull(1);

/*
 * Return: the queue runs executing commands inline on the calling thread's
 * stack: 0, or 1 inside one (runs never nest: queue_run.c). For tests.
 */
unsigned int td_queue_inline_depth(void);

/*
 * A run of @q is asked for (@locked: the caller holds @q's lock). Inside an
 * inline run, leave it to that run (queue_run.c). Return: true when it was
 * left so; false when the caller runs @q itself.
 */
bool td_queue_inline_defer(struct td_queue *q, bool locked) td_nonnull(1);

/*
 * Dispatch what @q can (its lock held, released on return), end @ends_in's
 * bios (may be NULL) and, with an inline drive, execute the batch here.
 * @now: the clock read under this hold of the lock, or 0.
 */
void td_queue_run_and_unlock(struct td_queue *q, uint64_t now, struct td_bio_list *ends_in)
	td_nonnull(1);

/*
 * The tree of writes in flight (queue.c): put the write @rq in it unless it
 * overlaps one there (false: it waits, and the end of that write runs @q
 * again); take it out. @q's lock held.
 */
bool td_queue_write_reserve_locked(struct td_queue *q, struct td_request *rq) td_nonnull(1, 2);
void td_queue_write_release_locked(struct td_queue *q, struct td_request *rq) td_nonnull(1, 2);

/*
 * What a completion leaves to do once every request of the drive's list has
 * been ended: the bios to end, whether to kick the users of the tag map and
 * the writers waiting in other hctxs, and which queues to run (more than
 * TD_COMPLETION_RUNS: every hctx of the mq queue).
 */
#define TD_COMPLETION_RUNS 4

struct td_queue_completion {
	struct td_bio_list ends;
	bool kick_map;
	bool writers;
	bool run_all;
	unsigned int nr_runs;
	struct td_queue *runs[TD_COMPLETION_RUNS];
};

static inline void td_queue_completion_init(struct td_queue_completion *c)
{
	td_bio_list_init(&c->ends);
	c->kick_map = false;
	c->writers = false;
	c->run_all = false;
	c->nr_runs = 0;
}

/*
 * End the requests of @done, all of @q (an hctx in mq mode), and note in @c
 * what is left to do. Takes @q's lock; @done is empty afterwards.
 */
void td_queue_complete_part(struct td_queue *q, struct td_list *done,
			    struct td_queue_completion *c) td_nonnull(1, 2, 3);

/*
 * Do what @c says: run write-blocked hctxs and the tag map's users, the
 * queues with work left, and end the bios. @q: a queue of the completion (in
 * mq mode any hctx: they share the stats, the drain count and the tag map).
 * No lock held; afterwards @q may be gone.
 */
void td_queue_complete_finish(struct td_queue *q, struct td_queue_completion *c) td_nonnull(1, 2);

/* The drive's completion function (td_drive_attach). */
void td_queue_complete(void *ctx, struct td_list *done) td_nonnull(1, 2);

/*
 * The drive's unpin function (td_drive_attach): a request a bounded drain
 * left ABORTED because a stale backend call pinned it fails with -EIO now;
 * any other is left as it is. Takes the lock of @rq's queue (its hctx in mq
 * mode, whatever @ctx is).
 */
void td_queue_unpinned(void *ctx, struct td_request *rq) td_nonnull(2);

/* The kick thread; started by td_queue_create() in rq mode. */
void *td_queue_kblockd_main(void *arg) td_nonnull(1);

/*
 * mq mode: take the bios of @hctx's software queues and insert them into
 * it, in the order they were queued, then run it (with an inline drive,
 * executing what it dispatches). Call with no tagdisk lock held.
 */
void td_queue_insert_ctxs(struct td_queue *hctx) td_nonnull(1);

/*
 * The same with @hctx's lock already held, inserting @list (NULL or a chain
 * that never went through a software queue) behind the software queues'
 * bios. Releases the lock.
 */
void td_queue_insert_ctxs_locked(struct td_queue *hctx, struct td_bio *list) td_nonnull(1);

/* queue_setup.c */

/*
 * Create hardware context @index of the mq queue @parent from @p (mode RQ,
 * its tags the parent's map, its elevator an mq scheduler name). It borrows
 * the parent's stats and never attaches to the drive. Destroy it with
 * td_queue_destroy(). Return: the hctx, or NULL with a negative errno in *@err.
 */
struct td_queue *td_queue_hctx_create(struct td_queue *parent, const struct td_queue_params *p,
				      unsigned int index, int *err) td_nonnull(1, 2, 4);

/* queue_mq.c */

/* One software queue: the bios submitted on one CPU, waiting for their hctx. */
struct td_mq_ctx {
	struct td_mutex lock;
	struct td_bio *head; /* lock */
	struct td_bio *tail; /* lock */
	uint64_t nr_queued;  /* bios taken since creation; lock */
	_Atomic bool pending; /* head != NULL; written under lock, read without */
	uint64_t nr_direct;  /* bios of this CPU inserted directly; the hctx's lock */
	struct td_queue *hctx; /* fixed */
} td_cacheline_aligned;

/*
 * Build the software queues and hardware contexts of the mq queue @q from
 * @p, and attach the drive's completion to @q. Return: 0 or a negative errno
 * (everything built is undone).
 */
int td_queue_mq_init(struct td_queue *q, const struct td_queue_params *p) td_nonnull(1, 2);

/* Destroy what td_queue_mq_init() built; everything is drained. */
void td_queue_mq_exit(struct td_queue *q) td_nonnull(1);

/* Queue @list (bios chained through ->next, already counted as outstanding) on this CPU. */
void td_queue_mq_submit(struct td_queue *q, struct td_bio *list) td_nonnull(1, 2);

/*
 * Take every bio of @hctx's software queues, oldest first per queue.
 * Called with @hctx's lock held. Return: the chain, or NULL; its last bio
 * in *@tail.
 */
struct td_bio *td_queue_mq_collect_locked(struct td_queue *hctx, struct td_bio **tail)
	td_nonnull(1, 2);

/* queue_bio.c */

/* Bio mode: build the command, execute it in this thread, end @bio. */
void td_queue_bio_make_request(struct td_queue *q, struct td_bio *bio) td_nonnull(1, 2);

/*
 * Hand @bio to the stacking make_request function (q->make_request, set).
 * Return: true when the function ended it; false when it passes it on.
 */
bool td_queue_stacked_make_request(struct td_queue *q, struct td_bio *bio) td_nonnull(1, 2);

/* timeout.c */

/* The timer thread; started by td_queue_create() in rq mode. */
void *td_queue_timer_main(void *arg) td_nonnull(1);

/*
 * Reset the queues @qs[0..@n) that share @owner's drive and tag map, as one
 * (steps at the top of timeout.c); @owner's reset lock serialises it. In mq
 * mode @owner is the mq queue and @qs its hctxs; in rq mode all three are
 * the queue. @trigger: the queue whose timer saw a command expire (reset
 * only when it still has), or NULL. Return: the number requeued.
 */
unsigned int td_queue_reset_set(struct td_queue *owner, struct td_queue **qs, unsigned int n,
				struct td_queue *trigger, bool timeout) td_nonnull(1, 2);

/*
 * Fail every request of @q, queued or at the drive, with -EIO, abandoning
 * the commands the drive holds (td_drive_abandon), and leave the queue dead.
 * @waited_ms is for the log line. Call with no lock held.
 * Return: the number of requests failed.
 */
unsigned int td_queue_abort(struct td_queue *q, uint32_t waited_ms) td_nonnull(1);

/* td_queue_abort() for the queues @qs[0..@n) sharing one drive, with one log line. */
unsigned int td_queue_abort_set(struct td_queue **qs, unsigned int n, uint32_t waited_ms)
	td_nonnull(1);

#endif /* TAGDISK_QUEUE_INT_H */
