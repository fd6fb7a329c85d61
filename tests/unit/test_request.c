// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_request.c - unit tests for requests and their pool (src/request.c).
 *
 * Requests are built from bios on the stack and checked field by field. The
 * pool tests hold their own mutex in place of the queue lock. Back-pressure
 * is observed from outside: a helper thread asks for a request from an
 * exhausted pool and raises a flag once it has one; the flag must stay down
 * for a quiet period and rise only after the main thread returns a request.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "common/clock.h"
#include "tagdisk/request.h"
#include "unit_util.h"

#define QUIET_MS	 100   /* how long a blocked getter must stay blocked */
#define GRANT_TIMEOUT_MS 10000 /* how long a wake-up may take before we call it a hang */

static void end_io_unused(struct td_bio *bio, int err)
{
	(void)bio;
	(void)err;
}

static void bio_set(struct td_bio *bio, enum td_op op, uint64_t sector, uint32_t nr_sectors,
		    void *data, int32_t pid)
{
	td_bio_init(bio, op, sector, nr_sectors, data, end_io_unused, NULL);
	bio->pid = pid;
}

/* A FREE request whose every field holds garbage, as a recycled one would. */
static void rq_dirty(struct td_request *rq)
{
	memset(rq, 0xa5, sizeof(*rq));
	rq->state = TD_RQ_FREE;
}

static void rq_from(struct td_request *rq, struct td_bio *bio)
{
	rq_dirty(rq);
	td_rq_init_from_bio(rq, bio);
}

/* ---- td_rq_init_from_bio --------------------------------------------------------------- */

static void test_rq_init_from_bio_sets_every_field(void **state)
{
	struct td_request rq;
	struct td_bio bio;
	struct td_bio other;

	(void)state;
	bio_set(&bio, TD_OP_WRITE, 4096, 24, NULL, 4242);
	bio.next = &other; /* left over from a submission batch: must be cut */
	rq_from(&rq, &bio);

	assert_int_equal(rq.state, TD_RQ_QUEUED);
	assert_int_equal(rq.op, TD_OP_WRITE);
	assert_int_equal(rq.flags, 0);
	assert_int_equal(rq.sector, 4096);
	assert_int_equal(rq.nr_sectors, 24);
	assert_int_equal(rq.nr_bios, 1);
	assert_ptr_equal(rq.bio, &bio);
	assert_ptr_equal(rq.biotail, &bio);
	assert_null(bio.next);
	for (size_t i = 0; i < TD_CMD_MAX; i++)
		assert_int_equal(rq.cmd[i], 0);
	assert_int_equal(rq.cmd_len, 0);
	assert_int_equal(rq.tag, TD_TAG_NONE);
	assert_int_equal(rq.retries, 0);
	assert_int_equal(rq.error, 0);
	assert_int_equal(rq.gen, 0);
	assert_null(rq.elv_owner);
	assert_int_equal(rq.pid, 4242);
	assert_int_equal(rq.fifo_time_ns, 0);
	assert_int_equal(rq.dispatch_ns, 0);
	assert_int_equal(td_rq_end_sector(&rq), 4120);
	assert_int_equal(td_rq_data_bytes(&rq), 24 * 512);
}

static void test_rq_init_from_bio_maps_fua_and_drops_stale_flags(void **state)
{
	struct td_request rq;
	struct td_bio bio;

	(void)state;
	bio_set(&bio, TD_OP_WRITE, 0, 8, NULL, 1);
	bio.flags = TD_BIO_FUA;
	rq_from(&rq, &bio); /* the garbage includes TD_RQ_WRITE_TREE */
	assert_int_equal(rq.flags, TD_RQ_FUA);

	bio.flags = 0;
	rq_from(&rq, &bio);
	assert_int_equal(rq.flags, 0);
}

