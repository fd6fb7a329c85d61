// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive_quiesce.c - taking commands back from the drive without ever waiting
 * for a backend call: td_drive_quiesce() (a reset) and td_drive_abandon() (a
 * bounded drain), the executors' slots and their parking around synchronous
 * calls, stale calls, the fence and the pins.
 *
 * A quiesce bumps d->quiesce_seq, drops what waits at the drive (pending,
 * hung and delayed commands), makes every asynchronous operation outstanding
 * stale, and waits until each executor has let go of the commands it holds,
 * except an executor parked in a synchronous backend call (pwrite on an
 * image whose file system is frozen, a volatile cache's write-back, librbd or
 * libnbd called synchronously): such a call cannot be taken back any more
 * than an operation sent to a server, so it becomes stale too, and the
 * commands its thread holds are the queue's again at once. Waiting for it
 * would hang the reset, the admin socket behind it and every later timeout
 * for as long as the medium hangs.
 *
 * Parking is Dekker's pattern, sequentially consistent on both sides:
 *
 *   executor:  slot->parked = 1; read quiesce_seq; call; slot->parked = 0; read quiesce_seq
 *   quiesce:   bump quiesce_seq; read each slot->parked
 *
 * Either the quiesce sees the slot parked (and may mark it stale), or the
 * executor sees the sequence moved before the call and does not make it.
 * After the call, an executor that sees the sequence moved touches none of
 * its commands again; if the quiesce saw it parked, it also saw the
 * sequence moved, and takes the drive lock to release what the quiesce marked.
 *
 * What a stale call leaves behind, until it returns:
 *  - the fence: the drive starts no command (d->fenced), so an old write can
 *    never land after a newer one, whatever their ranges; the queue's
 *    requeued commands wait at the drive, where timeouts still see them;
 *  - the pin: the call may still read or write its request's data buffers
 *    (a pool buffer, an io_uring entry's payload that the kernel refills once
 *    the request is answered), so the request carries rq->pinned and the
 *    queue ends no pinned request, neither with a result nor with an error;
 *    on return the pin is cleared and the unpin function told;
 *  - the commands the thread holds (slot->held: its whole inline batch, or
 *    a worker's one command, and those of the runs it is nested in when it
 *    executes from inside a completion call): a quiesce no longer waits for
 *    them, and the thread drops them unseen when it returns. The completion
 *    function is done with its list before it runs any queue (drive.h), so
 *    a nested call left behind leaves nothing still to be walked.
 * The call's result completes nothing: the queue has requeued its request,
 * and the retry runs once the fence lifts.
 *
 * Slots are found through a thread-local cache keyed by the drive's id, so
 * parking costs two sequentially consistent stores and two loads on a line
 * only its thread writes, and no lock.
 */
#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/lock.h"
#include "drive_int.h"
#include "tagdisk/drive.h"

_Thread_local uint64_t td_drive_slot_id;
_Thread_local struct td_drive_slot *td_drive_slot_cached;

struct td_drive_slot *td_drive_slot_lookup(struct td_drive *d)
{
	struct td_drive_slot *s = NULL;
	struct td_list *pos;
	pthread_t self = pthread_self();

	td_mutex_lock(&d->lock);
	td_list_for_each(pos, &d->slots) {
		struct td_drive_slot *t = td_list_entry(pos, struct td_drive_slot, link);

		if (pthread_equal(t->thread, self)) {
			s = t;
			break;
		}
	}
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (s) {
			s->thread = self;
			s->tid = (int32_t)gettid();
			atomic_init(&s->parked, false);
			td_list_add_tail(&s->link, &d->slots);
		}
	}
	td_mutex_unlock(&d->lock);
	if (s) {
		td_drive_slot_id = d->id;
		td_drive_slot_cached = s;
	}
	return s;
}

