// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * request.c - building requests from bios, merging, and the request pool.
 *
 * A request's bios are a singly linked chain in sector order (bio->next),
 * with a tail pointer for O(1) back merges. The pool is an array allocated
 * once per queue: nr_requests bounds both memory and the number of requests
 * the elevator can ever hold, and a submitter that finds it empty sleeps on
 * the pool's condition variable (back-pressure) until a completion returns
 * a request.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "tagdisk/request.h"

void td_rq_init_from_bio(struct td_request *rq, struct td_bio *bio)
{
	assert(rq->state == TD_RQ_FREE);
	rq->state = TD_RQ_QUEUED;
	rq->op = bio->op;
	rq->flags = (bio->flags & TD_BIO_FUA) ? TD_RQ_FUA : 0;
	rq->sector = bio->sector;
	rq->nr_sectors = bio->nr_sectors;
	rq->nr_bios = 1;
	bio->next = NULL;
	rq->bio = bio;
	rq->biotail = bio;
	memset(rq->cmd, 0, sizeof(rq->cmd));
	rq->cmd_len = 0;
	rq->tag = TD_TAG_NONE;
	rq->retries = 0;
	rq->error = 0;
	rq->gen = 0;
	rq->elv_owner = NULL;
	rq->pid = bio->pid;
	rq->fifo_time_ns = 0;
	rq->dispatch_ns = 0;
	rq->wlog_flush = NULL;
}

static bool same_kind(const struct td_request *rq, enum td_op op, unsigned int fua)
{
	return rq->op == op && (rq->flags & TD_RQ_FUA) == fua && td_op_has_data(op);
}

bool td_rq_bio_mergeable(const struct td_request *rq, const struct td_bio *bio,
			 uint32_t max_sectors)
{
	unsigned int fua = (bio->flags & TD_BIO_FUA) ? TD_RQ_FUA : 0;

	return rq->state == TD_RQ_QUEUED && same_kind(rq, bio->op, fua) &&
	       (uint64_t)rq->nr_sectors + bio->nr_sectors <= max_sectors &&
	       rq->nr_bios < TD_RQ_MAX_BIOS;
}

void td_rq_back_merge(struct td_request *rq, struct td_bio *bio)
{
	assert(bio->sector == td_rq_end_sector(rq));
	bio->next = NULL;
	rq->biotail->next = bio;
	rq->biotail = bio;
	rq->nr_sectors += bio->nr_sectors;
	rq->nr_bios++;
}

void td_rq_front_merge(struct td_request *rq, struct td_bio *bio)
{
	assert(bio->sector + bio->nr_sectors == rq->sector);
	bio->next = rq->bio;
	rq->bio = bio;
	rq->sector = bio->sector;
	rq->nr_sectors += bio->nr_sectors;
	rq->nr_bios++;
	/* The request takes the pid of its new first bio, as the kernel's does. */
	rq->pid = bio->pid;
}

bool td_rq_rq_mergeable(const struct td_request *rq, const struct td_request *next,
			uint32_t max_sectors)
{
	return rq->state == TD_RQ_QUEUED && next->state == TD_RQ_QUEUED &&
	       td_rq_end_sector(rq) == next->sector &&
	       same_kind(rq, next->op, next->flags & TD_RQ_FUA) &&
	       (uint64_t)rq->nr_sectors + next->nr_sectors <= max_sectors &&
	       rq->nr_bios + next->nr_bios <= TD_RQ_MAX_BIOS;
}

void td_rq_merge_requests(struct td_request *rq, struct td_request *next)
{
	assert(td_rq_end_sector(rq) == next->sector);
	rq->biotail->next = next->bio;
	rq->biotail = next->biotail;
	rq->nr_sectors += next->nr_sectors;
	rq->nr_bios += next->nr_bios;
	next->bio = NULL;
	next->biotail = NULL;
	next->nr_bios = 0;
	next->nr_sectors = 0;
}

int td_rq_fill_iov(const struct td_request *rq, struct iovec *iov)
{
	int n = 0;

	for (struct td_bio *bio = rq->bio; bio; bio = bio->next) {
		assert(n < TD_RQ_MAX_BIOS);
		iov[n].iov_base = bio->data;
		iov[n].iov_len = (size_t)bio->nr_sectors << TD_SECTOR_SHIFT;
		n++;
	}
	return n;
}

int td_rq_pool_init(struct td_rq_pool *pool, struct td_queue *q, uint32_t nr)
{
	pool->rqs = aligned_alloc(TD_CACHELINE, nr * sizeof(*pool->rqs));
	if (pool->rqs)
		memset(pool->rqs, 0, nr * sizeof(*pool->rqs));
	if (!pool->rqs)
		return -ENOMEM;
	pool->nr = nr;
	pool->nr_free = nr;
	pool->nr_waiting = 0;
	td_list_init(&pool->free);
	td_cond_init(&pool->wait);
	for (uint32_t i = 0; i < nr; i++) {
		struct td_request *rq = &pool->rqs[i];

		rq->q = q;
		rq->state = TD_RQ_FREE;
		atomic_init(&rq->pinned, false);
		rq->tag = TD_TAG_NONE;
		td_list_init(&rq->hash);
		td_list_init(&rq->fhash);
		td_list_init(&rq->fifo);
		td_list_init(&rq->drive_list);
		td_list_add_tail(&rq->queuelist, &pool->free);
	}
	return 0;
}

void td_rq_pool_destroy(struct td_rq_pool *pool)
{
	assert(pool->nr_free == pool->nr);
	td_cond_destroy(&pool->wait);
	free(pool->rqs);
	pool->rqs = NULL;
}

struct td_request *td_rq_pool_get_locked(struct td_rq_pool *pool, struct td_mutex *lock)
{
	assert(td_lock_held(lock));
	while (td_list_empty(&pool->free)) {
		pool->nr_waiting++;
		td_cond_wait(&pool->wait, lock);
		pool->nr_waiting--;
	}
	struct td_request *rq = td_list_first_entry(&pool->free, struct td_request, queuelist);

	td_list_del(&rq->queuelist);
	pool->nr_free--;
	return rq;
}

void td_rq_pool_put_locked(struct td_rq_pool *pool, struct td_request *rq)
{
	assert(td_list_empty(&rq->hash) && td_list_empty(&rq->fhash) &&
	       td_list_empty(&rq->drive_list));
	rq->state = TD_RQ_FREE;
	rq->bio = NULL;
	rq->biotail = NULL;
	rq->tag = TD_TAG_NONE;
	td_list_add(&rq->queuelist, &pool->free);
	pool->nr_free++;
	if (pool->nr_waiting)
		td_cond_signal(&pool->wait);
}
