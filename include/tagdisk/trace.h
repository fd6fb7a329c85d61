/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * trace.h - blktrace-style events from the block layer, to live subscribers.
 *
 * The queue emits an event at each step of a request's life:
 *   Q queued (a bio entered), M back merge, F front merge, G request
 *   allocated, I inserted into the elevator, D dispatched to the drive (with
 *   its tag), C completed (with its error), R requeued by a reset.
 *
 * Each subscriber (an admin connection running `trace`) gets one ring per
 * emitting thread, as blktrace has one relay buffer per CPU: an emitter
 * writes only to its own rings, with no lock and no shared cache line, and
 * the subscriber merges the rings by time when it reads. Emitting never
 * blocks and never allocates: a subscriber's rings are all mapped, faulted in
 * and counted when it subscribes, and a thread takes one of them (nothing
 * more than an index) the first time it emits for that subscriber. A thread
 * that finds none left, or a full ring, drops the event for that subscriber
 * and counts it, so a slow reader cannot slow the I/O path; the hub also
 * counts every drop since it was created (td_trace_dropped(), the `stats`
 * key trace_dropped). With no subscriber, td_trace_emit() costs one relaxed
 * atomic load.
 *
 * Memory: every subscriber's rings together stay within the hub's budget
 * (td_trace_create()); a subscriber that would pass it is refused (ENOSPC),
 * or, when it allows, given smaller rings. A subscriber's memory is
 * returned when it unsubscribes.
 *
 * At most TD_TRACE_MAX_THREADS threads of the process emit at a time (a
 * thread's slot is freed when it exits, and the next thread to take the slot
 * takes its rings too); an event from a thread beyond them is dropped and
 * counted like one that did not fit.
 *
 * LOCKING: subscribing and unsubscribing take an internal mutex (last in the
 * global order, tagdisk/queue.h); emitting takes no lock. One thread at a
 * time reads a given subscriber (td_trace_read() is single-consumer).
 * td_trace_unsubscribe() waits for emitters still writing to the
 * subscriber's rings: never call it from an emitting path.
 */
#ifndef TAGDISK_TRACE_H
#define TAGDISK_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/compiler.h"
#include "tagdisk/types.h"

/* Threads that can emit at the same time; subscribers at the same time. */
#define TD_TRACE_MAX_THREADS 256
#define TD_TRACE_MAX_SUBS    16
/* Events in one ring at most (40 MiB): a power of two, so rounding up never passes it. */
#define TD_TRACE_RING_EVENTS_MAX (1U << 20)

enum td_trace_action {
	TD_TA_QUEUE = 'Q',
	TD_TA_BACKMERGE = 'M',
	TD_TA_FRONTMERGE = 'F',
	TD_TA_GETRQ = 'G',
	TD_TA_INSERT = 'I',
	TD_TA_DISPATCH = 'D',
	TD_TA_COMPLETE = 'C',
	TD_TA_REQUEUE = 'R',
};

struct td_trace_event {
	uint64_t time_ns; /* CLOCK_MONOTONIC */
	uint64_t sector;
	uint32_t nr_sectors;
	int32_t pid;
	int32_t tag;   /* -1 when untagged */
	int32_t error; /* C: 0 or negative errno */
	uint8_t action; /* enum td_trace_action */
	uint8_t op;	/* enum td_op */
	uint8_t fua;
};

struct td_trace {
	_Atomic unsigned int nr_subs; /* read lock-free by td_trace_emit() */
	struct td_trace_priv *priv;
};

struct td_trace_sub;

/* What a subscriber asks for (td_trace_subscribe()). */
struct td_trace_sub_params {
	/*
	 * Events per ring, rounded up to a power of two, at most
	 * TD_TRACE_RING_EVENTS_MAX (0 and 1 both give a ring of one event).
	 */
	size_t ring_events;
	/*
	 * 0: rings of ring_events or nothing. Otherwise, when the budget left
	 * cannot hold rings of ring_events, halve them until it can, down to
	 * this many events (rounded up to a power of two).
	 */
	size_t min_ring_events;
	/*
	 * Rings, one for each thread that may emit while the subscriber reads:
	 * 1..TD_TRACE_MAX_THREADS. Threads beyond them lose their events (counted).
	 */
	unsigned int nr_rings;
	/*
	 * Bytes the subscriber's reader spends besides the rings while it reads
	 * (a blktrace writer's reorder window): taken from the budget with the
	 * rings and given back with them, but not allocated here.
	 */
	size_t extra_bytes;
};

