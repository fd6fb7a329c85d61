// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * trace.c - the trace hub: fan block-layer events out to subscriber rings.
 *
 * Data structure
 *
 *   struct td_trace_priv holds a mutex and the list of subscribers. Each
 *   subscriber owns a ring of 2^k events, allocated once at subscribe time,
 *   with two free-running 64-bit counters: head (events ever written) and
 *   tail (events ever read). The ring holds head - tail events, the oldest
 *   at index tail & mask; it is full when head - tail == mask + 1. The
 *   counters never wrap in practice (2^64 events).
 *
 *   Emit writes into every ring under the mutex, or bumps that ring's
 *   dropped counter when it is full: the newest event is the one lost, so a
 *   reader always sees an unbroken prefix followed by a gap it is told the
 *   size of. Nothing on the emit path allocates or waits on anything but the
 *   mutex, which is only ever held for copying a bounded number of events.
 *
 *   nr_subs mirrors the length of the list so td_trace_emit() can skip all of
 *   this with one relaxed load. It is written under the mutex; the list is
 *   the authority, so a racing emitter that reads a stale nr_subs merely
 *   takes the mutex for nothing, or misses an event emitted while a
 *   subscription was still being set up, which no reader can tell apart from
 *   an event emitted just before it subscribed.
 *
 * LOCKING: priv->lock guards the list and every field of every subscriber.
 * It is last in the global order (tagdisk/queue.h): emit may be called with
 * the queue or drive lock held, and nothing here takes another lock.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/list.h"
#include "common/lock.h"
#include "tagdisk/trace.h"

struct td_trace_priv {
	struct td_mutex lock;
	struct td_list subs; /* of td_trace_sub.link; guarded by lock */
};

struct td_trace_sub {
	struct td_list link;	    /* in td_trace_priv.subs; guarded by lock */
	struct td_trace_event *ring; /* mask + 1 events */
	size_t mask;
	uint64_t head;	  /* guarded by lock: events written */
	uint64_t tail;	  /* guarded by lock: events read */
	uint64_t dropped; /* guarded by lock: lost to a full ring since the last read */
};

struct td_trace *td_trace_create(void)
{
	struct td_trace *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->priv = calloc(1, sizeof(*t->priv));
	if (!t->priv)
		goto out_free_trace;
	td_mutex_init(&t->priv->lock);
	td_list_init(&t->priv->subs);
	atomic_init(&t->nr_subs, 0);
	return t;

out_free_trace:
	free(t);
	return NULL;
}

void td_trace_destroy(struct td_trace *t)
{
	assert(td_list_empty(&t->priv->subs));
	assert(atomic_load_explicit(&t->nr_subs, memory_order_relaxed) == 0);
	td_mutex_destroy(&t->priv->lock);
	free(t->priv);
	free(t);
}

struct td_trace_sub *td_trace_subscribe(struct td_trace *t, size_t capacity)
{
	/* Rounding up at most doubles it, so the ring's size in bytes cannot overflow. */
	const size_t max_capacity = SIZE_MAX / 2 / sizeof(struct td_trace_event);
	struct td_trace_priv *p = t->priv;
	struct td_trace_sub *sub;
	size_t size = 1;

	if (capacity > max_capacity) {
		errno = ENOMEM;
		return NULL;
	}
	while (size < capacity)
		size <<= 1;

	sub = calloc(1, sizeof(*sub));
	if (!sub)
		return NULL;
	sub->ring = calloc(size, sizeof(*sub->ring));
	if (!sub->ring)
		goto out_free_sub;
	sub->mask = size - 1;

	td_mutex_lock(&p->lock);
	td_list_add_tail(&sub->link, &p->subs);
	atomic_fetch_add_explicit(&t->nr_subs, 1, memory_order_relaxed);
	td_mutex_unlock(&p->lock);
	return sub;

out_free_sub:
	free(sub);
	return NULL;
}

void td_trace_unsubscribe(struct td_trace *t, struct td_trace_sub *sub)
{
	struct td_trace_priv *p = t->priv;

	td_mutex_lock(&p->lock);
	assert(atomic_load_explicit(&t->nr_subs, memory_order_relaxed) > 0);
	td_list_del(&sub->link);
	atomic_fetch_sub_explicit(&t->nr_subs, 1, memory_order_relaxed);
	td_mutex_unlock(&p->lock);

	free(sub->ring);
	free(sub);
}

size_t td_trace_read(struct td_trace *t, struct td_trace_sub *sub, struct td_trace_event *out,
		     size_t max, uint64_t *dropped)
{
	struct td_trace_priv *p = t->priv;
	size_t n;

	td_mutex_lock(&p->lock);
	n = (size_t)TD_MIN((uint64_t)max, sub->head - sub->tail);
	for (size_t done = 0; done < n;) {
		size_t at = (size_t)(sub->tail & sub->mask);
		/* Copy up to the end of the ring, then wrap. */
		size_t chunk = TD_MIN(n - done, sub->mask + 1 - at);

		memcpy(out + done, sub->ring + at, chunk * sizeof(*out));
		done += chunk;
		sub->tail += chunk;
	}
	*dropped = sub->dropped;
	sub->dropped = 0;
	td_mutex_unlock(&p->lock);
	return n;
}

void td_trace_emit_slow(struct td_trace *t, const struct td_trace_event *ev)
{
	struct td_trace_priv *p = t->priv;
	struct td_list *pos;

	td_mutex_lock(&p->lock);
	td_list_for_each(pos, &p->subs) {
		struct td_trace_sub *sub = td_list_entry(pos, struct td_trace_sub, link);

		if (sub->head - sub->tail > sub->mask) {
			sub->dropped++;
			continue;
		}
		sub->ring[sub->head & sub->mask] = *ev;
		sub->head++;
	}
	td_mutex_unlock(&p->lock);
}
