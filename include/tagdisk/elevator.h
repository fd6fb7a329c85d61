/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * elevator.h - I/O schedulers as ops tables, and the core that drives them.
 *
 * An elevator type is a const struct td_elevator_type: a name and the
 * functions below, defined at the end of elv_<name>.c and listed in the
 * registry in elevator.c. An elevator instance (struct td_elevator) belongs
 * to one queue; the core keeps, for every type, hashes of queued requests by
 * end sector and by start sector, so back and front merges are found in
 * O(1), and a one-entry "last merge" hint. The type adds its own sorting and
 * dispatch policy.
 *
 * The elevator only ever holds QUEUED requests of one barrier epoch: a flush
 * drains it to the queue's dispatch list (see queue.c), so nothing merges or
 * sorts across a barrier.
 *
 * LOCKING: every function here, and every op, is called with the owning
 * queue's lock held (td_lock_held(&q->lock)). Ops must not block or sleep.
 *
 * Run-time switch: the queue moves every queued request to its dispatch
 * list through ->dispatch(force = true), destroys the old instance and
 * creates the new one, all under the queue lock; nothing is lost and nothing
 * waits for in-flight commands (->completed is only called for requests
 * queued under the same instance).
 */
#ifndef TAGDISK_ELEVATOR_H
#define TAGDISK_ELEVATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/clock.h"
#include "common/compiler.h"
#include "common/list.h"
#include "tagdisk/request.h"
#include "tagdisk/types.h"

enum td_elv_merge {
	TD_ELV_NO_MERGE = 0,
	TD_ELV_FRONT_MERGE, /* the bio ends where the request starts */
	TD_ELV_BACK_MERGE,  /* the bio starts where the request ends */
};

/* Tunables an elevator reads at every decision (the queue may change them live). */
struct td_elv_tunables {
	uint32_t read_expire_ms;  /* deadline: a read's FIFO deadline (default 500) */
	uint32_t write_expire_ms; /* deadline: a write's FIFO deadline (default 5000) */
	uint32_t fifo_batch;	  /* deadline: requests per sorted batch (default 16) */
	uint32_t writes_starved;  /* deadline: read batches before writes must go (default 2) */
};

/* What an elevator instance may use of its queue. Owned by the queue. */
struct td_elv_queue {
	const struct td_elv_tunables *tunables;
	const struct td_clock *clock;
	uint32_t max_sectors;
};

struct td_elevator_type {
	const char *name;
	/* Create the private data for a new instance. Return: 0 or -ENOMEM. */
	int (*init)(const struct td_elv_queue *eq, void **data);
	/* Free the private data; the elevator is empty. */
	void (*exit)(void *data);
	/*
	 * Whether bios may be front-merged (prepended) into queued requests. The
	 * core finds candidates through its hash on start sectors; an elevator
	 * that keeps requests sorted re-sorts them in ->merged.
	 */
	bool front_merges;
	/* Optional: @rq grew by a bio (@type says where); re-sort it if its start moved. */
	void (*merged)(void *data, struct td_request *rq, enum td_elv_merge type);
	/* Optional: @next was merged into @rq; forget @next, which the core frees. */
	void (*merged_requests)(void *data, struct td_request *rq, struct td_request *next);
	/* Optional: sorted neighbours of @rq in its direction, for request merging. */
	struct td_request *(*former_request)(void *data, struct td_request *rq);
	struct td_request *(*latter_request)(void *data, struct td_request *rq);
	/*
	 * Take ownership of a new QUEUED request, queued at @now (the queue's
	 * clock, in nanoseconds: what a FIFO deadline counts from).
	 */
	void (*add_request)(void *data, struct td_request *rq, uint64_t now);
	/*
	 * Remove and return the request to dispatch next, or NULL. With @force,
	 * return one whenever any is queued (used to drain).
	 */
	struct td_request *(*dispatch)(void *data, bool force);
	/* Optional: @rq, queued under this instance, completed. */
	void (*completed)(void *data, struct td_request *rq);
	/* Return: true when requests are queued. */
	bool (*has_work)(void *data);
	/* A scheduler of mq hardware contexts (none, mq-deadline) rather than of an rq queue. */
	bool mq;
};

/* An elevator instance; fields private to elevator.c. */
struct td_elevator;

/* Return: the registered type called @name, or NULL. */
const struct td_elevator_type *td_elv_find(const char *name);
/* Write the registered names, separated by ", ", into @buf. Return: as snprintf. */
size_t td_elv_names(char *buf, size_t size);
/* Like td_elv_names(), only the types whose ->mq is @mq (a queue mode's schedulers). */
size_t td_elv_names_for(char *buf, size_t size, bool mq);

/*
 * Create an instance of @type for a queue with @nr_requests requests.
 * Return: the instance, or NULL (-ENOMEM in *@err).
 */
struct td_elevator *td_elv_create(const struct td_elevator_type *type,
				  const struct td_elv_queue *eq, uint32_t nr_requests, int *err)
	td_nonnull(1, 2);
/* Destroy @e, which must be empty. */
void td_elv_destroy(struct td_elevator *e) td_nonnull(1);
/* Return: @e's type name. */
const char *td_elv_name(const struct td_elevator *e) td_nonnull(1);

/*
 * Find a QUEUED request @bio can merge into: the last-merge hint, the
 * back-merge hash, then (if the type allows) the front-merge hash;
 * mergeability limits are checked.
 * Return: the merge type, with *@rq set unless TD_ELV_NO_MERGE.
 */
enum td_elv_merge td_elv_merge(struct td_elevator *e, const struct td_bio *bio,
			       struct td_request **rq) td_nonnull(1, 2, 3);

/*
 * Merge @bio into @rq as found by td_elv_merge(), then try to merge @rq with
 * its sorted neighbour on that side (request merging, as the kernel's
 * attempt_back_merge / attempt_front_merge).
 * Return: a request emptied by request merging (removed from the elevator;
 * the caller frees it), or NULL.
 */
struct td_request *td_elv_merge_bio(struct td_elevator *e, struct td_request *rq,
				    struct td_bio *bio, enum td_elv_merge type)
	td_nonnull(1, 2, 3);

/* Add a new QUEUED request, queued at @now (the queue's clock). */
void td_elv_add(struct td_elevator *e, struct td_request *rq, uint64_t now) td_nonnull(1, 2);
/* Remove and return the next request to dispatch (see ->dispatch), or NULL. */
struct td_request *td_elv_dispatch(struct td_elevator *e, bool force) td_nonnull(1);
/* Return: true when requests are queued. */
bool td_elv_has_work(struct td_elevator *e) td_nonnull(1);
/* Tell the instance @rq completed (ignored unless @rq was queued under @e). */
void td_elv_completed(struct td_elevator *e, struct td_request *rq) td_nonnull(1, 2);
/* Return: the number of requests the instance holds. */
uint32_t td_elv_count(const struct td_elevator *e) td_nonnull(1);

extern const struct td_elevator_type td_elv_noop;
extern const struct td_elevator_type td_elv_deadline;
/* mq mode's names for the same policies, one instance per hardware context. */
extern const struct td_elevator_type td_elv_none;
extern const struct td_elevator_type td_elv_mq_deadline;

#endif /* TAGDISK_ELEVATOR_H */
