// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * trace.c - the trace hub: block-layer events into per-thread rings, merged
 * by time when a subscriber reads them.
 *
 * Data structure
 *
 *   Thread slots (process-wide): a thread that first emits claims one of
 *   TD_TRACE_MAX_THREADS slots and keeps it until it exits (a pthread key
 *   destructor frees it). A slot has a busy flag, set while its thread is
 *   inside td_trace_emit_slow().
 *
 *   A hub has an array of TD_TRACE_MAX_SUBS subscriber pointers. A
 *   subscriber is one anonymous mapping: its own struct, then a pool of
 *   nr_rings rings, all faulted in when it subscribes (under mlockall with
 *   MCL_ONFAULT nothing would be resident, or locked, before it is touched,
 *   so the pages are touched there, not by the first events). The mapping's
 *   size is what the subscriber takes from the hub's budget, and munmap()
 *   gives it back. The subscriber has one ring pointer per thread slot; the
 *   slot's thread takes the next ring of the pool the first time it emits
 *   for that subscriber (an atomic index, nothing allocated or cleared).
 *   A ring is single-producer (the slot's thread: a slot passes to a new
 *   thread only after the old one exited, through the slot's release/acquire
 *   hand-over) and single-consumer (the reader): 2^k events and two
 *   free-running counters, head (written) and tail (read), as in the kernel's
 *   relay buffers but per thread rather than per CPU, since a user-space
 *   thread can be preempted or migrated between reserving and filling a slot.
 *
 *   A full ring drops the newest event and counts it in the ring (written by
 *   its producer only) and in the hub's total; the reader reports the
 *   difference since its last read, so a reader sees every ring as an
 *   unbroken prefix followed by a gap it is told the size of.
 *
 *   Reading merges the rings: a binary heap of the rings that have events,
 *   keyed by the time of each one's oldest event. Each thread stamps its
 *   events in order, so each ring is sorted and the merge is sorted.
 *
 * Unsubscribing without a lock on the emit path: the unsubscriber clears the
 * hub's pointer, then waits until no slot is busy; an emitter sets its busy
 * flag before it loads the pointer. Both are seq_cst, so either the emitter
 * sees NULL or the unsubscriber sees it busy and waits (Dekker's pattern).
 * Once every slot has been seen idle, no emitter can reach the subscriber.
 *
 * LOCKING: priv->lock serialises subscribe and unsubscribe, and guards the
 * budget's use (it is last in the global order, tagdisk/queue.h). Emit takes
 * no lock.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "common/lock.h"
#include "common/prefault.h"
#include "tagdisk/trace.h"

struct td_trace_ring {
	_Atomic uint64_t head td_cacheline_aligned; /* producer: events written */
	uint64_t cached_tail;			    /* producer's copy of tail */
	_Atomic uint64_t dropped;		    /* producer: lost to a full ring */
	_Atomic uint64_t tail td_cacheline_aligned; /* consumer: events read */
	uint64_t dropped_seen;			    /* consumer: dropped when last read */
	uint64_t head_seen;			    /* consumer: head when last read */
	size_t mask;
	struct td_trace_event ev[];
};

struct td_trace_sub {
	unsigned int index; /* in priv->subs */
	size_t size;	    /* events per ring, a power of two */
	size_t map_bytes;   /* the mapping: this struct and the pool */
	size_t charged;	    /* taken from the budget: map_bytes and extra_bytes */
	size_t ring_stride; /* bytes from one ring of the pool to the next */
	char *pool;	    /* the first ring */
	unsigned int nr_rings;
	/* Rings handed to threads; may pass nr_rings by the threads that raced for the last. */
	_Atomic unsigned int rings_taken;
	_Atomic uint64_t ringless; /* events lost because no ring was left for their thread */
	uint64_t ringless_seen;	   /* consumer */
	uint64_t slotless_seen;	   /* consumer: priv->slotless when last read (or subscribed) */
	_Atomic(struct td_trace_ring *) rings[TD_TRACE_MAX_THREADS];
	struct td_trace_ring *heap[TD_TRACE_MAX_THREADS]; /* consumer: the merge */
};

struct td_trace_priv {
	struct td_mutex lock; /* subscribe / unsubscribe */
	_Atomic(struct td_trace_sub *) subs[TD_TRACE_MAX_SUBS];
	size_t budget;		   /* bytes, fixed */
	_Atomic size_t used;	   /* bytes mapped by subscribers; written under lock */
	_Atomic uint64_t dropped;  /* every drop, for stats */
	_Atomic uint64_t slotless; /* events of threads that found no free slot */
};

/* ---- thread slots ----------------------------------------------------------------------- */

struct slot {
	_Atomic bool used;
	_Atomic bool busy; /* seq_cst: pairs with unsubscribe's clearing of the pointer */
} td_cacheline_aligned;

static struct slot slots[TD_TRACE_MAX_THREADS];
static _Atomic unsigned int nr_free_slots = TD_TRACE_MAX_THREADS;
static pthread_key_t slot_key;
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;
static _Thread_local int my_slot = -1;

static void slot_release(void *arg)
{
	unsigned int s = (unsigned int)(uintptr_t)arg - 1;

	/* Release: pairs with the next owner's acquiring claim; it takes over the rings. */
	atomic_store_explicit(&slots[s].used, false, memory_order_release);
	atomic_fetch_add_explicit(&nr_free_slots, 1, memory_order_relaxed);
	my_slot = -1;
}

static void slot_key_create(void)
{
	if (pthread_key_create(&slot_key, slot_release))
		abort();
}

/* Return: this thread's slot, claimed now if it has none; -1 when all are taken. */
static int slot_get(void)
{
	if (td_likely(my_slot >= 0))
		return my_slot;
	if (!atomic_load_explicit(&nr_free_slots, memory_order_relaxed))
		return -1;
	pthread_once(&slot_once, slot_key_create);
	for (unsigned int s = 0; s < TD_TRACE_MAX_THREADS; s++) {
		bool expected = false;

		/* Acquire: pairs with slot_release() of the thread that had it before. */
		if (!atomic_load_explicit(&slots[s].used, memory_order_relaxed) &&
		    atomic_compare_exchange_strong_explicit(&slots[s].used, &expected, true,
							    memory_order_acquire,
							    memory_order_relaxed)) {
			if (pthread_setspecific(slot_key, (void *)(uintptr_t)(s + 1))) {
				atomic_store_explicit(&slots[s].used, false, memory_order_release);
				return -1;
			}
			atomic_fetch_sub_explicit(&nr_free_slots, 1, memory_order_relaxed);
			my_slot = (int)s;
			return my_slot;
		}
	}
	return -1;
}

/* ---- hub -------------------------------------------------------------------------------- */

struct td_trace *td_trace_create(size_t budget_bytes)
{
	struct td_trace *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->priv = calloc(1, sizeof(*t->priv));
	if (!t->priv)
		goto out_free_trace;
	td_mutex_init(&t->priv->lock);
	t->priv->budget = budget_bytes;
	atomic_init(&t->nr_subs, 0);
	return t;

out_free_trace:
	free(t);
	return NULL;
}

void td_trace_destroy(struct td_trace *t)
{
	assert(atomic_load_explicit(&t->nr_subs, memory_order_relaxed) == 0);
	assert(atomic_load_explicit(&t->priv->used, memory_order_relaxed) == 0);
	td_mutex_destroy(&t->priv->lock);
	free(t->priv);
	free(t);
}

uint64_t td_trace_dropped(const struct td_trace *t)
{
	return atomic_load_explicit(&t->priv->dropped, memory_order_relaxed);
}

size_t td_trace_budget(struct td_trace *t, size_t *used)
{
	if (used)
		*used = atomic_load_explicit(&t->priv->used, memory_order_relaxed);
	return t->priv->budget;
}

size_t td_trace_sub_ring_events(const struct td_trace_sub *sub)
{
	return sub->size;
}

size_t td_trace_sub_bytes(const struct td_trace_sub *sub)
{
	return sub->charged;
}

/* @events rounded up to a power of two, at most TD_TRACE_RING_EVENTS_MAX. */
static size_t ring_size(size_t events)
{
	size_t size = 1;

	while (size < events && size < TD_TRACE_RING_EVENTS_MAX)
		size <<= 1;
	return size;
}

static size_t round_up(size_t n, size_t to)
{
	return (n + to - 1) / to * to;
}

/* Bytes from one ring of a pool to the next: the ring, aligned as its counters require. */
static size_t ring_stride(size_t size)
{
	return round_up(sizeof(struct td_trace_ring) + size * sizeof(struct td_trace_event),
			_Alignof(struct td_trace_ring));
}

/* Offset of the pool in a subscriber's mapping. */
static size_t pool_offset(void)
{
	return round_up(sizeof(struct td_trace_sub), _Alignof(struct td_trace_ring));
}

/* The mapping for @nr_rings rings of @size events (a power of two), or SIZE_MAX. */
static size_t map_bytes(size_t size, unsigned int nr_rings)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t bytes;

	/* size <= TD_TRACE_RING_EVENTS_MAX: one stride fits; the product may not. */
	if (__builtin_mul_overflow(ring_stride(size), (size_t)nr_rings, &bytes) ||
	    __builtin_add_overflow(bytes, pool_offset() + page - 1, &bytes))
		return SIZE_MAX;
	return bytes / page * page;
}