static void test_rq_data_bytes_is_zero_for_dataless_ops(void **state)
{
	struct td_request rq;
	struct td_bio bio;

	(void)state;
	bio_set(&bio, TD_OP_DISCARD, 64, 16, NULL, 1);
	rq_from(&rq, &bio);
	assert_int_equal(rq.nr_sectors, 16);
	assert_int_equal(td_rq_data_bytes(&rq), 0);

	bio_set(&bio, TD_OP_READ, 64, 16, NULL, 1);
	rq_from(&rq, &bio);
	assert_int_equal(td_rq_data_bytes(&rq), 16 * 512);
}

/* ---- td_rq_bio_mergeable --------------------------------------------------------------- */

static void test_rq_bio_mergeable_same_op_within_limits(void **state)
{
	struct td_request rq;
	struct td_bio first;
	struct td_bio bio;

	(void)state;
	bio_set(&first, TD_OP_READ, 0, 8, NULL, 1);
	rq_from(&rq, &first);
	bio_set(&bio, TD_OP_READ, 8, 8, NULL, 2);
	assert_true(td_rq_bio_mergeable(&rq, &bio, 16));
	/* Contiguity is the caller's business: a far bio passes too. */
	bio.sector = 1000;
	assert_true(td_rq_bio_mergeable(&rq, &bio, 16));

	bio_set(&first, TD_OP_WRITE, 0, 8, NULL, 1);
	rq_from(&rq, &first);
	bio_set(&bio, TD_OP_WRITE, 8, 8, NULL, 2);
	assert_true(td_rq_bio_mergeable(&rq, &bio, 16));
}

static void test_rq_bio_mergeable_rejects_other_op(void **state)
{
	struct td_request rq;
	struct td_bio first;
	struct td_bio bio;

	(void)state;
	bio_set(&first, TD_OP_READ, 0, 8, NULL, 1);
	rq_from(&rq, &first);
	bio_set(&bio, TD_OP_WRITE, 8, 8, NULL, 1);
	assert_false(td_rq_bio_mergeable(&rq, &bio, 1024));

	bio_set(&first, TD_OP_WRITE, 0, 8, NULL, 1);
	rq_from(&rq, &first);
	bio_set(&bio, TD_OP_READ, 8, 8, NULL, 1);
	assert_false(td_rq_bio_mergeable(&rq, &bio, 1024));
	bio_set(&bio, TD_OP_DISCARD, 8, 8, NULL, 1);
	assert_false(td_rq_bio_mergeable(&rq, &bio, 1024));
}

static void test_rq_bio_mergeable_requires_same_fua(void **state)
{
	struct td_request rq;
	struct td_bio first;
	struct td_bio bio;

	(void)state;
	bio_set(&first, TD_OP_WRITE, 0, 8, NULL, 1);
	rq_from(&rq, &first);
	bio_set(&bio, TD_OP_WRITE, 8, 8, NULL, 1);
	bio.flags = TD_BIO_FUA;
	assert_false(td_rq_bio_mergeable(&rq, &bio, 1024));

	first.flags = TD_BIO_FUA;
	rq_from(&rq, &first);
	assert_true(td_rq_bio_mergeable(&rq, &bio, 1024));
	bio.flags = 0;
	assert_false(td_rq_bio_mergeable(&rq, &bio, 1024));
}

static void test_rq_bio_mergeable_rejects_dataless_ops(void **state)
{
	static const enum td_op ops[] = { TD_OP_FLUSH, TD_OP_DISCARD, TD_OP_WRITE_ZEROES };
	struct td_request rq;
	struct td_bio first;
	struct td_bio bio;

	(void)state;
	for (size_t i = 0; i < TD_ARRAY_SIZE(ops); i++) {
		bio_set(&first, ops[i], 0, ops[i] == TD_OP_FLUSH ? 0 : 8, NULL, 1);
		rq_from(&rq, &first);
		bio_set(&bio, ops[i], ops[i] == TD_OP_FLUSH ? 0 : 8, ops[i] == TD_OP_FLUSH ? 0 : 8,
			NULL, 1);
		assert_false(td_rq_bio_mergeable(&rq, &bio, 1024));
	}
}

