// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * timeout.c - taking commands back from the drive: resets, command timeouts
 * and the abort of a bounded drain (Linux keeps blk-timeout.c apart from the
 * data path too).
 *
 * A reset (td_queue_reset, or the timer on a command timeout):
 *   1. under the queue lock: stop dispatching (q->stopped) and bump the
 *      generation, so completions of older generations are ignored;
 *   2. quiesce the drive: it drops what it had not started and waits for the
 *      backend calls in progress (their results are dropped);
 *   3. under the queue lock: charge a retry to the commands that timed out,
 *      end every tag and put each request back at the head of the dispatch
 *      list in dispatch order (an R event each); a request over max_retries
 *      fails with -EIO instead; resume dispatching;
 *   4. hand the run to td-kblockd: the thread that asked for the reset never
 *      executes the requeued commands (nor does the timer ever execute any).
 *
 * In mq mode a reset covers the whole tag set: every hctx of the mq queue is
 * stopped and bumped in step 1 (their locks taken in index order), the drive
 * is quiesced once, and step 3 requeues each hctx's commands onto its own
 * dispatch list (td_queue_reset_set). Each hctx's timer watches its own
 * oldest command; a timeout there resets the set.
 *
 * Retries. rq->retries is what max_retries limits, and only a command's own
 * timeout uses one: a timeout charges the oldest command and every other one
 * older than command_timeout_ms when the drive has been quiesced. The other
 * commands in flight did nothing wrong and are requeued for free, as they are
 * by a reset from the admin socket, so no number of user resets fails a slow
 * command. (A command whose execution fails completes with its error; the
 * drive has no failure that asks for a retry.)
 *
 * The timer thread (td-timer, rq mode) looks at the oldest command every
 * quarter of command_timeout_ms (at most every 100 ms) and resets when it is
 * older than that; and when prep deferred with nothing in flight for any
 * reason but a missing tag (nothing would run the queue again) it asks
 * td-kblockd for a run 1 ms later. A request waiting for a tag needs no
 * timer: the tag map is marked starved, and the next tag end kicks every
 * user of the map.
 *
 * The abort (td_queue_drain_timeout() when the bound passes) fails every
 * request with -EIO, queued or at the drive; the drive abandons what it holds
 * (a backend call in progress is left to return on its own, its result
 * dropped); the queue is dead from then on. A request such a call pins (its
 * buffers may still be read or written) is not ended yet: it waits ABORTED
 * until the drive unpins it (td_queue_unpinned), then fails with -EIO.
 *
 * Pins and retries: the same holds for max_retries. A pinned request is
 * requeued whatever its retries, so a command whose call hung is failed only
 * once that call has returned (and its retry has timed out again).
 */
#include <assert.h>
#include <errno.h>
#include "common/log.h"
#include "queue_int.h"
#include "tagdisk/drive.h"
#include "tagdisk/queue.h"
#include "tagdisk/stats.h"
#include "tagdisk/tag.h"

/* How soon a queue whose prep deferred (not for a tag), with nothing in flight, is run again. */
#define TD_DEFER_RETRY_NS (1 * TD_NSEC_PER_MSEC)
/* How often the timer looks at the oldest command when no timeout is shorter. */
#define TD_TIMER_PERIOD_NS (100 * TD_NSEC_PER_MSEC)

/* ---- reset ---------------------------------------------------------------------------- */

