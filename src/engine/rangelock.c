// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rangelock.c - shared/exclusive byte-range locks for read-modify-write.
 *
 * Two lists under rl->lock:
 *
 *   shared     granted shared ranges, in no particular order. A shared
 *              request never waits once linked, so every entry is granted.
 *   exclusive  exclusive ranges in arrival order, granted and waiting alike.
 *              An exclusive request is linked here before it waits, so
 *              shared requests that arrive later see it and queue behind it.
 *
 * Rules, checked with the mutex held:
 *   - a shared request waits while it overlaps any entry of the exclusive
 *     list, granted or waiting (a stream of shared writers cannot starve an
 *     RMW);
 *   - an exclusive request waits while it overlaps a shared range, or an
 *     exclusive entry linked before it (FIFO among overlapping exclusives).
 *     Exclusive entries linked after it never overlap it while granted: they
 *     would have had to wait for it.
 *
 * No cycle of waits can form: a granted range never waits, and a waiting
 * exclusive only waits for granted ranges and for exclusives older than
 * itself. This holds as long as no thread waits for a range while it holds
 * another one, which tagdisk never does (each byte I/O holds one range).
 *
 * The common case, shared requests with no RMW anywhere, costs a mutex
 * round-trip and a list insert: the exclusive list is empty, so nothing is
 * scanned. Shared unlock wakes nobody then either, since only exclusives and
 * shared requests behind exclusives ever wait, and all of them are on the
 * exclusive list or behind an entry of it. One condition variable serves
 * every waiter; each rechecks its own conflicts on wake-up.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include "common/lock.h"
#include "tagdisk/rangelock.h"

struct td_rangelock {
	struct td_mutex lock;
	struct td_cond cond;	  /* broadcast whenever a range is released */
	struct td_list shared;	  /* lock: granted shared ranges */
	struct td_list exclusive; /* lock: exclusive ranges, oldest first, granted or waiting */
	size_t nr_shared;	  /* lock: entries on shared */
	size_t nr_exclusive;	  /* lock: entries on exclusive */
};

struct td_rangelock *td_rangelock_create(void)
{
	struct td_rangelock *rl = calloc(1, sizeof(*rl));

	if (!rl)
		return NULL;
	td_mutex_init(&rl->lock);
	td_cond_init(&rl->cond);
	td_list_init(&rl->shared);
	td_list_init(&rl->exclusive);
	return rl;
}

void td_rangelock_destroy(struct td_rangelock *rl)
{
	assert(td_list_empty(&rl->shared) && rl->nr_shared == 0);
	assert(td_list_empty(&rl->exclusive) && rl->nr_exclusive == 0);
	td_cond_destroy(&rl->cond);
	td_mutex_destroy(&rl->lock);
	free(rl);
}

/* An empty range overlaps nothing. */
static bool ranges_overlap(const struct td_range *a, const struct td_range *b)
{
	return a->start < a->end && b->start < b->end && a->start < b->end && b->start < a->end;
}

static bool shared_blocked_locked(struct td_rangelock *rl, const struct td_range *r)
{
	struct td_list *pos;

	assert(td_lock_held(&rl->lock));
	td_list_for_each(pos, &rl->exclusive) {
		if (ranges_overlap(r, td_list_entry(pos, struct td_range, link)))
			return true;
	}
	return false;
}

static bool exclusive_blocked_locked(struct td_rangelock *rl, const struct td_range *r)
{
	struct td_list *pos;

	assert(td_lock_held(&rl->lock));
	td_list_for_each(pos, &rl->exclusive) {
		if (pos == &r->link)
			break;
		if (ranges_overlap(r, td_list_entry(pos, struct td_range, link)))
			return true;
	}
	td_list_for_each(pos, &rl->shared) {
		if (ranges_overlap(r, td_list_entry(pos, struct td_range, link)))
			return true;
	}
	return false;
}

void td_range_lock(struct td_rangelock *rl, struct td_range *r, uint64_t start, uint64_t end,
		   bool exclusive)
{
	assert(start <= end);
	r->start = start;
	r->end = end;
	r->exclusive = exclusive;
	r->granted = false;

	td_mutex_lock(&rl->lock);
	if (exclusive) {
		td_list_add_tail(&r->link, &rl->exclusive);
		rl->nr_exclusive++;
		while (exclusive_blocked_locked(rl, r))
			td_cond_wait(&rl->cond, &rl->lock);
	} else {
		if (td_unlikely(!td_list_empty(&rl->exclusive))) {
			while (shared_blocked_locked(rl, r))
				td_cond_wait(&rl->cond, &rl->lock);
		}
		td_list_add_tail(&r->link, &rl->shared);
		rl->nr_shared++;
	}
	r->granted = true;
	td_mutex_unlock(&rl->lock);
}

void td_range_unlock(struct td_rangelock *rl, struct td_range *r)
{
	td_mutex_lock(&rl->lock);
	assert(r->granted);
	td_list_del(&r->link);
	r->granted = false;
	if (r->exclusive) {
		assert(rl->nr_exclusive > 0);
		rl->nr_exclusive--;
	} else {
		assert(rl->nr_shared > 0);
		rl->nr_shared--;
	}
	/*
	 * With no exclusive range left or waiting, nobody waits: skip the wake-up.
	 * Broadcast with the mutex held, so that a woken thread cannot release
	 * the last range and destroy @rl before this call is done with it.
	 */
	if (r->exclusive || !td_list_empty(&rl->exclusive))
		td_cond_broadcast(&rl->cond);
	td_mutex_unlock(&rl->lock);
}