static void test_rq_bio_mergeable_requires_queued_state(void **state)
{
	static const enum td_rq_state states[] = { TD_RQ_FREE, TD_RQ_DISPATCH, TD_RQ_INFLIGHT };
	struct td_request rq;
	struct td_bio first;
	struct td_bio bio;

	(void)state;
	bio_set(&first, TD_OP_READ, 0, 8, NULL, 1);
	bio_set(&bio, TD_OP_READ, 8, 8, NULL, 1);
	for (size_t i = 0; i < TD_ARRAY_SIZE(states); i++) {
		rq_from(&rq, &first);
		rq.state = states[i];
		assert_false(td_rq_bio_mergeable(&rq, &bio, 1024));
	}
}

static void test_rq_bio_mergeable_max_sectors_boundary(void **state)
{
	struct td_request rq;
	struct td_bio first;
	struct td_bio bio;

	(void)state;
	bio_set(&first, TD_OP_READ, 0, 8, NULL, 1);
	rq_from(&rq, &first);
	bio_set(&bio, TD_OP_READ, 8, 8, NULL, 1);
	assert_true(td_rq_bio_mergeable(&rq, &bio, 16));
	assert_false(td_rq_bio_mergeable(&rq, &bio, 15));

	/* The sum must not wrap around 32 bits. */
	rq.nr_sectors = UINT32_MAX - 8;
	assert_true(td_rq_bio_mergeable(&rq, &bio, UINT32_MAX));
	bio.nr_sectors = 9;
	assert_false(td_rq_bio_mergeable(&rq, &bio, UINT32_MAX));
}

static void test_rq_bio_mergeable_max_bios_boundary(void **state)
{
	struct td_request rq;
	struct td_bio first;
	struct td_bio bio;

	(void)state;
	bio_set(&first, TD_OP_WRITE, 0, 1, NULL, 1);
	rq_from(&rq, &first);
	bio_set(&bio, TD_OP_WRITE, 1, 1, NULL, 1);
	rq.nr_bios = TD_RQ_MAX_BIOS - 1;
	assert_true(td_rq_bio_mergeable(&rq, &bio, UINT32_MAX));
	rq.nr_bios = TD_RQ_MAX_BIOS;
	assert_false(td_rq_bio_mergeable(&rq, &bio, UINT32_MAX));
}

/* ---- bio merges ------------------------------------------------------------------------ */

static void test_rq_back_merge_appends_and_keeps_start_and_pid(void **state)
{
	struct td_request rq;
	struct td_bio a;
	struct td_bio b;
	struct td_bio c;
	struct td_bio stray;

	(void)state;
	bio_set(&a, TD_OP_WRITE, 100, 8, NULL, 10);
	bio_set(&b, TD_OP_WRITE, 108, 4, NULL, 20);
	bio_set(&c, TD_OP_WRITE, 112, 16, NULL, 30);
	rq_from(&rq, &a);
	b.next = &stray;
	td_rq_back_merge(&rq, &b);
	td_rq_back_merge(&rq, &c);

	assert_int_equal(rq.sector, 100);
	assert_int_equal(rq.nr_sectors, 28);
	assert_int_equal(rq.nr_bios, 3);
	assert_int_equal(rq.pid, 10);
	assert_ptr_equal(rq.bio, &a);
	assert_ptr_equal(a.next, &b);
	assert_ptr_equal(b.next, &c);
	assert_null(c.next);
	assert_ptr_equal(rq.biotail, &c);
	assert_int_equal(td_rq_end_sector(&rq), 128);
}