void td_drive_fence_update_locked(struct td_drive *d)
{
	bool fence = d->ops_stale || d->calls_stale;

	assert(td_lock_held(&d->lock));
	if (fence == atomic_load_explicit(&d->fenced, memory_order_relaxed))
		return;
	atomic_store_explicit(&d->fenced, fence, memory_order_relaxed);
	if (!fence) {
		/* The fence lifts: what waited for it may start, and a destroy may go on. */
		td_cond_broadcast(&d->work_cond);
		td_cond_broadcast(&d->idle_cond);
	}
}

void td_drive_wake_quiesce_locked(struct td_drive *d)
{
	assert(td_lock_held(&d->lock));
	if (atomic_load(&d->quiescing))
		td_cond_broadcast(&d->idle_cond);
}

bool td_drive_park(struct td_drive *d, struct td_drive_park *p, const struct td_cdb_cmd *c)
{
	struct td_drive_slot *s = p->slot;

	s->rq = p->rq;
	s->seq = p->seq;
	s->op = c->op;
	s->sector = td_drive_cmd_sector(d, c);
	s->nr_sectors = c->nr_blocks * (d->lbs >> TD_SECTOR_SHIFT);
	s->start_ns = td_clock_now_coarse(NULL);
	/* seq_cst: pairs with the bump of quiesce_seq and the read of ->parked in take_back(). */
	atomic_store(&s->parked, true);
	if (td_likely(atomic_load(&d->quiesce_seq) == p->seq))
		return true;
	/* Taken back already: no call. A quiesce may have seen us parked meanwhile. */
	td_drive_unpark(d, p);
	return false;
}

/* A stale call returned: release its mark and its share of the fence. Lock held. */
static void release_stale_locked(struct td_drive *d, struct td_drive_slot *s)
{
	assert(td_lock_held(&d->lock) && s->stale && d->calls_stale > 0);
	s->stale = false;
	assert(d->stale_held >= s->stale_held);
	d->stale_held -= s->stale_held;
	s->stale_held = 0;
	d->calls_stale--;
	td_drive_fence_update_locked(d);
}

void td_drive_unpark(struct td_drive *d, struct td_drive_park *p)
{
	struct td_drive_slot *s = p->slot;
	bool stale;

	/* seq_cst: the same pairing as in td_drive_park(). */
	atomic_store(&s->parked, false);
	if (td_likely(atomic_load(&d->quiesce_seq) == p->seq)) {
		p->abandoned = false;
		return;
	}
	p->abandoned = true;
	/* Only we clear the mark, and nobody sets it on a slot that is not parked: stable. */
	td_mutex_lock(&d->lock);
	stale = s->stale;
	td_mutex_unlock(&d->lock);
	if (!stale)
		return;
	/*
	 * The pin goes first, and its owner hears of it, before the call stops
	 * counting as stale: so once no stale call is left, every request a
	 * pin held back has been dealt with (a bounded drain's owner may then
	 * free everything). Release: the buffers' last use by the call happens
	 * before whoever sees the pin clear.
	 */
	if (s->rq) {
		atomic_store_explicit(&s->rq->pinned, false, memory_order_release);
		if (d->unpin)
			d->unpin(d->complete_ctx, s->rq);
	}
	td_mutex_lock(&d->lock);
	release_stale_locked(d, s);
	td_mutex_unlock(&d->lock);
}

/*
 * Drop what is pending, hung or delayed (the queue still lists them in
 * flight), and make the outstanding asynchronous operations stale. Drive
 * lock held; the quiesce sequence has just moved. Return: the commands
 * taken back.
 */
static unsigned int drop_waiting_locked(struct td_drive *d)
{
	unsigned int dropped = d->nr_pending + d->nr_hung + d->nr_timed + d->ops_current;

	assert(td_lock_held(&d->lock));
	d->ops_stale += d->ops_current;
	d->ops_current = 0;
	while (!td_list_empty(&d->pending))
		td_list_del(d->pending.next);
	while (!td_list_empty(&d->hung))
		td_list_del(d->hung.next);
	while (!td_list_empty(&d->timed))
		td_list_del(d->timed.next);
	d->nr_pending = 0;
	d->nr_hung = 0;
	d->nr_timed = 0;
	td_cond_broadcast(&d->delay_cond); /* delayed commands give up */
	td_cond_broadcast(&d->work_cond);  /* the timer thread has nothing left to wait for */
	return dropped;
}

