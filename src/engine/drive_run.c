// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive_run.c - the drive's executors: accepting commands, the inline runner,
 * the worker threads and an inline drive's own thread, each command's life
 * with fault injection and delays. The backend call itself is in
 * drive_exec.c; taking commands back (quiesce, parking, the fence) in
 * drive_quiesce.c.
 *
 * When the drive accepts a command it decodes the command bytes once
 * (rq->drive_cmd); from then on it never looks at the request's own fields,
 * only at its decode and at the bio chain, which is the data buffer list.
 *
 * Who executes:
 *   inline (0 threads)  the thread that ran the queue, in td_drive_run_inline(),
 *                       in arrival order; and the drive's own thread
 *                       (td-drive-timer) for what the inline runner must not
 *                       wait for: commands whose injected latency has not
 *                       run out (d->timed, by due time, like null_blk's
 *                       completion timer), commands the fence holds, and the
 *                       commands of threads that never execute
 *                       (td_drive_hand_off) - these three wait on d->pending
 *                       or d->timed;
 *   executor threads    as many as the model asks for (model none and ssd:
 *                       workers; hdd: one actuator), each taking the command
 *                       the model picks off d->pending, in parallel.
 *
 * A command's life in the drive: pending -> executing (inject check, then a
 * delay if the model or an injected latency asks for one, then the backend
 * call) -> handed to the queue's completion function; or pending -> hung (an
 * injected hang) until a reset. d->executing counts commands taken off
 * pending or timed whose completion has not returned; inline commands are
 * counted in d->cmds. Delayed worker commands wait on their own condition
 * variable (delay_cond), so a submission's wake-up always goes to an idle
 * worker (work_cond); an inline drive's delayed commands wait on d->timed,
 * holding no thread at all.
 *
 * Every executor keeps its slot's ->held at the number of commands it holds
 * (see drive_quiesce.c), and starts nothing while the drive is fenced.
 */
#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "common/clock.h"
#include "common/lock.h"
#include "drive_int.h"
#include "tagdisk/cdb.h"
#include "tagdisk/drive.h"
#include "tagdisk/inject.h"

/* Return: true while a stale operation or call holds every command back. */
static inline bool fenced(struct td_drive *d)
{
	return atomic_load_explicit(&d->fenced, memory_order_relaxed);
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
	d->executing--;
	td_drive_wake_quiesce_locked(d);
}

/*
 * An inline drive: @rq waits on d->timed until @due, then the drive's thread
 * executes it, failing it with rq->error when that is set. Lock held.
 */
static void timed_add_locked(struct td_drive *d, struct td_request *rq, uint64_t due)
{
	struct td_list *pos = d->timed.prev;

	assert(td_lock_held(&d->lock));
	rq->drive_due_ns = due;
	/* Delays are mostly alike: the new one usually goes last. */
	while (pos != &d->timed &&
	       td_list_entry(pos, struct td_request, drive_list)->drive_due_ns > due)
		pos = pos->prev;
	td_list_add(&rq->drive_list, pos);
	d->nr_timed++;
	if (d->timed.next == &rq->drive_list)
		td_cond_broadcast(&d->work_cond); /* a new earliest: the timer thread looks again */
}

/*
 * Execute @rq, counted in executing and accepted at @seq, then complete it;
 * with @err set (an injected error, a rejected command) without a backend
 * call. @slot: the executor's (may be NULL). Called and returns with the
 * drive lock held; drops it meanwhile. Return: true when @rq was completed.
 */