static void test_rq_front_merge_prepends_and_takes_start_and_pid(void **state)
{
	struct td_request rq;
	struct td_bio a;
	struct td_bio b;
	struct td_bio c;

	(void)state;
	bio_set(&a, TD_OP_READ, 100, 8, NULL, 10);
	bio_set(&b, TD_OP_READ, 96, 4, NULL, 20);
	bio_set(&c, TD_OP_READ, 80, 16, NULL, 30);
	rq_from(&rq, &a);
	td_rq_front_merge(&rq, &b);
	td_rq_front_merge(&rq, &c);

	assert_int_equal(rq.sector, 80);
	assert_int_equal(rq.nr_sectors, 28);
	assert_int_equal(rq.nr_bios, 3);
	assert_int_equal(rq.pid, 30);
	assert_ptr_equal(rq.bio, &c);
	assert_ptr_equal(c.next, &b);
	assert_ptr_equal(b.next, &a);
	assert_null(a.next);
	assert_ptr_equal(rq.biotail, &a);
	assert_int_equal(td_rq_end_sector(&rq), 108);
}

/* ---- request merges -------------------------------------------------------------------- */

static void test_rq_rq_mergeable_contiguous_same_kind(void **state)
{
	struct td_request rq;
	struct td_request next;
	struct td_bio a;
	struct td_bio b;

	(void)state;
	bio_set(&a, TD_OP_WRITE, 0, 8, NULL, 1);
	bio_set(&b, TD_OP_WRITE, 8, 8, NULL, 2);
	rq_from(&rq, &a);
	rq_from(&next, &b);
	assert_true(td_rq_rq_mergeable(&rq, &next, 16));
	assert_false(td_rq_rq_mergeable(&rq, &next, 15));
	/* Order matters: @next must start where @rq ends. */
	assert_false(td_rq_rq_mergeable(&next, &rq, 1024));

	next.sector = 9; /* a gap */
	assert_false(td_rq_rq_mergeable(&rq, &next, 1024));
	next.sector = 7; /* an overlap */
	assert_false(td_rq_rq_mergeable(&rq, &next, 1024));
}

static void test_rq_rq_mergeable_rejects_other_kind_or_state(void **state)
{
	struct td_request rq;
	struct td_request next;
	struct td_bio a;
	struct td_bio b;

	(void)state;
	bio_set(&a, TD_OP_WRITE, 0, 8, NULL, 1);
	bio_set(&b, TD_OP_READ, 8, 8, NULL, 2);
	rq_from(&rq, &a);
	rq_from(&next, &b);
	assert_false(td_rq_rq_mergeable(&rq, &next, 1024));

	b.op = TD_OP_WRITE;
	b.flags = TD_BIO_FUA;
	rq_from(&next, &b);
	assert_false(td_rq_rq_mergeable(&rq, &next, 1024));
	a.flags = TD_BIO_FUA;
	rq_from(&rq, &a);
	assert_true(td_rq_rq_mergeable(&rq, &next, 1024));

	next.state = TD_RQ_DISPATCH;
	assert_false(td_rq_rq_mergeable(&rq, &next, 1024));
	next.state = TD_RQ_QUEUED;
	rq.state = TD_RQ_INFLIGHT;
	assert_false(td_rq_rq_mergeable(&rq, &next, 1024));

	a.op = TD_OP_DISCARD;
	a.flags = 0;
	b.op = TD_OP_DISCARD;
	b.flags = 0;
	rq_from(&rq, &a);
	rq_from(&next, &b);
	assert_false(td_rq_rq_mergeable(&rq, &next, 1024));
}

static void test_rq_rq_mergeable_max_bios_boundary(void **state)
{
	struct td_request rq;
	struct td_request next;
	struct td_bio a;
	struct td_bio b;

	(void)state;
	bio_set(&a, TD_OP_READ, 0, 8, NULL, 1);
	bio_set(&b, TD_OP_READ, 8, 8, NULL, 2);
	rq_from(&rq, &a);
	rq_from(&next, &b);
	rq.nr_bios = TD_RQ_MAX_BIOS - 10;
	next.nr_bios = 10;
	assert_true(td_rq_rq_mergeable(&rq, &next, 1024));
	next.nr_bios = 11;
	assert_false(td_rq_rq_mergeable(&rq, &next, 1024));
}