size_t td_trace_sub_cost(size_t ring_events, unsigned int nr_rings)
{
	return map_bytes(ring_size(ring_events), nr_rings);
}

/*
 * Map, fault in and lay out a subscriber of @nr_rings rings of @size events
 * in @bytes (map_bytes()). Return: it, or NULL (errno set).
 */
static struct td_trace_sub *sub_map(size_t size, unsigned int nr_rings, size_t bytes)
{
	struct td_trace_sub *sub;
	char *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (base == MAP_FAILED)
		return NULL;
	if (td_prefault(base, bytes)) {
		munmap(base, bytes);
		errno = ENOMEM;
		return NULL;
	}
	/* An anonymous mapping is zeroed: only what is not zero is set. */
	sub = (struct td_trace_sub *)(void *)base;
	sub->size = size;
	sub->map_bytes = bytes;
	sub->ring_stride = ring_stride(size);
	sub->pool = base + pool_offset();
	sub->nr_rings = nr_rings;
	for (unsigned int i = 0; i < nr_rings; i++) {
		struct td_trace_ring *r = (void *)(sub->pool + i * sub->ring_stride);

		r->mask = size - 1;
	}
	return sub;
}

struct td_trace_sub *td_trace_subscribe(struct td_trace *t, const struct td_trace_sub_params *p)
{
	struct td_trace_priv *pv = t->priv;
	size_t size = ring_size(p->ring_events);
	size_t min_size = p->min_ring_events ? ring_size(p->min_ring_events) : size;
	struct td_trace_sub *sub = NULL;
	unsigned int index;
	size_t left;
	size_t bytes;