/*
 * Return: a hub with no subscribers whose rings together never take more than
 * @budget_bytes, or NULL (errno set).
 */
struct td_trace *td_trace_create(size_t budget_bytes) td_warn_unused;
/* Destroy @t; every subscriber must have unsubscribed. */
void td_trace_destroy(struct td_trace *t) td_nonnull(1);

/* Return: @t's budget in bytes; *@used (if not NULL) gets what its subscribers take now. */
size_t td_trace_budget(struct td_trace *t, size_t *used) td_nonnull(1);

/*
 * Return: the bytes a subscriber with @nr_rings rings of @ring_events events
 * takes from the budget (@ring_events rounded as td_trace_subscribe() does),
 * or SIZE_MAX when that does not fit in a size_t.
 */
size_t td_trace_sub_cost(size_t ring_events, unsigned int nr_rings);

/*
 * Subscribe: map every ring @p asks for, fault it in and count it against the
 * budget, so that nothing is allocated when threads emit. Takes the hub's lock
 * (not an I/O path: it may take milliseconds).
 * Return: NULL with errno EINVAL (@p->nr_rings is 0 or over TD_TRACE_MAX_THREADS),
 * ENOSPC (the budget left cannot hold it), EBUSY (TD_TRACE_MAX_SUBS subscribers
 * already) or ENOMEM (no memory).
 */
struct td_trace_sub *td_trace_subscribe(struct td_trace *t, const struct td_trace_sub_params *p)
	td_nonnull(1, 2);
/* Remove @sub and free it, after any emitter still writing to it has finished. */
void td_trace_unsubscribe(struct td_trace *t, struct td_trace_sub *sub) td_nonnull(1, 2);

/*
 * Return: the events in each of @sub's rings, and the bytes of the budget @sub
 * takes (its rings and extra_bytes).
 */
size_t td_trace_sub_ring_events(const struct td_trace_sub *sub) td_nonnull(1);
size_t td_trace_sub_bytes(const struct td_trace_sub *sub) td_nonnull(1);

/*
 * Move up to @max events from @sub's rings to @out, oldest first (merged by
 * time across threads), leaving in the rings every event stamped after
 * @until_ns: an emitter that stamped an event before @until_ns may still be
 * about to publish it, so a reader that wants a stream in time order passes
 * a time a little in the past. Return: the number moved; *@dropped gets the
 * events dropped for @sub since the last call.
 */
size_t td_trace_read_until(struct td_trace *t, struct td_trace_sub *sub,
			   struct td_trace_event *out, size_t max, uint64_t until_ns,
			   uint64_t *dropped) td_nonnull(1, 2, 3, 6);

/* td_trace_read_until() with no time limit. */
size_t td_trace_read(struct td_trace *t, struct td_trace_sub *sub, struct td_trace_event *out,
		     size_t max, uint64_t *dropped) td_nonnull(1, 2, 3, 5);

/* Return: events dropped for any subscriber since @t was created. Any thread. */
uint64_t td_trace_dropped(const struct td_trace *t) td_nonnull(1);

void td_trace_emit_slow(struct td_trace *t, const struct td_trace_event *ev) td_nonnull(1, 2);

/* Emit an event to every subscriber; a no-op when @t is NULL or nobody listens. */
static inline void td_trace_emit(struct td_trace *t, enum td_trace_action action, enum td_op op,
				 bool fua, uint64_t sector, uint32_t nr_sectors, int32_t pid,
				 int32_t tag, int32_t error, uint64_t time_ns)
{
	if (td_likely(!t || !atomic_load_explicit(&t->nr_subs, memory_order_relaxed)))
		return;
	struct td_trace_event ev = {
		.time_ns = time_ns, .sector = sector, .nr_sectors = nr_sectors, .pid = pid,
		.tag = tag, .error = error, .action = (uint8_t)action, .op = (uint8_t)op,
		.fua = fua,
	};
	td_trace_emit_slow(t, &ev);
}

#endif /* TAGDISK_TRACE_H */
