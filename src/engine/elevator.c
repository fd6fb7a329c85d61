// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * elevator.c - the elevator registry and the core every elevator shares.
 *
 * The core owns what all I/O schedulers need for merging, so a type only
 * implements its policy:
 *  - a hash of QUEUED read/write requests keyed on their end sector: a bio
 *    that starts where a request ends is found in O(1) (back merge); and
 *    one keyed on their start sector, for front merges;
 *  - a one-entry hint, the request that took the last merge, checked first,
 *    since sequential streams merge into the same request again and again;
 *  - request merging after a bio merge: when the grown request now touches
 *    its sorted neighbour, the two become one (types that keep no order,
 *    like noop, have no neighbours and skip this).
 *
 * The hash has one bucket per request of the pool (rounded up to a power of
 * two), so chains stay short at any queue depth.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tagdisk/elevator.h"

static const struct td_elevator_type *const registry[] = {
	&td_elv_deadline,
	&td_elv_mq_deadline,
	&td_elv_noop,
	&td_elv_none,
};

struct td_elevator {
	const struct td_elevator_type *type;
	void *data;
	struct td_list *hash;  /* buckets of QUEUED requests by end sector */
	struct td_list *fhash; /* by start sector */
	uint32_t hash_mask;
	uint32_t count; /* requests held */
	uint32_t max_sectors;
	struct td_request *last_merge; /* hint: took the last bio merge */
};

const struct td_elevator_type *td_elv_find(const char *name)
{
	for (size_t i = 0; i < TD_ARRAY_SIZE(registry); i++)
		if (strcmp(registry[i]->name, name) == 0)
			return registry[i];
	return NULL;
}

/* List the registered names, of every type (@all) or of those whose ->mq is @mq. */
static size_t list_names(char *buf, size_t size, bool all, bool mq)
{
	size_t n = 0;
	bool first = true;

	if (size)
		buf[0] = '\0';
	for (size_t i = 0; i < TD_ARRAY_SIZE(registry); i++) {
		if (!all && registry[i]->mq != mq)
			continue;
		int r = snprintf(buf ? buf + TD_MIN(n, size) : NULL, n < size ? size - n : 0,
				 "%s%s", first ? "" : ", ", registry[i]->name);

		first = false;
		n += r > 0 ? (size_t)r : 0;
	}
	return n;
}

size_t td_elv_names(char *buf, size_t size)
{
	return list_names(buf, size, true, false);
}

size_t td_elv_names_for(char *buf, size_t size, bool mq)
{
	return list_names(buf, size, false, mq);
}

struct td_elevator *td_elv_create(const struct td_elevator_type *type,
				  const struct td_elv_queue *eq, uint32_t nr_requests, int *err)
{
	struct td_elevator *e = calloc(1, sizeof(*e));
	uint32_t buckets = 16;
	int ret = -ENOMEM;

	if (!e)
		goto out_err;
	while (buckets < nr_requests && buckets < (1U << 20))
		buckets <<= 1;
	e->hash = malloc(2 * buckets * sizeof(*e->hash));
	if (!e->hash)
		goto out_free_e;
	for (uint32_t i = 0; i < 2 * buckets; i++)
		td_list_init(&e->hash[i]);
	e->fhash = e->hash + buckets;
	e->hash_mask = buckets - 1;
	e->type = type;
	e->max_sectors = eq->max_sectors;
	ret = type->init(eq, &e->data);
	if (ret)
		goto out_free_hash;
	return e;

out_free_hash:
	free(e->hash);
out_free_e:
	free(e);
out_err:
	*err = ret;
	return NULL;
}

void td_elv_destroy(struct td_elevator *e)
{
	assert(e->count == 0);
	e->type->exit(e->data);
	free(e->hash);
	free(e);
}

const char *td_elv_name(const struct td_elevator *e)
{
	return e->type->name;
}

uint32_t td_elv_count(const struct td_elevator *e)
{
	return e->count;
}

static struct td_list *hash_bucket(struct td_elevator *e, struct td_list *table, uint64_t sector)
{
	/* Fibonacci hashing: sequential sectors land in different buckets. */
	return &table[(sector * 0x9e3779b97f4a7c15ULL) >> 40 & e->hash_mask];
}

static void hash_add(struct td_elevator *e, struct td_request *rq)
{
	if (!td_op_has_data(rq->op))
		return;
	td_list_add(&rq->hash, hash_bucket(e, e->hash, td_rq_end_sector(rq)));
	if (e->type->front_merges)
		td_list_add(&rq->fhash, hash_bucket(e, e->fhash, rq->sector));
}

static void hash_del(struct td_request *rq)
{
	td_list_del(&rq->hash);
	td_list_del(&rq->fhash);
}

/* Return: a queued request ending at @end_sector, or NULL. */
static struct td_request *hash_find(struct td_elevator *e, uint64_t end_sector)
{
	struct td_list *pos;

