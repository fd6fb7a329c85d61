// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_request.c - unit tests for requests and their pool (src/request.c).
 *
 * Requests are built from bios on the stack and checked field by field. The
 * mergeability rules are tables of cases: each row is one cmocka test, named
 * after the behaviour it pins, and run by one function. The pool tests hold
 * their own mutex in place of the queue lock. Back-pressure is observed from
 * outside: a helper thread asks for a request from an exhausted pool and
 * raises a flag once it has one; the flag must stay down for a quiet period
 * and rise only after the main thread returns a request.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* ---- tables of cases ------------------------------------------------------------------- */

/* A bio as a table row gives it. */
struct bio_spec {
	enum td_op op;
	uint64_t sector;
	uint32_t nr_sectors;
	unsigned int flags;
};

#define RD(s, n)     { TD_OP_READ, (s), (n), 0 }
#define WR(s, n)     { TD_OP_WRITE, (s), (n), 0 }
#define WR_FUA(s, n) { TD_OP_WRITE, (s), (n), TD_BIO_FUA }
#define DISC(s, n)   { TD_OP_DISCARD, (s), (n), 0 }
#define WZ(s, n)     { TD_OP_WRITE_ZEROES, (s), (n), 0 }
#define FLUSH	     { TD_OP_FLUSH, 0, 0, 0 }

static void bio_from(struct td_bio *bio, const struct bio_spec *spec, int32_t pid)
{
	bio_set(bio, spec->op, spec->sector, spec->nr_sectors, NULL, pid);
	bio->flags = spec->flags;
}

/*
 * The request state a row forces after the request is made (the zero value,
 * KEEP, leaves it QUEUED).
 */
enum forced_state { KEEP = 0, FORCE_FREE, FORCE_DISPATCH, FORCE_INFLIGHT };

static void force_state(struct td_request *rq, enum forced_state s)
{
	static const enum td_rq_state map[] = {
		[FORCE_FREE] = TD_RQ_FREE,
		[FORCE_DISPATCH] = TD_RQ_DISPATCH,
		[FORCE_INFLIGHT] = TD_RQ_INFLIGHT,
	};

	if (s != KEEP)
		rq->state = map[s];
}

/*
 * The cmocka tests of the program: one per unique test and one per table
 * row (struct test_list in unit_util.h).
 */
#define ADD_TEST(l, fn)		TL_ADD_TEST(l, fn)
#define ADD_TABLE(l, fn, table) TL_ADD_TABLE(l, fn, NULL, NULL, table)

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
/* A request made from one bio (into a request full of garbage) and what it must hold. */
struct init_case {
	const char *name;
	struct bio_spec bio;
	unsigned int flags;  /* enum td_rq_flags */
	uint32_t nr_sectors;
	uint64_t data_bytes; /* td_rq_data_bytes() */
};

/* The garbage (0xa5 bytes) has stale flag bits set: only FUA may come through, from the bio. */
static const struct init_case init_cases[] = {
	{ "test_rq_init_from_bio_maps_fua", WR_FUA(0, 8), TD_RQ_FUA, 8, 8 * 512 },
	{ "test_rq_init_from_bio_drops_stale_flags", WR(0, 8), 0, 8, 8 * 512 },
	{ "test_rq_data_bytes_counts_read_sectors", RD(64, 16), 0, 16, 16 * 512 },
	{ "test_rq_data_bytes_is_zero_for_discard", DISC(64, 16), 0, 16, 0 },
	{ "test_rq_data_bytes_is_zero_for_write_zeroes", WZ(64, 16), 0, 16, 0 },
	{ "test_rq_data_bytes_is_zero_for_flush", FLUSH, 0, 0, 0 },
};

static void run_init_case(void **state)
{
	const struct init_case *c = *state;
	struct td_request rq;
	struct td_bio bio;

	bio_from(&bio, &c->bio, 1);
	rq_from(&rq, &bio);
	assert_int_equal(rq.state, TD_RQ_QUEUED);
	assert_int_equal(rq.op, c->bio.op);
	assert_int_equal(rq.flags, c->flags);
	assert_int_equal(rq.sector, c->bio.sector);
	assert_int_equal(rq.nr_sectors, c->nr_sectors);
	assert_int_equal(td_rq_end_sector(&rq), c->bio.sector + c->nr_sectors);
	assert_int_equal(td_rq_data_bytes(&rq), c->data_bytes);
}

/* ---- td_rq_bio_mergeable --------------------------------------------------------------- */

/*
 * A request made from @first, then (when non-zero) given @state, @nr_sectors
 * and @nr_bios, asked whether @bio may join it within @max_sectors.
 */
struct bio_mergeable_case {
	const char *name;
	struct bio_spec first;
	struct bio_spec bio;
	uint32_t max_sectors;
	enum forced_state state;
	uint32_t nr_sectors;
	uint32_t nr_bios;
	bool mergeable;
};