	if (!p->nr_rings || p->nr_rings > TD_TRACE_MAX_THREADS) {
		errno = EINVAL;
		return NULL;
	}
	td_mutex_lock(&pv->lock);
	for (index = 0; index < TD_TRACE_MAX_SUBS; index++)
		if (!atomic_load_explicit(&pv->subs[index], memory_order_relaxed))
			break;
	if (index == TD_TRACE_MAX_SUBS) {
		errno = EBUSY;
		goto out_unlock;
	}
	left = pv->budget - atomic_load_explicit(&pv->used, memory_order_relaxed);
	if (p->extra_bytes > left) {
		errno = ENOSPC;
		goto out_unlock;
	}
	left -= p->extra_bytes;
	bytes = map_bytes(size, p->nr_rings);
	while (bytes > left && size > min_size) {
		size >>= 1;
		bytes = map_bytes(size, p->nr_rings);
	}
	if (bytes > left) {
		errno = ENOSPC;
		goto out_unlock;
	}
	sub = sub_map(size, p->nr_rings, bytes);
	if (!sub) {
		errno = ENOMEM;
		goto out_unlock;
	}
	sub->index = index;
	sub->charged = bytes + p->extra_bytes;
	sub->slotless_seen = atomic_load_explicit(&pv->slotless, memory_order_relaxed);
	atomic_fetch_add_explicit(&pv->used, sub->charged, memory_order_relaxed);
	/* Release: emitters that see the pointer see the pool laid out. */
	atomic_store_explicit(&pv->subs[index], sub, memory_order_release);
	atomic_fetch_add_explicit(&t->nr_subs, 1, memory_order_relaxed);
out_unlock:
	td_mutex_unlock(&pv->lock);
	return sub;
}