unsigned int td_queue_invalidate_tags_locked(struct td_queue *q, struct td_list *failed)
{
	struct td_list requeue = TD_LIST_INIT(requeue);
	uint64_t now = td_queue_now(q);
	unsigned int n = 0;
	bool kick = false;

	assert(td_lock_held(&q->lock));
	while (!td_list_empty(&q->in_flight)) {
		struct td_request *rq =
			td_list_first_entry(&q->in_flight, struct td_request, queuelist);

		/* The tag is gone with the reset; the request keeps its place in line. */
		td_queue_trace_rq(q, TD_TA_REQUEUE, rq, 0, now);
		kick |= td_queue_detach_inflight_locked(q, rq);
		/*
		 * The drive lets go without unlinking: a thread it left in a backend
		 * call may still have the request on a list of its own, which that
		 * thread never looks at again.
		 */
		td_list_init(&rq->drive_list);
		/* A pinned request's buffers may still be in use: it waits, whatever its retries. */
		if (rq->retries > q->max_retries && !td_rq_pinned(rq)) {
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

/*
 * Charge a retry to the commands that timed out (see the top of the file):
 * with @oldest, to the oldest command too, expired or not.
 */
static void charge_timed_out_locked(struct td_queue *q, bool oldest)
{
	uint64_t timeout_ns = (uint64_t)q->command_timeout_ms * TD_NSEC_PER_MSEC;
	uint64_t now = td_queue_now(q);
	struct td_list *pos;

	assert(td_lock_held(&q->lock));
	td_list_for_each(pos, &q->in_flight) {
		struct td_request *rq = td_list_entry(pos, struct td_request, queuelist);

		/* In dispatch order: once one is young enough, so are the rest. */
		if (!oldest && (!timeout_ns || now - rq->dispatch_ns <= timeout_ns))
			break;
		rq->retries++;
		oldest = false;
	}
}

/* What the timer saw: the command whose timeout it acts on. */
struct expired {
	int tag;
	enum td_op op;
	uint64_t sector;
	uint64_t age_ms;
};

/* Return: true when the oldest command in flight is older than command_timeout_ms. */
static bool oldest_expired_locked(struct td_queue *q, struct expired *e)
{
	uint64_t timeout_ns = (uint64_t)q->command_timeout_ms * TD_NSEC_PER_MSEC;

	assert(td_lock_held(&q->lock));
	if (!timeout_ns || td_list_empty(&q->in_flight))
		return false;
	struct td_request *oldest = td_list_first_entry(&q->in_flight, struct td_request, queuelist);
	uint64_t age = td_queue_now(q) - oldest->dispatch_ns;

	*e = (struct expired){
		.tag = oldest->tag,
		.op = oldest->op,
		.sector = oldest->sector,
		.age_ms = age / TD_NSEC_PER_MSEC,
	};
	return age > timeout_ns;
}

/* Of @qs, the queue whose oldest command was dispatched first; NULL when none has one. */
static struct td_queue *oldest_queue_locked(struct td_queue **qs, unsigned int n)
{
	struct td_queue *best = NULL;
	uint64_t best_ns = 0;

	for (unsigned int i = 0; i < n; i++) {
		if (td_list_empty(&qs[i]->in_flight))
			continue;
		struct td_request *rq =
			td_list_first_entry(&qs[i]->in_flight, struct td_request, queuelist);

		if (!best || rq->dispatch_ns < best_ns) {
			best = qs[i];
			best_ns = rq->dispatch_ns;
		}
	}
	return best;
}

unsigned int td_queue_reset_set(struct td_queue *owner, struct td_queue **qs, unsigned int n,
				struct td_queue *trigger, bool timeout)
{
	struct td_list failed = TD_LIST_INIT(failed);
	struct td_bio_list ends;
	struct expired e;
	unsigned int requeued = 0;

	td_bio_list_init(&ends);
	td_mutex_lock(&owner->reset_lock);
	for (unsigned int i = 0; i < n; i++)
		td_mutex_lock(&qs[i]->lock);
	if (trigger && !oldest_expired_locked(trigger, &e)) {
		/* It completed meanwhile: no timeout after all. */
		for (unsigned int i = n; i-- > 0;)
			td_mutex_unlock(&qs[i]->lock);
		td_mutex_unlock(&owner->reset_lock);
		return 0;
	}
	for (unsigned int i = 0; i < n; i++) {
		qs[i]->stopped++;
		qs[i]->gen++; /* completions from now on belong to the old generation */
	}
	for (unsigned int i = n; i-- > 0;)
		td_mutex_unlock(&qs[i]->lock);
	if (trigger)
		td_warnx("queue: tag %d (%s, sector %llu) timed out after %llu ms", e.tag,
			 td_op_name(e.op), (unsigned long long)e.sector,
			 (unsigned long long)e.age_ms);

	td_drive_quiesce(owner->drive);

	for (unsigned int i = 0; i < n; i++)
		td_mutex_lock(&qs[i]->lock);
	if (timeout) {
		/* The oldest command is charged whatever its age: the one the timer saw, or the oldest. */
		struct td_queue *oldest = trigger ? trigger : oldest_queue_locked(qs, n);

		for (unsigned int i = 0; i < n; i++)
			charge_timed_out_locked(qs[i], qs[i] == oldest);
	}
	for (unsigned int i = 0; i < n; i++) {
		struct td_queue *q = qs[i];

		requeued += td_queue_invalidate_tags_locked(q, &failed);
		uint64_t now = td_queue_now(q);

		while (!td_list_empty(&failed)) {
			struct td_request *rq =
				td_list_first_entry(&failed, struct td_request, queuelist);

			td_list_del(&rq->queuelist);
			td_queue_end_request_locked(q, rq, TD_TAG_NONE, rq->error, &ends, now);
		}
		q->stopped--;
		/* Freed tags may let other users of the map go, and the requeued must be run. */
		td_queue_kick_locked(q, i == 0);
	}
	td_stats_add(owner->stats, TD_STAT_RESETS, 1);
	if (timeout)
		td_stats_add(owner->stats, TD_STAT_TIMEOUTS, 1);
	for (unsigned int i = n; i-- > 0;)
		td_mutex_unlock(&qs[i]->lock);
	td_mutex_unlock(&owner->reset_lock);
	td_notice("queue: drive reset%s, %u command%s requeued", timeout ? " after a command timeout" : "",
		  requeued, requeued == 1 ? "" : "s");
	/* Last: once the final bio has ended, a drainer may destroy the queue. */
	td_queue_end_bios(owner, &ends);
	return requeued;
}

/* Reset @q's whole tag set; for the timer, only when @trigger's oldest command still expired. */
static unsigned int reset_queue(struct td_queue *q, bool timeout, struct td_queue *trigger)
{
	if (q->parent)
		q = q->parent;
	if (q->mode == TD_MODE_MQ)
		return td_queue_reset_set(q, q->hctxs, q->nr_hw, trigger, timeout);
	return td_queue_reset_set(q, &q, 1, trigger, timeout);
}

unsigned int td_queue_reset(struct td_queue *q, bool timeout)
{
	if (q->mode == TD_MODE_BIO)
		return 0;
	return reset_queue(q, timeout, NULL);
}

/* ---- timer ---------------------------------------------------------------------------- */

void *td_queue_timer_main(void *arg)
{
	struct td_queue *q = arg;

	td_thread_name("td-timer");
	td_mutex_lock(&q->lock);
	while (!q->timer_stop) {
		uint64_t now = td_now_ns();
		uint64_t period = TD_TIMER_PERIOD_NS;
		uint64_t timeout_ns = (uint64_t)q->command_timeout_ms * TD_NSEC_PER_MSEC;
		struct expired e;

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
			td_queue_kick_locked(q, true);
		}
		if (oldest_expired_locked(q, &e)) {
			td_mutex_unlock(&q->lock);
			reset_queue(q, true, q);
			td_mutex_lock(&q->lock);
		}
	}
	td_mutex_unlock(&q->lock);
	return NULL;
}

/* ---- abort ---------------------------------------------------------------------------- */

/*
 * Fail @rq (off every queue list, untagged) with -EIO, or, while a stale
 * backend call pins it, leave it ABORTED for td_queue_unpinned(). Lock held.
 * Return: true when it was left.
 */
static bool abort_request_locked(struct td_queue *q, struct td_request *rq, int tag,
				 struct td_bio_list *ends, uint64_t now)
{
	assert(td_lock_held(&q->lock));
	if (td_rq_pinned(rq)) {
		rq->state = TD_RQ_ABORTED;
		return true;
	}
	td_queue_end_request_locked(q, rq, tag, -EIO, ends, now);
	return false;
}

/*
 * Fail every request in the elevator and on the dispatch list; *@held counts
 * those left ABORTED. Return: how many.
 */
static unsigned int fail_queued_locked(struct td_queue *q, struct td_bio_list *ends, uint64_t now,
				       unsigned int *held)
{
	unsigned int n = 0;

	assert(td_lock_held(&q->lock));
	td_queue_drain_elevator_locked(q);
	while (!td_list_empty(&q->dispatch)) {
		struct td_request *rq = td_list_first_entry(&q->dispatch, struct td_request, queuelist);

		td_list_del(&rq->queuelist);
		q->nr_dispatch--;
		*held += abort_request_locked(q, rq, TD_TAG_NONE, ends, now);
		n++;
	}
	return n;
}

void td_queue_unpinned(void *ctx, struct td_request *rq)
{
	struct td_queue *q = rq->q;
	struct td_bio_list ends;

	(void)ctx;
	td_bio_list_init(&ends);
	td_mutex_lock(&q->lock);
	/* Anything else (requeued, dispatched again, ended, reused) is none of our business here. */
	if (rq->state != TD_RQ_ABORTED || td_rq_pinned(rq)) {
		td_mutex_unlock(&q->lock);
		return;
	}
	td_queue_end_request_locked(q, rq, TD_TAG_NONE, -EIO, &ends, td_queue_now(q));
	td_mutex_unlock(&q->lock);
	/* Last: once the final bio has ended, a drainer may destroy the queue. */
	td_queue_end_bios(q, &ends);
}

unsigned int td_queue_abort_set(struct td_queue **qs, unsigned int n, uint32_t waited_ms)
{
	struct td_bio_list ends;
	unsigned int failed = 0;
	unsigned int held = 0;
	unsigned int abandoned;

	td_bio_list_init(&ends);
	/* Dead first: nothing is dispatched from now on, and new bios fail at once. */
	for (unsigned int i = 0; i < n; i++) {
		struct td_queue *q = qs[i];

		td_mutex_lock(&q->lock);
		atomic_store(&q->dead, true);
		q->gen++;
		failed += fail_queued_locked(q, &ends, td_queue_now(q), &held);
		td_mutex_unlock(&q->lock);
	}

	abandoned = td_drive_abandon(qs[0]->drive);

	for (unsigned int i = 0; i < n; i++) {
		struct td_queue *q = qs[i];
		bool kick = false;

		td_mutex_lock(&q->lock);
		uint64_t now = td_queue_now(q);

		while (!td_list_empty(&q->in_flight)) {
			struct td_request *rq =
				td_list_first_entry(&q->in_flight, struct td_request, queuelist);
			int tag = rq->tag;

			/* The drive lets go without unlinking: its lists are gone or no longer looked at. */
			td_list_init(&rq->drive_list);
			kick |= td_queue_detach_inflight_locked(q, rq);
			held += abort_request_locked(q, rq, tag, &ends, now);
			failed++;
		}
		/* A reset that was under way may have requeued some meanwhile. */
		failed += fail_queued_locked(q, &ends, now, &held);
		if (kick)
			td_queue_kick_locked(q, true); /* other users of a shared map */
		td_mutex_unlock(&q->lock);
	}

	td_warnx("queue: %u request%s still outstanding after %u ms failed with EIO "
		 "(%u command%s abandoned by the drive; %u held until the backend call%s using "
		 "their buffers return%s)",
		 failed, failed == 1 ? "" : "s", waited_ms, abandoned, abandoned == 1 ? "" : "s",
		 held, held == 1 ? "" : "s", held == 1 ? "s" : "");
	td_queue_end_bios(qs[0], &ends);
	return failed;
}

unsigned int td_queue_abort(struct td_queue *q, uint32_t waited_ms)
{
	return td_queue_abort_set(&q, 1, waited_ms);
}
