// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_rangelock.c - shared/exclusive range locks: who waits for whom, and
 * that no exclusive holder ever overlaps another holder under load.
 *
 * Blocking is observed from outside: a helper thread takes a range and then
 * raises a flag. "Still blocked" means the flag stays down across a quiet
 * period; "granted" means it rises before a generous deadline. A lock that
 * grants too early is caught unless the helper is not scheduled for the whole
 * quiet period. Tests about arrival order also rely on that period to let one
 * helper queue before the next one starts.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <cmocka.h>
#include "common/clock.h"
#include "tagdisk/rangelock.h"
#include "unit_util.h"

#define BLOCK		 4096
#define QUIET_MS	 100   /* how long a blocked locker must stay blocked */
#define GRANT_TIMEOUT_MS 10000 /* how long a grant may take before we call it a hang */

/* A range taken by a helper thread. */
struct locker {
	struct td_rangelock *rl;
	struct td_range *range; /* the caller's, or own_range */
	struct td_range own_range;
	uint64_t start;
	uint64_t end;
	bool exclusive;
	pthread_t thread;
	atomic_bool started;
	atomic_bool acquired;
	atomic_uint *order; /* when set: a shared counter, to record grant order */
	unsigned int rank;  /* its value when this locker was granted */
};

static void *locker_main(void *arg)
{
	struct locker *lk = arg;

	atomic_store(&lk->started, true);
	td_range_lock(lk->rl, lk->range, lk->start, lk->end, lk->exclusive);
	if (lk->order)
		lk->rank = atomic_fetch_add(lk->order, 1);
	atomic_store(&lk->acquired, true);
	return NULL;
}

/*
 * Start a helper that locks [@start, @end) in @r (NULL: in lk->own_range); return once it is
 * about to call the lock.
 */
static void locker_start_in(struct locker *lk, struct td_rangelock *rl, struct td_range *r,
			    uint64_t start, uint64_t end, bool exclusive)
{
	lk->rl = rl;
	lk->range = r ? r : &lk->own_range;
	lk->start = start;
	lk->end = end;
	lk->exclusive = exclusive;
	atomic_init(&lk->started, false);
	atomic_init(&lk->acquired, false);
	assert_int_equal(pthread_create(&lk->thread, NULL, locker_main, lk), 0);
	assert_true(wait_flag(&lk->started, GRANT_TIMEOUT_MS));
}

static void locker_start(struct locker *lk, struct td_rangelock *rl, uint64_t start, uint64_t end,
			 bool exclusive)
{
	locker_start_in(lk, rl, NULL, start, end, exclusive);
}

/* The helper has not got its range, even after a quiet period. */
static void assert_still_blocked(struct locker *lk)
{
	sleep_ms(QUIET_MS);
	assert_false(atomic_load(&lk->acquired));
}

/* The helper got its range (its thread is joined). */
static void assert_granted(struct locker *lk)
{
	assert_true(wait_flag(&lk->acquired, GRANT_TIMEOUT_MS));
	assert_int_equal(pthread_join(lk->thread, NULL), 0);
	assert_true(lk->range->granted);
}

/* Take a range from a helper thread and check it is granted without waiting on anyone. */
static void lock_now(struct td_rangelock *rl, struct td_range *r, uint64_t start, uint64_t end,
		     bool exclusive)
{
	struct locker lk = { 0 };

	locker_start_in(&lk, rl, r, start, end, exclusive);
	assert_granted(&lk);
	assert_true(r->start == start && r->end == end && r->exclusive == exclusive);
}

struct unlocker {
	struct td_rangelock *rl;
	struct td_range *range;
};

static void *unlocker_main(void *arg)
{
	struct unlocker *u = arg;

	td_range_unlock(u->rl, u->range);
	return NULL;
}

/* Release @r from a thread other than the one that took it. */
static void unlock_from_other_thread(struct td_rangelock *rl, struct td_range *r)
{
	struct unlocker u = { .rl = rl, .range = r };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, unlocker_main, &u), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_false(r->granted);
}