void td_trace_unsubscribe(struct td_trace *t, struct td_trace_sub *sub)
{
	struct td_trace_priv *p = t->priv;
	size_t bytes = sub->map_bytes;
	size_t charged = sub->charged;

	td_mutex_lock(&p->lock);
	assert(atomic_load_explicit(&p->subs[sub->index], memory_order_relaxed) == sub);
	/* seq_cst: pairs with the emitter's busy flag (the top of this file). */
	atomic_store(&p->subs[sub->index], NULL);
	atomic_fetch_sub_explicit(&t->nr_subs, 1, memory_order_relaxed);

	for (unsigned int s = 0; s < TD_TRACE_MAX_THREADS; s++)
		while (atomic_load(&slots[s].busy))
			sched_yield();
	if (munmap(sub, bytes))
		abort(); /* only a bad address fails: a bug */
	atomic_fetch_sub_explicit(&p->used, charged, memory_order_relaxed);
	td_mutex_unlock(&p->lock);
}

/* ---- emit ------------------------------------------------------------------------------- */

static void count_drop(struct td_trace *t, struct td_trace_ring *r)
{
	if (r)
		atomic_store_explicit(&r->dropped,
				      atomic_load_explicit(&r->dropped, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	atomic_fetch_add_explicit(&t->priv->dropped, 1, memory_order_relaxed);
}

/* Return: the next ring of @sub's pool, or NULL when every ring is taken. */
static struct td_trace_ring *ring_take(struct td_trace_sub *sub)
{
	unsigned int i;

	/* Load first: a thread without a ring does not push the index on each event. */
	if (atomic_load_explicit(&sub->rings_taken, memory_order_relaxed) >= sub->nr_rings)
		return NULL;
	i = atomic_fetch_add_explicit(&sub->rings_taken, 1, memory_order_relaxed);
	if (i >= sub->nr_rings)
		return NULL;
	return (struct td_trace_ring *)(void *)(sub->pool + i * sub->ring_stride);
}

static void ring_put(struct td_trace *t, struct td_trace_sub *sub, unsigned int s,
		     const struct td_trace_event *ev)
{
	struct td_trace_ring *r = atomic_load_explicit(&sub->rings[s], memory_order_relaxed);
	uint64_t head;

	if (td_unlikely(!r)) {
		r = ring_take(sub);
		if (!r) {
			atomic_fetch_add_explicit(&sub->ringless, 1, memory_order_relaxed);
			count_drop(t, NULL);
			return;
		}
		/*
		 * Release: pairs with the reader's acquire. The ring was laid out before
		 * the subscriber was published, so this only orders the ring's ownership.
		 */
		atomic_store_explicit(&sub->rings[s], r, memory_order_release);
	}
	head = atomic_load_explicit(&r->head, memory_order_relaxed);
	if (head - r->cached_tail > r->mask) {
		/* Acquire: pairs with the reader's release of tail; the slots it freed are ours. */
		r->cached_tail = atomic_load_explicit(&r->tail, memory_order_acquire);
		if (head - r->cached_tail > r->mask) {
			count_drop(t, r);
			return;
		}
	}
	r->ev[head & r->mask] = *ev;
	/* Release: pairs with the reader's acquire of head; it sees the event. */
	atomic_store_explicit(&r->head, head + 1, memory_order_release);
}

void td_trace_emit_slow(struct td_trace *t, const struct td_trace_event *ev)
{
	struct td_trace_priv *p = t->priv;
	int s = slot_get();

	if (td_unlikely(s < 0)) {
		/*
		 * Without a slot there is no busy flag to keep a subscriber alive: count the
		 * loss in the hub, where each subscriber reads it (td_trace_read_until()).
		 */
		atomic_fetch_add_explicit(&p->slotless, 1, memory_order_relaxed);
		count_drop(t, NULL);
		return;
	}
	/* seq_cst: pairs with td_trace_unsubscribe() (the top of this file). */
	atomic_store(&slots[s].busy, true);
	for (unsigned int i = 0; i < TD_TRACE_MAX_SUBS; i++) {
		struct td_trace_sub *sub = atomic_load(&p->subs[i]);

		if (sub)
			ring_put(t, sub, (unsigned int)s, ev);
	}
	/* Release: the unsubscriber that sees false may free what we wrote to. */
	atomic_store_explicit(&slots[s].busy, false, memory_order_release);
}

/* ---- read ------------------------------------------------------------------------------- */

/* The time of @r's oldest unread event; the reader's own tail is read relaxed. */
static uint64_t ring_front_time(struct td_trace_ring *r)
{
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);

	return r->ev[tail & r->mask].time_ns;
}

static void heap_down(struct td_trace_ring **h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1;
		size_t m = i;

		if (l < n && ring_front_time(h[l]) < ring_front_time(h[m]))
			m = l;
		if (l + 1 < n && ring_front_time(h[l + 1]) < ring_front_time(h[m]))
			m = l + 1;
		if (m == i)
			return;
		struct td_trace_ring *tmp = h[i];

		h[i] = h[m];
		h[m] = tmp;
		i = m;
	}
}