static void test_rq_merge_requests_chains_and_empties_next(void **state)
{
	struct td_request rq;
	struct td_request next;
	struct td_bio a;
	struct td_bio b;
	struct td_bio c;
	struct td_bio d;

	(void)state;
	bio_set(&a, TD_OP_READ, 0, 8, NULL, 1);
	bio_set(&b, TD_OP_READ, 8, 8, NULL, 2);
	bio_set(&c, TD_OP_READ, 16, 4, NULL, 3);
	bio_set(&d, TD_OP_READ, 20, 4, NULL, 4);
	rq_from(&rq, &a);
	td_rq_back_merge(&rq, &b);
	rq_from(&next, &c);
	td_rq_back_merge(&next, &d);
	assert_true(td_rq_rq_mergeable(&rq, &next, 24));

	td_rq_merge_requests(&rq, &next);
	assert_int_equal(rq.sector, 0);
	assert_int_equal(rq.nr_sectors, 24);
	assert_int_equal(rq.nr_bios, 4);
	assert_int_equal(rq.pid, 1);
	assert_ptr_equal(rq.bio, &a);
	assert_ptr_equal(a.next, &b);
	assert_ptr_equal(b.next, &c);
	assert_ptr_equal(c.next, &d);
	assert_null(d.next);
	assert_ptr_equal(rq.biotail, &d);

	assert_null(next.bio);
	assert_null(next.biotail);
	assert_int_equal(next.nr_bios, 0);
	assert_int_equal(next.nr_sectors, 0);
}

/* ---- td_rq_fill_iov -------------------------------------------------------------------- */

static void test_rq_fill_iov_one_entry_per_bio_in_order(void **state)
{
	static char buf[3][16 * 512];
	struct iovec iov[TD_RQ_MAX_BIOS];
	struct td_request rq;
	struct td_bio a;
	struct td_bio b;
	struct td_bio c;

	(void)state;
	bio_set(&a, TD_OP_WRITE, 40, 8, buf[1], 1);
	bio_set(&b, TD_OP_WRITE, 48, 1, buf[0], 1);
	bio_set(&c, TD_OP_WRITE, 32, 8, buf[2], 1);
	rq_from(&rq, &a);
	td_rq_back_merge(&rq, &b);
	td_rq_front_merge(&rq, &c);
	memset(iov, 0, sizeof(iov));

	assert_int_equal(td_rq_fill_iov(&rq, iov), 3);
	assert_ptr_equal(iov[0].iov_base, buf[2]);
	assert_int_equal(iov[0].iov_len, 8 * 512);
	assert_ptr_equal(iov[1].iov_base, buf[1]);
	assert_int_equal(iov[1].iov_len, 8 * 512);
	assert_ptr_equal(iov[2].iov_base, buf[0]);
	assert_int_equal(iov[2].iov_len, 512);
	assert_null(iov[3].iov_base);
	assert_int_equal(iov[3].iov_len, 0);
}

static void test_rq_fill_iov_handles_max_bios(void **state)
{
	static struct td_bio bios[TD_RQ_MAX_BIOS];
	static char buf[TD_RQ_MAX_BIOS][512];
	static struct iovec iov[TD_RQ_MAX_BIOS];
	struct td_request rq;

	(void)state;
	for (int i = 0; i < TD_RQ_MAX_BIOS; i++)
		bio_set(&bios[i], TD_OP_READ, (uint64_t)i, 1, buf[i], 1);
	rq_from(&rq, &bios[0]);
	for (int i = 1; i < TD_RQ_MAX_BIOS; i++) {
		assert_true(td_rq_bio_mergeable(&rq, &bios[i], UINT32_MAX));
		td_rq_back_merge(&rq, &bios[i]);
	}
	assert_int_equal(td_rq_fill_iov(&rq, iov), TD_RQ_MAX_BIOS);
	for (int i = 0; i < TD_RQ_MAX_BIOS; i++) {
		assert_ptr_equal(iov[i].iov_base, buf[i]);
		assert_int_equal(iov[i].iov_len, 512);
	}
}