static struct td_rangelock *new_rangelock(void)
{
	struct td_rangelock *rl = td_rangelock_create();

	assert_non_null(rl);
	return rl;
}

static void test_rangelock_overlapping_shared_ranges_both_granted(void **state)
{
	struct td_rangelock *rl = new_rangelock();
	struct td_range a, b, c;

	(void)state;
	lock_now(rl, &a, 0, 2 * BLOCK, false);
	lock_now(rl, &b, BLOCK, 3 * BLOCK, false);
	lock_now(rl, &c, 0, 3 * BLOCK, false);
	assert_true(a.granted && b.granted && c.granted);
	assert_false(a.exclusive);
	assert_int_equal(b.start, BLOCK);
	assert_int_equal(b.end, 3 * BLOCK);
	td_range_unlock(rl, &b);
	td_range_unlock(rl, &a);
	td_range_unlock(rl, &c);
	assert_false(a.granted || b.granted || c.granted);
	td_rangelock_destroy(rl);
}

static void test_rangelock_exclusive_waits_for_overlapping_shared_holder(void **state)
{
	struct td_rangelock *rl = new_rangelock();
	struct locker excl = { 0 };
	struct td_range held;

	(void)state;
	td_range_lock(rl, &held, 0, 2 * BLOCK, false);
	locker_start(&excl, rl, BLOCK, 3 * BLOCK, true);
	assert_still_blocked(&excl);

	unlock_from_other_thread(rl, &held);
	assert_granted(&excl);
	assert_true(excl.range->exclusive);
	td_range_unlock(rl, excl.range);
	td_rangelock_destroy(rl);
}

static void test_rangelock_exclusive_waits_for_overlapping_exclusive_holder(void **state)
{
	struct td_rangelock *rl = new_rangelock();
	struct locker second = { 0 };
	struct td_range first;

	(void)state;
	td_range_lock(rl, &first, 0, BLOCK, true);
	locker_start(&second, rl, BLOCK - 1, BLOCK, true);
	assert_still_blocked(&second);
	unlock_from_other_thread(rl, &first);
	assert_granted(&second);
	td_range_unlock(rl, second.range);
	td_rangelock_destroy(rl);
}

static void test_rangelock_shared_waits_behind_waiting_exclusive(void **state)
{
	struct td_rangelock *rl = new_rangelock();
	struct locker excl = { 0 };
	struct locker late = { 0 };
	atomic_uint order = 0;
	struct td_range held, apart;

	(void)state;
	excl.order = &order;
	late.order = &order;
	/* held [0, 4096) shared; excl wants [0, 8192); late wants [4096, 8192) shared. */
	td_range_lock(rl, &held, 0, BLOCK, false);
	locker_start(&excl, rl, 0, 2 * BLOCK, true);
	assert_still_blocked(&excl);
	/* Nothing held overlaps late's range: only the waiting exclusive stops it. */
	locker_start(&late, rl, BLOCK, 2 * BLOCK, false);
	assert_still_blocked(&late);
	assert_false(atomic_load(&excl.acquired));

	/* A shared range clear of the waiting exclusive goes straight through. */
	lock_now(rl, &apart, 2 * BLOCK, 3 * BLOCK, false);

	unlock_from_other_thread(rl, &held);
	assert_granted(&excl);
	assert_still_blocked(&late);
	unlock_from_other_thread(rl, excl.range);
	assert_granted(&late);
	assert_int_equal(excl.rank, 0);
	assert_int_equal(late.rank, 1);

	td_range_unlock(rl, late.range);
	td_range_unlock(rl, &apart);
	td_rangelock_destroy(rl);
}