size_t td_trace_read_until(struct td_trace *t, struct td_trace_sub *sub,
			   struct td_trace_event *out, size_t max, uint64_t until_ns,
			   uint64_t *dropped)
{
	struct td_trace_ring **h = sub->heap;
	uint64_t lost = 0;
	size_t nh = 0;
	size_t n = 0;

	for (unsigned int s = 0; s < TD_TRACE_MAX_THREADS; s++) {
		/* Acquire: pairs with ring_put()'s publication of the ring. */
		struct td_trace_ring *r = atomic_load_explicit(&sub->rings[s], memory_order_acquire);
		uint64_t d;

		if (!r)
			continue;
		d = atomic_load_explicit(&r->dropped, memory_order_relaxed);
		lost += d - r->dropped_seen;
		r->dropped_seen = d;
		/* Acquire: pairs with ring_put()'s release of head; the events are written. */
		r->head_seen = atomic_load_explicit(&r->head, memory_order_acquire);
		if (r->head_seen != atomic_load_explicit(&r->tail, memory_order_relaxed) &&
		    ring_front_time(r) <= until_ns)
			h[nh++] = r;
	}
	uint64_t u = atomic_load_explicit(&sub->ringless, memory_order_relaxed);
	uint64_t sl = atomic_load_explicit(&t->priv->slotless, memory_order_relaxed);

	lost += u - sub->ringless_seen + (sl - sub->slotless_seen);
	sub->ringless_seen = u;
	sub->slotless_seen = sl;
	*dropped = lost;

	for (size_t i = nh / 2; i-- > 0;)
		heap_down(h, nh, i);
	while (nh && n < max) {
		struct td_trace_ring *r = h[0];
		uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
		out[n++] = r->ev[tail & r->mask];
		tail++;
		/* Release: pairs with ring_put()'s acquire of tail; the slot may be reused. */
		atomic_store_explicit(&r->tail, tail, memory_order_release);
		if (tail == r->head_seen || r->ev[tail & r->mask].time_ns > until_ns)
			h[0] = h[--nh];
		heap_down(h, nh, 0);
	}
	return n;
}

size_t td_trace_read(struct td_trace *t, struct td_trace_sub *sub, struct td_trace_event *out,
		     size_t max, uint64_t *dropped)
{
	return td_trace_read_until(t, sub, out, max, UINT64_MAX, dropped);
}