static const struct bio_mergeable_case bio_mergeable_cases[] = {
	/* Same operation, within the limits. */
	{ "test_rq_bio_mergeable_read_joins_read_up_to_max_sectors",
	  RD(0, 8), RD(8, 8), 16, .mergeable = true },
	{ "test_rq_bio_mergeable_write_joins_write",
	  WR(0, 8), WR(8, 8), 16, .mergeable = true },
	/* Contiguity is the caller's business: a far bio passes too. */
	{ "test_rq_bio_mergeable_leaves_contiguity_to_the_caller",
	  RD(0, 8), RD(1000, 8), 16, .mergeable = true },
	/* Another operation. */
	{ "test_rq_bio_mergeable_rejects_write_into_read",
	  RD(0, 8), WR(8, 8), 1024, .mergeable = false },
	{ "test_rq_bio_mergeable_rejects_read_into_write",
	  WR(0, 8), RD(8, 8), 1024, .mergeable = false },
	{ "test_rq_bio_mergeable_rejects_discard_into_write",
	  WR(0, 8), DISC(8, 8), 1024, .mergeable = false },
	/* FUA must match. */
	{ "test_rq_bio_mergeable_rejects_fua_into_plain",
	  WR(0, 8), WR_FUA(8, 8), 1024, .mergeable = false },
	{ "test_rq_bio_mergeable_fua_joins_fua",
	  WR_FUA(0, 8), WR_FUA(8, 8), 1024, .mergeable = true },
	{ "test_rq_bio_mergeable_rejects_plain_into_fua",
	  WR_FUA(0, 8), WR(8, 8), 1024, .mergeable = false },
	/* Dataless operations never merge, not even with their own kind. */
	{ "test_rq_bio_mergeable_rejects_flush",
	  FLUSH, FLUSH, 1024, .mergeable = false },
	{ "test_rq_bio_mergeable_rejects_discard",
	  DISC(0, 8), DISC(8, 8), 1024, .mergeable = false },
	{ "test_rq_bio_mergeable_rejects_write_zeroes",
	  WZ(0, 8), WZ(8, 8), 1024, .mergeable = false },
	/* Only a QUEUED request takes bios. */
	{ "test_rq_bio_mergeable_rejects_free_request",
	  RD(0, 8), RD(8, 8), 1024, .state = FORCE_FREE, .mergeable = false },
	{ "test_rq_bio_mergeable_rejects_dispatched_request",
	  RD(0, 8), RD(8, 8), 1024, .state = FORCE_DISPATCH, .mergeable = false },
	{ "test_rq_bio_mergeable_rejects_inflight_request",
	  RD(0, 8), RD(8, 8), 1024, .state = FORCE_INFLIGHT, .mergeable = false },
	/* max_sectors, and a sum that must not wrap around 32 bits. */
	{ "test_rq_bio_mergeable_rejects_one_sector_past_max_sectors",
	  RD(0, 8), RD(8, 8), 15, .mergeable = false },
	{ "test_rq_bio_mergeable_reaches_uint32_max_sectors",
	  RD(0, 8), RD(8, 8), UINT32_MAX, .nr_sectors = UINT32_MAX - 8, .mergeable = true },
	{ "test_rq_bio_mergeable_sector_sum_does_not_wrap",
	  RD(0, 8), RD(8, 9), UINT32_MAX, .nr_sectors = UINT32_MAX - 8, .mergeable = false },
	/* TD_RQ_MAX_BIOS. */
	{ "test_rq_bio_mergeable_takes_the_last_bio_slot",
	  WR(0, 1), WR(1, 1), UINT32_MAX, .nr_bios = TD_RQ_MAX_BIOS - 1, .mergeable = true },
	{ "test_rq_bio_mergeable_rejects_past_max_bios",
	  WR(0, 1), WR(1, 1), UINT32_MAX, .nr_bios = TD_RQ_MAX_BIOS, .mergeable = false },
};