static bool exec_command_locked(struct td_drive *d, struct td_request *rq, unsigned int seq,
				int err, struct td_drive_slot *slot)
{
	struct td_drive_park p = { .slot = slot, .rq = rq, .seq = seq };

	td_mutex_unlock(&d->lock);
	if (d->async && !err) {
		/* Submitted: the backend's completion completes it (drive_exec.c). */
		bool taken = td_drive_exec_async(d, rq, seq);

		td_mutex_lock(&d->lock);
		put_executing_locked(d);
		return taken;
	}
	if (!err)
		err = td_drive_exec(d, &rq->drive_cmd, rq->bio, &p);
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

/*
 * Run @rq, which was taken off pending with the lock held (executing counted)
 * at quiesce sequence @seq, with @model_ns of modelled service time. Called
 * and returns with the drive lock held; drops it around delays, I/O and the
 * completion call. Return: true when @rq was completed.
 */
static bool run_command_locked(struct td_drive *d, struct td_request *rq, unsigned int seq,
			       uint64_t model_ns, struct td_drive_slot *slot)
{
	struct td_inject_verdict v;
	const struct td_cdb_cmd *c = &rq->drive_cmd;

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
	int err = rq->drive_decode_err ? -EIO : v.error; /* an invalid command: the drive rejects it */
	uint64_t delay = model_ns + (uint64_t)v.latency_us * TD_NSEC_PER_USEC;

	if (delay && !wait_delay_locked(d, td_now_ns() + delay, seq)) {
		put_executing_locked(d);
		return false;
	}
	return exec_command_locked(d, rq, seq, err, slot);
}

void *td_drive_worker_main(void *arg)
{
	struct td_drive *d = arg;
	struct td_drive_slot *slot;

	td_thread_name(d->ops->thread_name);
	slot = td_drive_slot_get(d);
	td_mutex_lock(&d->lock);
	while (!d->stop) {
		/* The fence: nothing starts while a stale backend operation or call is out. */
		if (!d->nr_pending || fenced(d)) {
			td_cond_wait(&d->work_cond, &d->lock);
			continue;
		}
		uint64_t service_ns;
		struct td_request *rq = model_take_locked(d, &service_ns);

		if (slot)
			slot->held++;
		run_command_locked(d, rq, d->quiesce_seq, service_ns, slot);
		if (slot)
			slot->held--;
	}
	td_mutex_unlock(&d->lock);
	return NULL;
}

/* ---- inline drives -------------------------------------------------------------------- */

bool td_drive_submit_locked(struct td_drive *d, struct td_list *rqs)
{
	unsigned int seq = atomic_load(&d->quiesce_seq);
	struct td_list *pos;
	unsigned int n = 0;

	td_list_for_each(pos, rqs) {
		struct td_request *rq = td_list_entry(pos, struct td_request, drive_list);

		rq->drive_decode_err = (int16_t)td_cdb_decode(rq->cmd, rq->cmd_len, &rq->drive_cmd);
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
		 * them; seq_cst pairs with the load in the quiesce.
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
	atomic_fetch_sub(&d->cmds, claimed * TD_DRIVE_CLAIMED + handed * TD_DRIVE_HANDED);
	if (atomic_load(&d->quiescing)) {
		td_mutex_lock(&d->lock);
		td_cond_broadcast(&d->idle_cond);
		td_mutex_unlock(&d->lock);
	}
}

/* Give @first (may be NULL) and the rest of @rqs to the drive's thread; @rqs becomes empty. */
static void give_to_thread(struct td_drive *d, struct td_request *first, struct td_list *rqs)
{
	unsigned int n = 0;

	td_mutex_lock(&d->lock);
	for (struct td_request *rq = first;; rq = NULL) {
		if (!rq) {
			if (td_list_empty(rqs))
				break;
			rq = td_list_first_entry(rqs, struct td_request, drive_list);
			td_list_del(&rq->drive_list);
		}
		/* What a reset took back meanwhile is the queue's. */
		if (rq->drive_seq == d->quiesce_seq) {
			td_list_add_tail(&rq->drive_list, &d->pending);
			n++;
		}
	}
	d->nr_pending += n;
	if (n)
		td_cond_broadcast(&d->work_cond);
	td_mutex_unlock(&d->lock);
}

void td_drive_hand_off(struct td_drive *d, struct td_list *rqs)
{
	unsigned int n = 0;
	struct td_list *pos;

	assert(!d->nr_threads);
	td_list_for_each(pos, rqs)
		n++;
	if (!n)
		return;
	give_to_thread(d, NULL, rqs);
	inline_release(d, n, 0);
}

/*
 * Execute and complete the inline commands on @batch, claimed in d->cmds, in
 * this thread. With @inject, faults are checked first; without, the commands
 * come off d->timed, checked already, and fail with rq->error when it is set.
 * Return: the number executed.
 */
static unsigned int run_batch(struct td_drive *d, struct td_list *batch, bool inject)
{
	struct td_list done = TD_LIST_INIT(done);
	struct td_drive_slot *slot = td_drive_slot_get(d);
	unsigned int n = 0, ran = 0;
	struct td_list *pos;

	/* Ours until we park in a backend call: nobody else touches them before. */
	td_list_for_each(pos, batch)
		n++;
	if (slot)
		slot->held += n;
	while (!td_list_empty(batch)) {
		struct td_request *rq = td_list_first_entry(batch, struct td_request, drive_list);
		const struct td_cdb_cmd *c = &rq->drive_cmd;
		struct td_drive_park p = { .slot = slot, .rq = rq, .seq = rq->drive_seq };
		struct td_inject_verdict v = { .error = inject ? 0 : rq->error };

		td_list_del(&rq->drive_list);
		/* A reset began: the command is the queue's again. */
		if (atomic_load(&d->quiesce_seq) != p.seq)
			continue;
		if (td_unlikely(fenced(d))) {
			/* Nothing starts here now: the drive's thread starts them when the fence lifts. */
			give_to_thread(d, rq, batch);
			break;
		}
		if (inject)
			td_inject_check(d->inject, c->op, td_drive_cmd_sector(d, c),
					c->nr_blocks * (d->lbs >> TD_SECTOR_SHIFT), &v);
		if (td_unlikely(v.hang || v.latency_us)) {
			td_mutex_lock(&d->lock);
			if (d->quiesce_seq != p.seq) {
				/* Taken back meanwhile. */
			} else if (v.hang) {
				td_list_add_tail(&rq->drive_list, &d->hung);
				d->nr_hung++;
			} else {
				/* The delay holds no thread: the drive's thread takes it from here. */
				rq->error = rq->drive_decode_err ? -EIO : v.error;
				timed_add_locked(d, rq,
						 td_now_ns() + (uint64_t)v.latency_us * TD_NSEC_PER_USEC);
			}
			td_mutex_unlock(&d->lock);
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
				if (slot)
					slot->held -= n;
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
	if (slot)
		slot->held -= n;
	return ran;
}

unsigned int td_drive_run_inline(struct td_drive *d, struct td_list *rqs)
{
	return run_batch(d, rqs, true);
}

/*
 * Move @n commands from @from (d->pending, or the due head of d->timed) to
 * @batch as inline claims of the drive's thread. Lock held; every command
 * there is current (a quiesce empties both lists).
 */
static void claim_locked(struct td_drive *d, struct td_list *from, unsigned int n,
			 struct td_list *batch)
{
	assert(td_lock_held(&d->lock));
	for (unsigned int i = 0; i < n; i++) {
		struct td_request *rq = td_list_first_entry(from, struct td_request, drive_list);

		td_list_del(&rq->drive_list);
		td_list_add_tail(&rq->drive_list, batch);
	}
	atomic_fetch_add(&d->cmds, n * TD_DRIVE_CLAIMED);
}

void *td_drive_timer_main(void *arg)
{
	struct td_drive *d = arg;

	td_thread_name("td-drive-timer");
	td_mutex_lock(&d->lock);
	while (!d->stop) {
		struct td_list batch = TD_LIST_INIT(batch);
		unsigned int n = 0;
		bool inject = true;

		if (fenced(d) || (!d->nr_pending && !d->nr_timed)) {
			td_cond_wait(&d->work_cond, &d->lock);
			continue;
		}
		if (d->nr_pending) {
			n = d->nr_pending;
			claim_locked(d, &d->pending, n, &batch);
			d->nr_pending = 0;
		} else {
			uint64_t now = td_now_ns();
			struct td_list *pos;

			td_list_for_each(pos, &d->timed) {
				if (td_list_entry(pos, struct td_request, drive_list)->drive_due_ns > now)
					break;
				n++;
			}
			if (!n) {
				struct td_request *first =
					td_list_first_entry(&d->timed, struct td_request, drive_list);

				td_cond_wait_until(&d->work_cond, &d->lock, first->drive_due_ns);
				continue;
			}
			claim_locked(d, &d->timed, n, &batch);
			d->nr_timed -= n;
			inject = false;
		}
		td_mutex_unlock(&d->lock);
		run_batch(d, &batch, inject);
		td_mutex_lock(&d->lock);
	}
	td_mutex_unlock(&d->lock);
	return NULL;
}