/* ---- the pool -------------------------------------------------------------------------- */

static void test_rq_pool_init_makes_every_request_free(void **state)
{
	struct td_rq_pool pool;
	struct td_queue *q = (struct td_queue *)&pool; /* any recognisable pointer */

	(void)state;
	assert_int_equal(td_rq_pool_init(&pool, q, 5), 0);
	assert_int_equal(pool.nr, 5);
	assert_int_equal(pool.nr_free, 5);
	assert_int_equal(pool.nr_waiting, 0);
	for (uint32_t i = 0; i < 5; i++) {
		assert_ptr_equal(pool.rqs[i].q, q);
		assert_int_equal(pool.rqs[i].state, TD_RQ_FREE);
		assert_int_equal(pool.rqs[i].tag, TD_TAG_NONE);
		assert_true(td_list_empty(&pool.rqs[i].hash));
		assert_true(td_list_empty(&pool.rqs[i].fifo));
		assert_true(td_list_empty(&pool.rqs[i].drive_list));
	}
	td_rq_pool_destroy(&pool);
	assert_null(pool.rqs);
}

static void test_rq_pool_get_and_put_count_and_hand_out_distinct(void **state)
{
	struct td_rq_pool pool;
	struct td_mutex lock;
	struct td_request *got[4];
	struct td_bio bio;

	(void)state;
	td_mutex_init(&lock);
	td_mutex_lock(&lock);
	assert_int_equal(td_rq_pool_init(&pool, NULL, 4), 0);

	for (int i = 0; i < 4; i++) {
		got[i] = td_rq_pool_get_locked(&pool, &lock);
		assert_true(got[i] >= pool.rqs && got[i] < pool.rqs + 4);
		assert_int_equal(got[i]->state, TD_RQ_FREE);
		for (int j = 0; j < i; j++)
			assert_ptr_not_equal(got[i], got[j]);
		assert_int_equal(pool.nr_free, 3 - i);
	}
	assert_true(td_list_empty(&pool.free));

	/* A used request comes back clean. */
	bio_set(&bio, TD_OP_READ, 0, 8, NULL, 1);
	td_rq_init_from_bio(got[2], &bio);
	got[2]->tag = 7;
	td_rq_pool_put_locked(&pool, got[2]);
	assert_int_equal(pool.nr_free, 1);
	assert_int_equal(got[2]->state, TD_RQ_FREE);
	assert_null(got[2]->bio);
	assert_null(got[2]->biotail);
	assert_int_equal(got[2]->tag, TD_TAG_NONE);

	/* The only free request is the one just put. */
	assert_ptr_equal(td_rq_pool_get_locked(&pool, &lock), got[2]);
	assert_int_equal(pool.nr_free, 0);

	for (int i = 0; i < 4; i++)
		td_rq_pool_put_locked(&pool, got[i]);
	assert_int_equal(pool.nr_free, 4);
	assert_int_equal(pool.nr_waiting, 0);
	td_rq_pool_destroy(&pool);
	td_mutex_unlock(&lock);
	td_mutex_destroy(&lock);
}

struct getter {
	struct td_rq_pool *pool;
	struct td_mutex *lock;
	pthread_t thread;
	atomic_bool got;
	struct td_request *rq;
};

static void *getter_main(void *arg)
{
	struct getter *g = arg;

	td_mutex_lock(g->lock);
	g->rq = td_rq_pool_get_locked(g->pool, g->lock);
	atomic_store(&g->got, true);
	td_mutex_unlock(g->lock);
	return NULL;
}