static void run_bio_mergeable_case(void **state)
{
	const struct bio_mergeable_case *c = *state;
	struct td_request rq;
	struct td_bio first;
	struct td_bio bio;

	bio_from(&first, &c->first, 1);
	rq_from(&rq, &first);
	force_state(&rq, c->state);
	if (c->nr_sectors)
		rq.nr_sectors = c->nr_sectors;
	if (c->nr_bios)
		rq.nr_bios = c->nr_bios;
	bio_from(&bio, &c->bio, 2);
	assert_int_equal(td_rq_bio_mergeable(&rq, &bio, c->max_sectors), c->mergeable);
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

/*
 * Requests made from @a and @b, then (when non-zero) given states and bio
 * counts, asked whether the one from @b may be appended to the one from @a.
 */
struct rq_mergeable_case {
	const char *name;
	struct bio_spec a;
	struct bio_spec b;
	uint32_t max_sectors;
	enum forced_state a_state;
	enum forced_state b_state;
	uint32_t a_nr_bios;
	uint32_t b_nr_bios;
	bool mergeable;
};

static const struct rq_mergeable_case rq_mergeable_cases[] = {
	/* Contiguous, same kind: only the limits decide. */
	{ "test_rq_rq_mergeable_contiguous_writes_up_to_max_sectors",
	  WR(0, 8), WR(8, 8), 16, .mergeable = true },
	{ "test_rq_rq_mergeable_rejects_one_sector_past_max_sectors",
	  WR(0, 8), WR(8, 8), 15, .mergeable = false },
	/* Order matters: the second must start where the first ends. */
	{ "test_rq_rq_mergeable_rejects_next_before_rq",
	  WR(8, 8), WR(0, 8), 1024, .mergeable = false },
	{ "test_rq_rq_mergeable_rejects_gap",
	  WR(0, 8), WR(9, 8), 1024, .mergeable = false },
	{ "test_rq_rq_mergeable_rejects_overlap",
	  WR(0, 8), WR(7, 8), 1024, .mergeable = false },
	/* Same kind: operation and FUA. */
	{ "test_rq_rq_mergeable_rejects_read_after_write",
	  WR(0, 8), RD(8, 8), 1024, .mergeable = false },
	{ "test_rq_rq_mergeable_rejects_fua_after_plain",
	  WR(0, 8), WR_FUA(8, 8), 1024, .mergeable = false },
	{ "test_rq_rq_mergeable_fua_joins_fua",
	  WR_FUA(0, 8), WR_FUA(8, 8), 1024, .mergeable = true },
	{ "test_rq_rq_mergeable_rejects_discards",
	  DISC(0, 8), DISC(8, 8), 1024, .mergeable = false },
	/* Both QUEUED. */
	{ "test_rq_rq_mergeable_rejects_dispatched_next",
	  WR_FUA(0, 8), WR_FUA(8, 8), 1024, .b_state = FORCE_DISPATCH, .mergeable = false },
	{ "test_rq_rq_mergeable_rejects_inflight_rq",
	  WR_FUA(0, 8), WR_FUA(8, 8), 1024, .a_state = FORCE_INFLIGHT, .mergeable = false },
	/* TD_RQ_MAX_BIOS between the two. */
	{ "test_rq_rq_mergeable_fills_max_bios_together",
	  RD(0, 8), RD(8, 8), 1024, .a_nr_bios = TD_RQ_MAX_BIOS - 10, .b_nr_bios = 10,
	  .mergeable = true },
	{ "test_rq_rq_mergeable_rejects_past_max_bios_together",
	  RD(0, 8), RD(8, 8), 1024, .a_nr_bios = TD_RQ_MAX_BIOS - 10, .b_nr_bios = 11,
	  .mergeable = false },
};

static void run_rq_mergeable_case(void **state)
{
	const struct rq_mergeable_case *c = *state;
	struct td_request rq;
	struct td_request next;
	struct td_bio a;
	struct td_bio b;

	bio_from(&a, &c->a, 1);
	bio_from(&b, &c->b, 2);
	rq_from(&rq, &a);
	rq_from(&next, &b);
	force_state(&rq, c->a_state);
	force_state(&next, c->b_state);
	if (c->a_nr_bios)
		rq.nr_bios = c->a_nr_bios;
	if (c->b_nr_bios)
		next.nr_bios = c->b_nr_bios;
	assert_int_equal(td_rq_rq_mergeable(&rq, &next, c->max_sectors), c->mergeable);
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
	static struct test_list l;

	ADD_TEST(&l, test_rq_init_from_bio_sets_every_field);
	ADD_TABLE(&l, run_init_case, init_cases);
	ADD_TABLE(&l, run_bio_mergeable_case, bio_mergeable_cases);
	ADD_TEST(&l, test_rq_back_merge_appends_and_keeps_start_and_pid);
	ADD_TEST(&l, test_rq_front_merge_prepends_and_takes_start_and_pid);
	ADD_TABLE(&l, run_rq_mergeable_case, rq_mergeable_cases);
	ADD_TEST(&l, test_rq_merge_requests_chains_and_empties_next);
	ADD_TEST(&l, test_rq_fill_iov_one_entry_per_bio_in_order);
	ADD_TEST(&l, test_rq_fill_iov_handles_max_bios);
	ADD_TEST(&l, test_rq_pool_init_makes_every_request_free);
	ADD_TEST(&l, test_rq_pool_get_and_put_count_and_hand_out_distinct);
	ADD_TEST(&l, test_rq_pool_get_blocks_when_empty_until_put);

	/* cmocka_run_group_tests() wants an array of fixed size; this is the function behind it. */
	return test_list_run(&l);
}