static void test_rangelock_overlapping_exclusives_granted_in_arrival_order(void **state)
{
	struct td_rangelock *rl = new_rangelock();
	struct locker first = { 0 };
	struct locker second = { 0 };
	atomic_uint order = 0;
	struct td_range held;

	(void)state;
	first.order = &order;
	second.order = &order;
	td_range_lock(rl, &held, 0, 4 * BLOCK, false);
	/* first wants [0, 8192), then second wants [4096, 12288): they overlap. */
	locker_start(&first, rl, 0, 2 * BLOCK, true);
	assert_still_blocked(&first);
	locker_start(&second, rl, BLOCK, 3 * BLOCK, true);
	assert_still_blocked(&second);

	/* Both are now free of shared holders; second must still wait for first. */
	td_range_unlock(rl, &held);
	assert_granted(&first);
	assert_still_blocked(&second);
	td_range_unlock(rl, first.range);
	assert_granted(&second);
	assert_int_equal(first.rank, 0);
	assert_int_equal(second.rank, 1);
	td_range_unlock(rl, second.range);
	td_rangelock_destroy(rl);
}

static void test_rangelock_disjoint_exclusive_and_shared_do_not_block(void **state)
{
	struct td_rangelock *rl = new_rangelock();
	struct td_range e1, s1, e2, s2;

	(void)state;
	lock_now(rl, &e1, 0, BLOCK, true);
	lock_now(rl, &s1, 2 * BLOCK, 3 * BLOCK, false);
	lock_now(rl, &e2, 4 * BLOCK, 5 * BLOCK, true);
	lock_now(rl, &s2, 6 * BLOCK, 8 * BLOCK, false);
	assert_true(e1.granted && s1.granted && e2.granted && s2.granted);
	td_range_unlock(rl, &s1);
	td_range_unlock(rl, &e1);
	td_range_unlock(rl, &s2);
	td_range_unlock(rl, &e2);
	td_rangelock_destroy(rl);
}

static void test_rangelock_adjacent_ranges_do_not_conflict(void **state)
{
	struct td_rangelock *rl = new_rangelock();
	struct td_range a, b, c, d;

	(void)state;
	lock_now(rl, &a, 0, BLOCK, true);
	lock_now(rl, &b, BLOCK, 2 * BLOCK, true);
	lock_now(rl, &c, 2 * BLOCK, 3 * BLOCK, false);
	/* A shared range ending exactly where an exclusive one starts. */
	td_range_unlock(rl, &a);
	lock_now(rl, &d, 0, BLOCK, false);
	td_range_unlock(rl, &b);
	td_range_unlock(rl, &c);
	td_range_unlock(rl, &d);
	td_rangelock_destroy(rl);
}

static void test_rangelock_empty_range_conflicts_with_nothing(void **state)
{
	struct td_rangelock *rl = new_rangelock();
	struct td_range held, empty;

	(void)state;
	td_range_lock(rl, &held, 0, 2 * BLOCK, true);
	lock_now(rl, &empty, BLOCK, BLOCK, true);
	td_range_unlock(rl, &empty);
	lock_now(rl, &empty, BLOCK, BLOCK, false);
	td_range_unlock(rl, &empty);
	td_range_unlock(rl, &held);
	td_rangelock_destroy(rl);
}

/*
 * Stress: threads lock random ranges of a few blocks, shared or exclusive.
 * While holding, each marks its blocks in per-block counters; an exclusive
 * holder must find no other holder of its blocks, a shared one no exclusive
 * holder. Counters are sequentially consistent, so of two overlapping
 * holders at least one sees the other's mark.
 */
#define STRESS_THREADS 4
#define STRESS_BLOCKS  8
#define STRESS_ITERS   4000

struct stress {
	struct td_rangelock *rl;
	atomic_int shared_holders[STRESS_BLOCKS];
	atomic_int exclusive_holders[STRESS_BLOCKS];
	atomic_uint violations;
	atomic_uint nr_shared;
	atomic_uint nr_exclusive;
};

struct stress_thread {
	struct stress *s;
	unsigned int seed;
};