	td_list_for_each(pos, hash_bucket(e, e->hash, end_sector)) {
		struct td_request *rq = td_list_entry(pos, struct td_request, hash);

		if (td_rq_end_sector(rq) == end_sector)
			return rq;
	}
	return NULL;
}

/* Return: a queued request starting at @sector, or NULL. */
static struct td_request *fhash_find(struct td_elevator *e, uint64_t sector)
{
	struct td_list *pos;

	td_list_for_each(pos, hash_bucket(e, e->fhash, sector)) {
		struct td_request *rq = td_list_entry(pos, struct td_request, fhash);

		if (rq->sector == sector)
			return rq;
	}
	return NULL;
}

/* @rq leaves the elevator (dispatched or merged away). */
static void forget(struct td_elevator *e, struct td_request *rq)
{
	hash_del(rq);
	if (e->last_merge == rq)
		e->last_merge = NULL;
	assert(e->count > 0);
	e->count--;
}

enum td_elv_merge td_elv_merge(struct td_elevator *e, const struct td_bio *bio,
			       struct td_request **rqp)
{
	struct td_request *rq;

	if (!td_op_has_data(bio->op))
		return TD_ELV_NO_MERGE;

	rq = e->last_merge;
	if (rq && td_rq_bio_mergeable(rq, bio, e->max_sectors)) {
		if (td_rq_end_sector(rq) == bio->sector) {
			*rqp = rq;
			return TD_ELV_BACK_MERGE;
		}
		if (bio->sector + bio->nr_sectors == rq->sector && e->type->front_merges) {
			*rqp = rq;
			return TD_ELV_FRONT_MERGE;
		}
	}

	rq = hash_find(e, bio->sector);
	if (rq && td_rq_bio_mergeable(rq, bio, e->max_sectors)) {
		*rqp = rq;
		return TD_ELV_BACK_MERGE;
	}

	if (e->type->front_merges) {
		rq = fhash_find(e, bio->sector + bio->nr_sectors);
		if (rq && td_rq_bio_mergeable(rq, bio, e->max_sectors)) {
			*rqp = rq;
			return TD_ELV_FRONT_MERGE;
		}
	}
	return TD_ELV_NO_MERGE;
}

/* Merge @next into @rq (which it follows); returns @next, now empty and out of the elevator. */
static struct td_request *merge_requests(struct td_elevator *e, struct td_request *rq,
					 struct td_request *next)
{
	hash_del(rq);
	forget(e, next);
	td_rq_merge_requests(rq, next);
	if (e->type->merged_requests)
		e->type->merged_requests(e->data, rq, next);
	hash_add(e, rq);
	e->last_merge = rq;
	return next;
}

struct td_request *td_elv_merge_bio(struct td_elevator *e, struct td_request *rq,
				    struct td_bio *bio, enum td_elv_merge type)
{
	assert(rq->state == TD_RQ_QUEUED && rq->elv_owner == e);
	e->last_merge = rq;
	if (type == TD_ELV_BACK_MERGE) {
		hash_del(rq);
		td_rq_back_merge(rq, bio);
		hash_add(e, rq);
		if (e->type->merged)
			e->type->merged(e->data, rq, type);
		struct td_request *next =
			e->type->latter_request ? e->type->latter_request(e->data, rq) : NULL;

		if (next && td_rq_rq_mergeable(rq, next, e->max_sectors))
			return merge_requests(e, rq, next);
	} else {
		assert(type == TD_ELV_FRONT_MERGE);
		hash_del(rq);
		td_rq_front_merge(rq, bio);
		hash_add(e, rq);
		if (e->type->merged)
			e->type->merged(e->data, rq, type);
		struct td_request *prev =
			e->type->former_request ? e->type->former_request(e->data, rq) : NULL;

		if (prev && td_rq_rq_mergeable(prev, rq, e->max_sectors))
			return merge_requests(e, prev, rq);
	}
	return NULL;
}

void td_elv_add(struct td_elevator *e, struct td_request *rq, uint64_t now)
{
	assert(rq->state == TD_RQ_QUEUED);
	rq->elv_owner = e;
	hash_add(e, rq);
	e->count++;
	e->type->add_request(e->data, rq, now);
}

struct td_request *td_elv_dispatch(struct td_elevator *e, bool force)
{
	struct td_request *rq = e->type->dispatch(e->data, force);

	if (rq) {
		assert(rq->state == TD_RQ_QUEUED && rq->elv_owner == e);
		forget(e, rq);
	} else {
		/* A forced dispatch must drain whatever is queued. */
		assert(!force || e->count == 0);
	}
	return rq;
}

bool td_elv_has_work(struct td_elevator *e)
{
	bool work = e->type->has_work(e->data);

	assert(work == (e->count > 0));
	return work;
}

void td_elv_completed(struct td_elevator *e, struct td_request *rq)
{
	if (rq->elv_owner == e && e->type->completed)
		e->type->completed(e->data, rq);
}