static void test_rq_pool_get_blocks_when_empty_until_put(void **state)
{
	/* Static: should the getter never wake, it must not be left pointing into a dead frame. */
	static struct td_rq_pool pool;
	static struct td_mutex lock;
	static struct getter g = { .pool = &pool, .lock = &lock };
	struct td_request *a;
	struct td_request *b;
	bool got_early;
	bool got_before_put;
	uint32_t waiting;

	(void)state;
	td_mutex_init(&lock);
	assert_int_equal(td_rq_pool_init(&pool, NULL, 2), 0);
	td_mutex_lock(&lock);
	a = td_rq_pool_get_locked(&pool, &lock);
	b = td_rq_pool_get_locked(&pool, &lock);
	assert_int_equal(pool.nr_free, 0);
	td_mutex_unlock(&lock);

	atomic_init(&g.got, false);
	g.rq = NULL;
	assert_int_equal(pthread_create(&g.thread, NULL, getter_main, &g), 0);
	sleep_ms(QUIET_MS);
	got_early = atomic_load(&g.got);

	td_mutex_lock(&lock);
	waiting = pool.nr_waiting;
	got_before_put = atomic_load(&g.got);
	td_rq_pool_put_locked(&pool, b);
	td_mutex_unlock(&lock);

	/* Checked only now, so a failure cannot leave the getter stuck on the pool. */
	assert_false(got_early);
	assert_false(got_before_put);
	assert_int_equal(waiting, 1);
	assert_true(wait_flag(&g.got, GRANT_TIMEOUT_MS));
	assert_int_equal(pthread_join(g.thread, NULL), 0);
	assert_ptr_equal(g.rq, b);

	td_mutex_lock(&lock);
	assert_int_equal(pool.nr_free, 0);
	assert_int_equal(pool.nr_waiting, 0);
	td_rq_pool_put_locked(&pool, a);
	td_rq_pool_put_locked(&pool, b);
	assert_int_equal(pool.nr_free, 2);
	td_rq_pool_destroy(&pool);
	td_mutex_unlock(&lock);
	td_mutex_destroy(&lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rq_init_from_bio_sets_every_field),
		cmocka_unit_test(test_rq_init_from_bio_maps_fua_and_drops_stale_flags),
		cmocka_unit_test(test_rq_data_bytes_is_zero_for_dataless_ops),
		cmocka_unit_test(test_rq_bio_mergeable_same_op_within_limits),
		cmocka_unit_test(test_rq_bio_mergeable_rejects_other_op),
		cmocka_unit_test(test_rq_bio_mergeable_requires_same_fua),
		cmocka_unit_test(test_rq_bio_mergeable_rejects_dataless_ops),
		cmocka_unit_test(test_rq_bio_mergeable_requires_queued_state),
		cmocka_unit_test(test_rq_bio_mergeable_max_sectors_boundary),
		cmocka_unit_test(test_rq_bio_mergeable_max_bios_boundary),
		cmocka_unit_test(test_rq_back_merge_appends_and_keeps_start_and_pid),
		cmocka_unit_test(test_rq_front_merge_prepends_and_takes_start_and_pid),
		cmocka_unit_test(test_rq_rq_mergeable_contiguous_same_kind),
		cmocka_unit_test(test_rq_rq_mergeable_rejects_other_kind_or_state),
		cmocka_unit_test(test_rq_rq_mergeable_max_bios_boundary),
		cmocka_unit_test(test_rq_merge_requests_chains_and_empties_next),
		cmocka_unit_test(test_rq_fill_iov_one_entry_per_bio_in_order),
		cmocka_unit_test(test_rq_fill_iov_handles_max_bios),
		cmocka_unit_test(test_rq_pool_init_makes_every_request_free),
		cmocka_unit_test(test_rq_pool_get_and_put_count_and_hand_out_distinct),
		cmocka_unit_test(test_rq_pool_get_blocks_when_empty_until_put),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