static void stress_hold(struct stress *s, unsigned int first, unsigned int last, bool exclusive)
{
	for (unsigned int b = first; b <= last; b++) {
		if (exclusive) {
			if (atomic_fetch_add(&s->exclusive_holders[b], 1) != 0)
				atomic_fetch_add(&s->violations, 1);
			if (atomic_load(&s->shared_holders[b]) != 0)
				atomic_fetch_add(&s->violations, 1);
		} else {
			atomic_fetch_add(&s->shared_holders[b], 1);
			if (atomic_load(&s->exclusive_holders[b]) != 0)
				atomic_fetch_add(&s->violations, 1);
		}
	}
	if (exclusive)
		sched_yield();
	for (unsigned int b = first; b <= last; b++) {
		if (exclusive)
			atomic_fetch_sub(&s->exclusive_holders[b], 1);
		else
			atomic_fetch_sub(&s->shared_holders[b], 1);
	}
}

static void *stress_main(void *arg)
{
	struct stress_thread *st = arg;
	struct stress *s = st->s;
	struct td_range r;

	for (unsigned int i = 0; i < STRESS_ITERS; i++) {
		unsigned int first = (unsigned int)rand_r(&st->seed) % STRESS_BLOCKS;
		unsigned int nr = 1 + (unsigned int)rand_r(&st->seed) % 3;
		unsigned int last = TD_MIN(first + nr - 1, STRESS_BLOCKS - 1);
		bool exclusive = rand_r(&st->seed) % 4 == 0;

		td_range_lock(s->rl, &r, (uint64_t)first * BLOCK, (uint64_t)(last + 1) * BLOCK,
			      exclusive);
		stress_hold(s, first, last, exclusive);
		td_range_unlock(s->rl, &r);
		atomic_fetch_add(exclusive ? &s->nr_exclusive : &s->nr_shared, 1);
	}
	return NULL;
}

static void test_rangelock_stress_exclusive_never_overlaps_another_holder(void **state)
{
	static struct stress s;
	struct stress_thread st[STRESS_THREADS];
	pthread_t threads[STRESS_THREADS];

	(void)state;
	s.rl = new_rangelock();
	for (unsigned int i = 0; i < STRESS_THREADS; i++) {
		st[i] = (struct stress_thread){ .s = &s, .seed = 1000 + i };
		assert_int_equal(pthread_create(&threads[i], NULL, stress_main, &st[i]), 0);
	}
	for (unsigned int i = 0; i < STRESS_THREADS; i++)
		assert_int_equal(pthread_join(threads[i], NULL), 0);

	assert_int_equal(atomic_load(&s.violations), 0);
	assert_int_equal(atomic_load(&s.nr_shared) + atomic_load(&s.nr_exclusive),
			 STRESS_THREADS * STRESS_ITERS);
	/* About one in four is exclusive: both kinds were exercised. */
	assert_in_range(atomic_load(&s.nr_exclusive), STRESS_THREADS * STRESS_ITERS / 8,
			STRESS_THREADS * STRESS_ITERS / 2);
	for (unsigned int b = 0; b < STRESS_BLOCKS; b++) {
		assert_int_equal(atomic_load(&s.shared_holders[b]), 0);
		assert_int_equal(atomic_load(&s.exclusive_holders[b]), 0);
	}
	td_rangelock_destroy(s.rl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rangelock_overlapping_shared_ranges_both_granted),
		cmocka_unit_test(test_rangelock_exclusive_waits_for_overlapping_shared_holder),
		cmocka_unit_test(test_rangelock_exclusive_waits_for_overlapping_exclusive_holder),
		cmocka_unit_test(test_rangelock_shared_waits_behind_waiting_exclusive),
		cmocka_unit_test(test_rangelock_overlapping_exclusives_granted_in_arrival_order),
		cmocka_unit_test(test_rangelock_disjoint_exclusive_and_shared_do_not_block),
		cmocka_unit_test(test_rangelock_adjacent_ranges_do_not_conflict),
		cmocka_unit_test(test_rangelock_empty_range_conflicts_with_nothing),
		cmocka_unit_test(test_rangelock_stress_exclusive_never_overlaps_another_holder),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