/*
 * Mark stale every call parked under an older quiesce sequence: its request
 * is pinned, the drive fenced, and the commands its thread holds are no
 * longer waited for. Lock held. Return: the commands so left behind.
 */
static unsigned int mark_stale_locked(struct td_drive *d)
{
	unsigned int seq = atomic_load_explicit(&d->quiesce_seq, memory_order_relaxed);
	unsigned int held = 0;
	struct td_list *pos;

	assert(td_lock_held(&d->lock));
	td_list_for_each(pos, &d->slots) {
		struct td_drive_slot *s = td_list_entry(pos, struct td_drive_slot, link);

		/* seq_cst: see td_drive_park(). */
		if (s->stale || !atomic_load(&s->parked) || s->seq == seq)
			continue;
		s->stale = true;
		s->stale_held = s->held;
		d->stale_held += s->held;
		d->calls_stale++;
		held += s->held;
		/* Relaxed: the queue reads it after this quiesce returned to it. */
		if (s->rq)
			atomic_store_explicit(&s->rq->pinned, true, memory_order_relaxed);
	}
	return held;
}

/* td_drive_quiesce() and td_drive_abandon(): they are one and the same now. */
static unsigned int take_back(struct td_drive *d)
{
	unsigned int dropped;

	td_mutex_lock(&d->lock);
	unsigned int ops_before = d->ops_stale;
	unsigned int calls_before = d->calls_stale;

	atomic_fetch_add(&d->quiescing, 1);
	/* seq_cst: pairs with td_drive_park() and td_drive_unpark(), which read it after ->parked. */
	atomic_fetch_add(&d->quiesce_seq, 1);
	dropped = drop_waiting_locked(d);
	/*
	 * Wait until every executor has let go of what it holds, except those in
	 * a call left behind. Inline runners and unparking executors signal
	 * without our lock: look again every millisecond too.
	 */
	for (;;) {
		dropped += mark_stale_locked(d);
		uint64_t cmds = atomic_load(&d->cmds);

		if (d->executing + td_drive_cmds_claimed(cmds) <= d->stale_held)
			break;
		td_cond_wait_until(&d->idle_cond, &d->lock, td_now_ns() + TD_NSEC_PER_MSEC);
	}
	if (d->ops_stale > ops_before || d->calls_stale > calls_before)
		d->fences++;
	td_drive_fence_update_locked(d);
	atomic_fetch_sub(&d->quiescing, 1);
	td_mutex_unlock(&d->lock);
	return dropped;
}

unsigned int td_drive_quiesce(struct td_drive *d)
{
	return take_back(d);
}

unsigned int td_drive_abandon(struct td_drive *d)
{
	return take_back(d);
}

unsigned int td_drive_get_stale_calls(struct td_drive *d, struct td_drive_call *out,
				      unsigned int max)
{
	uint64_t now = td_clock_now_coarse(NULL);
	unsigned int n = 0;
	struct td_list *pos;

	td_mutex_lock(&d->lock);
	td_list_for_each(pos, &d->slots) {
		struct td_drive_slot *s = td_list_entry(pos, struct td_drive_slot, link);

		if (!s->stale)
			continue;
		/* Stable while stale: its thread is in the call, and takes our lock to leave it. */
		if (n < max && out)
			out[n] = (struct td_drive_call){
				.tid = s->tid,
				.op = s->op,
				.sector = s->sector,
				.nr_sectors = s->nr_sectors,
				.age_us = now > s->start_ns ? (now - s->start_ns) / TD_NSEC_PER_USEC : 0,
			};
		n++;
	}
	td_mutex_unlock(&d->lock);
	return n;
}

void td_drive_slots_free(struct td_drive *d)
{
	while (!td_list_empty(&d->slots)) {
		struct td_drive_slot *s = td_list_first_entry(&d->slots, struct td_drive_slot, link);

		assert(!s->stale && !atomic_load(&s->parked));
		td_list_del(&s->link);
		free(s);
	}
}
