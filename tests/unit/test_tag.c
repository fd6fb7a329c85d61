// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_tag.c - unit tests for the tag map (src/tag.c).
 *
 * Single-threaded cases check exact tags; the threaded cases count, per tag,
 * how many threads believe they hold it, and report violations back to the
 * main thread (cmocka's assertions may only fail in the thread running the
 * test). Misuse that must abort is run in a forked child.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "tagdisk/tag.h"
#include "unit_util.h"

#define WORD_BITS 64

/* Distinct, recognisable request pointers: &fake_rqs[n]. */
static char fake_rqs[TD_TAG_DEPTH_MAX];

static void *rq_of(int n)
{
	return &fake_rqs[n];
}

static struct td_tag_map *map_new(unsigned int depth)
{
	struct td_tag_map *map = td_tag_map_create(depth);

	assert_non_null(map);
	return map;
}

/*
 * Homes: a scan starts at the home word of the caller's CPU (src/engine/tag.c),
 * so tests that look at tag numbers in a map of several words pin the thread.
 */

/* The CPUs this process may run on, at most 8 of them; at least one. */
static unsigned int usable_cpus(int *cpus)
{
	cpu_set_t set;
	unsigned int n = 0;

	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (int c = 0; c < CPU_SETSIZE && n < 8; c++)
			if (CPU_ISSET(c, &set))
				cpus[n++] = c;
	if (!n)
		cpus[n++] = sched_getcpu();
	return n;
}

/* Run the calling thread on @cpu only. Return: true when it does. */
static bool pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) == 0 && sched_getcpu() == cpu;
}

/* Give the calling thread the CPUs it had: @saved. */
static void unpin(const cpu_set_t *saved)
{
	sched_setaffinity(0, sizeof(*saved), saved);
}

/* CPU @cpu's home word among @nr_words: the van der Corput point of @cpu, in 16 bits. */
static unsigned int home_word(int cpu, unsigned int nr_words)
{
	unsigned int home = 0;

	for (unsigned int b = 0; b < 16; b++)
		home |= (((unsigned int)cpu >> b) & 1U) << (15 - b);
	return (unsigned int)(((uint64_t)home * nr_words) >> 16);
}

static void end_all(struct td_tag_map *map, const int *tags, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		assert_false(td_tag_end(map, tags[i]));
}

/* End every busy tag below @depth, leave the map idle and destroy it. */
static void end_busy_and_destroy(struct td_tag_map *map, unsigned int depth)
{
	for (unsigned int tag = 0; tag < depth; tag++)
		if (td_tag_find(map, (int)tag))
			td_tag_end(map, (int)tag);
	assert_int_equal(td_tag_busy(map), 0);
	td_tag_map_destroy(map);
}

static void test_tag_map_create_rejects_depth_out_of_range(void **state)
{
	(void)state;
	errno = 0;
	assert_null(td_tag_map_create(0));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(td_tag_map_create(TD_TAG_DEPTH_MAX + 1));
	assert_int_equal(errno, EINVAL);
}

static void test_tag_map_create_has_depth_and_no_users(void **state)
{
	struct td_tag_map *map = map_new(32);

	(void)state;
	assert_int_equal(td_tag_depth(map), 32);
	assert_int_equal(td_tag_busy(map), 0);
	assert_int_equal(td_tag_map_users(map), 0);
	td_tag_map_destroy(map);
}

/* Fill a map of @depth: every tag in [0, depth) exactly once, then -EBUSY. */
static void check_fill(unsigned int depth)
{
	static int tags[TD_TAG_DEPTH_MAX];
	static bool seen[TD_TAG_DEPTH_MAX];
	struct td_tag_map *map = map_new(depth);

	memset(seen, 0, sizeof(seen));
	for (unsigned int i = 0; i < depth; i++) {
		int tag = td_tag_start(map, rq_of((int)i));

		assert_in_range(tag, 0, depth - 1);
		assert_false(seen[tag]);
		seen[tag] = true;
		tags[i] = tag;
	}
	assert_int_equal(td_tag_busy(map), depth);
	assert_int_equal(td_tag_start(map, rq_of(0)), -EBUSY);
	assert_int_equal(td_tag_start(map, rq_of(0)), -EBUSY);
	assert_int_equal(td_tag_busy(map), depth);

	/* The first end after the failed starts reports them; the rest do not. */
	assert_true(td_tag_end(map, tags[0]));
	end_all(map, tags + 1, depth - 1);
	assert_int_equal(td_tag_busy(map), 0);
	td_tag_map_destroy(map);
}

static void test_tag_start_returns_each_tag_once_then_ebusy(void **state)
{
	static const unsigned int depths[] = {2, 3, 63, 64, 65, 100, 128, 1000};

	(void)state;
	for (unsigned int i = 0; i < TD_ARRAY_SIZE(depths); i++)
		check_fill(depths[i]);
}

static void test_tag_start_depth_one_has_only_tag_zero(void **state)
{
	struct td_tag_map *map = map_new(1);

	(void)state;
	for (int round = 0; round < 3; round++) {
		assert_int_equal(td_tag_start(map, rq_of(7)), 0);
		assert_int_equal(td_tag_start(map, rq_of(8)), -EBUSY);
		assert_ptr_equal(td_tag_find(map, 0), rq_of(7));
		assert_true(td_tag_end(map, 0));
		assert_null(td_tag_find(map, 0));
	}
	td_tag_map_destroy(map);
}

static void test_tag_start_depth_max_hands_out_every_tag(void **state)
{
	(void)state;
	check_fill(TD_TAG_DEPTH_MAX);
}

static void test_tag_end_frees_tag_that_start_returns_again(void **state)
{
	struct td_tag_map *map = map_new(8);

	(void)state;
	for (int i = 0; i < 8; i++)
		assert_in_range(td_tag_start(map, rq_of(i)), 0, 7);
	assert_false(td_tag_end(map, 3));
	assert_int_equal(td_tag_busy(map), 7);
	assert_int_equal(td_tag_start(map, rq_of(100)), 3);
	assert_ptr_equal(td_tag_find(map, 3), rq_of(100));
	assert_int_equal(td_tag_start(map, rq_of(101)), -EBUSY);
	for (int tag = 0; tag < 8; tag++)
		td_tag_end(map, tag);
	assert_int_equal(td_tag_busy(map), 0);
	td_tag_map_destroy(map);
}

static void test_tag_find_returns_request_of_busy_tag_only(void **state)
{
	struct td_tag_map *map = map_new(16);
	int a;
	int b;

	(void)state;
	a = td_tag_start(map, rq_of(1));
	b = td_tag_start(map, rq_of(2));
	assert_int_not_equal(a, b);
	assert_ptr_equal(td_tag_find(map, a), rq_of(1));
	assert_ptr_equal(td_tag_find(map, b), rq_of(2));

	/* Free tags, never-started tags and out-of-range tags find nothing. */
	for (int tag = 0; tag < 16; tag++)
		if (tag != a && tag != b)
			assert_null(td_tag_find(map, tag));
	assert_null(td_tag_find(map, 16));
	assert_null(td_tag_find(map, -1));
	assert_null(td_tag_find(map, TD_TAG_DEPTH_MAX));
	assert_null(td_tag_find(map, INT32_MAX));
	assert_null(td_tag_find(map, INT32_MIN));

	assert_false(td_tag_end(map, a));
	assert_null(td_tag_find(map, a));
	assert_ptr_equal(td_tag_find(map, b), rq_of(2));
	assert_false(td_tag_end(map, b));
	assert_null(td_tag_find(map, b));
	td_tag_map_destroy(map);
}

static void test_tag_end_returns_false_without_failed_start(void **state)
{
	struct td_tag_map *map = map_new(4);

	(void)state;
	for (int i = 0; i < 100; i++) {
		int tag = td_tag_start(map, rq_of(i));

		assert_in_range(tag, 0, 3);
		assert_false(td_tag_end(map, tag));
	}
	td_tag_map_destroy(map);
}

static void test_tag_end_reports_starvation_exactly_once(void **state)
{
	struct td_tag_map *map = map_new(3);

	(void)state;
	for (int i = 0; i < 3; i++)
		assert_int_equal(td_tag_start(map, rq_of(i)), i);
	assert_int_equal(td_tag_start(map, rq_of(9)), -EBUSY);
	assert_true(td_tag_end(map, 1));
	assert_false(td_tag_end(map, 0));

	/* A start that succeeds does not mark the map starved. */
	assert_int_equal(td_tag_start(map, rq_of(10)), 0);
	assert_false(td_tag_end(map, 0));

	/* Starving again after the report is reported again. */
	assert_int_equal(td_tag_start(map, rq_of(11)), 0);
	assert_int_equal(td_tag_start(map, rq_of(12)), 1);
	assert_int_equal(td_tag_start(map, rq_of(13)), -EBUSY);
	assert_true(td_tag_end(map, 2));
	assert_false(td_tag_end(map, 1));
	assert_false(td_tag_end(map, 0));
	assert_int_equal(td_tag_busy(map), 0);
	td_tag_map_destroy(map);
}

static void test_tag_resize_shrink_keeps_busy_tags_above_depth(void **state)
{
	struct td_tag_map *map = map_new(64);

	(void)state;
	for (int i = 0; i < 64; i++)
		assert_int_equal(td_tag_start(map, rq_of(i)), i);
	assert_int_equal(td_tag_resize(map, 16), 0);
	assert_int_equal(td_tag_depth(map), 16);
	assert_int_equal(td_tag_busy(map), 64);

	/* Tags above the new depth are still held, findable and endable. */
	for (int tag = 16; tag < 64; tag++)
		assert_ptr_equal(td_tag_find(map, tag), rq_of(tag));
	assert_false(td_tag_end(map, 40));
	assert_null(td_tag_find(map, 40));
	assert_int_equal(td_tag_busy(map), 63);

	/* Tag 40 is free but above the depth: not handed out. */
	assert_int_equal(td_tag_start(map, rq_of(200)), -EBUSY);
	assert_true(td_tag_end(map, 5));
	assert_int_equal(td_tag_start(map, rq_of(201)), 5);
	assert_int_equal(td_tag_start(map, rq_of(202)), -EBUSY);

	/* With every tag ended, only [0, 16) comes back. */
	for (int tag = 0; tag < 64; tag++)
		if (tag != 40)
			td_tag_end(map, tag);
	assert_int_equal(td_tag_busy(map), 0);
	for (int i = 0; i < 16; i++)
		assert_int_equal(td_tag_start(map, rq_of(i)), i);
	assert_int_equal(td_tag_start(map, rq_of(16)), -EBUSY);
	td_tag_map_destroy(map);
}

static void test_tag_resize_shrink_within_a_word_masks_upper_bits(void **state)
{
	struct td_tag_map *map = map_new(100);
	int tags[5];

	(void)state;
	assert_int_equal(td_tag_resize(map, 5), 0);
	for (int i = 0; i < 5; i++) {
		tags[i] = td_tag_start(map, rq_of(i));
		assert_in_range(tags[i], 0, 4);
	}
	assert_int_equal(td_tag_start(map, rq_of(5)), -EBUSY);
	assert_int_equal(td_tag_busy(map), 5);
	assert_true(td_tag_end(map, tags[0]));
	end_all(map, tags + 1, 4);
	td_tag_map_destroy(map);
}

static void test_tag_resize_grow_makes_more_tags_available(void **state)
{
	struct td_tag_map *map = map_new(4);
	bool seen[8] = {false};
	cpu_set_t saved;
	unsigned int word;
	int cpus[8];

	(void)state;
	for (int i = 0; i < 4; i++)
		assert_int_equal(td_tag_start(map, rq_of(i)), i);
	assert_int_equal(td_tag_start(map, rq_of(4)), -EBUSY);
	assert_int_equal(td_tag_resize(map, 8), 0);
	assert_int_equal(td_tag_depth(map), 8);
	for (int i = 4; i < 8; i++) {
		int tag = td_tag_start(map, rq_of(i));

		assert_in_range(tag, 4, 7);
		assert_false(seen[tag]);
		seen[tag] = true;
		assert_ptr_equal(td_tag_find(map, tag), rq_of(i));
	}
	assert_int_equal(td_tag_start(map, rq_of(8)), -EBUSY);

	/* Growing across words and up to the maximum: the first free tag from this CPU's home. */
	assert_int_equal(td_tag_resize(map, TD_TAG_DEPTH_MAX), 0);
	assert_int_equal(sched_getaffinity(0, sizeof(saved), &saved), 0);
	usable_cpus(cpus);
	assert_true(pin_to(cpus[0]));
	word = home_word(cpus[0], TD_TAG_DEPTH_MAX / WORD_BITS);
	int last = word ? (int)word * WORD_BITS : 8;

	assert_int_equal(td_tag_start(map, rq_of(9)), last);
	unpin(&saved);
	assert_int_equal(td_tag_busy(map), 9);
	for (int tag = 0; tag < 8; tag++)
		td_tag_end(map, tag);
	td_tag_end(map, last);
	assert_int_equal(td_tag_busy(map), 0);
	td_tag_map_destroy(map);
}

static void test_tag_resize_rejects_depth_out_of_range(void **state)
{
	struct td_tag_map *map = map_new(10);

	(void)state;
	assert_int_equal(td_tag_resize(map, 0), -EINVAL);
	assert_int_equal(td_tag_depth(map), 10);
	assert_int_equal(td_tag_resize(map, TD_TAG_DEPTH_MAX + 1), -EINVAL);
	assert_int_equal(td_tag_depth(map), 10);
	assert_int_equal(td_tag_resize(map, 1), 0);
	assert_int_equal(td_tag_depth(map), 1);
	assert_int_equal(td_tag_resize(map, TD_TAG_DEPTH_MAX), 0);
	assert_int_equal(td_tag_depth(map), TD_TAG_DEPTH_MAX);
	td_tag_map_destroy(map);
}

struct kick_rec {
	atomic_int calls;
};

static void count_kick(void *user)
{
	struct kick_rec *rec = user;

	atomic_fetch_add(&rec->calls, 1);
}

static void test_tag_map_detach_one_of_two_users_keeps_map_usable(void **state)
{
	struct td_tag_map *map = map_new(8);
	struct kick_rec q1 = {0};
	struct kick_rec q2 = {0};
	int tag;

	(void)state;
	assert_int_equal(td_tag_map_attach(map, count_kick, &q1), 0);
	assert_int_equal(td_tag_map_users(map), 1);
	assert_int_equal(td_tag_map_attach(map, count_kick, &q2), 0);
	assert_int_equal(td_tag_map_users(map), 2);

	tag = td_tag_start(map, rq_of(1));
	assert_in_range(tag, 0, 7);
	td_tag_map_detach(map, &q1);
	assert_int_equal(td_tag_map_users(map), 1);

	/* Still alive: the remaining user's tag, starts, ends and kicks work. */
	assert_ptr_equal(td_tag_find(map, tag), rq_of(1));
	assert_false(td_tag_end(map, tag));
	tag = td_tag_start(map, rq_of(2));
	assert_in_range(tag, 0, 7);
	assert_false(td_tag_end(map, tag));
	td_tag_map_kick(map);
	assert_int_equal(q1.calls, 0);
	assert_int_equal(q2.calls, 1);

	/* The last detach frees the map (the leak checkers hold us to it). */
	td_tag_map_detach(map, &q2);
}

static void test_tag_map_same_user_attached_twice_needs_two_detaches(void **state)
{
	struct td_tag_map *map = map_new(8);
	struct kick_rec q = {0};

	(void)state;
	assert_int_equal(td_tag_map_attach(map, count_kick, &q), 0);
	assert_int_equal(td_tag_map_attach(map, count_kick, &q), 0);
	td_tag_map_detach(map, &q);
	assert_int_equal(td_tag_map_users(map), 1);
	td_tag_map_kick(map);
	assert_int_equal(q.calls, 1);
	td_tag_map_detach(map, &q);
}

static void test_tag_map_destroy_frees_never_attached_map(void **state)
{
	struct td_tag_map *map = map_new(TD_TAG_DEPTH_MAX);
	int tag;

	(void)state;
	tag = td_tag_start(map, rq_of(0));

	assert_in_range(tag, 0, TD_TAG_DEPTH_MAX - 1);
	assert_false(td_tag_end(map, tag));
	td_tag_map_destroy(map);
}

#define MANY_USERS 20 /* more than one batch of kicks */

static void test_tag_map_kick_calls_each_user_once(void **state)
{
	struct td_tag_map *map = map_new(8);
	struct kick_rec recs[MANY_USERS];
	int silent;

	(void)state;
	for (int i = 0; i < MANY_USERS; i++) {
		atomic_init(&recs[i].calls, 0);
		assert_int_equal(td_tag_map_attach(map, count_kick, &recs[i]), 0);
	}
	/* A user without a kick function is skipped. */
	assert_int_equal(td_tag_map_attach(map, NULL, &silent), 0);
	assert_int_equal(td_tag_map_users(map), MANY_USERS + 1);

	td_tag_map_kick(map);
	for (int i = 0; i < MANY_USERS; i++)
		assert_int_equal(recs[i].calls, 1);
	td_tag_map_kick(map);
	for (int i = 0; i < MANY_USERS; i++)
		assert_int_equal(recs[i].calls, 2);

	/* A detached user is not kicked any more. */
	td_tag_map_detach(map, &recs[3]);
	td_tag_map_detach(map, &silent);
	td_tag_map_kick(map);
	for (int i = 0; i < MANY_USERS; i++)
		assert_int_equal(recs[i].calls, i == 3 ? 2 : 3);

	for (int i = 0; i < MANY_USERS; i++)
		if (i != 3)
			td_tag_map_detach(map, &recs[i]);
}

static void test_tag_end_after_starvation_then_kick_wakes_users(void **state)
{
	struct td_tag_map *map = map_new(1);
	struct kick_rec q1 = {0};
	struct kick_rec q2 = {0};

	(void)state;
	assert_int_equal(td_tag_map_attach(map, count_kick, &q1), 0);
	assert_int_equal(td_tag_map_attach(map, count_kick, &q2), 0);
	assert_int_equal(td_tag_start(map, rq_of(1)), 0);
	assert_int_equal(td_tag_start(map, rq_of(2)), -EBUSY);
	if (td_tag_end(map, 0))
		td_tag_map_kick(map);
	assert_int_equal(q1.calls, 1);
	assert_int_equal(q2.calls, 1);
	td_tag_map_detach(map, &q1);
	td_tag_map_detach(map, &q2);
}

struct reentrant_user {
	struct td_tag_map *map;
	int other;
	unsigned int users_seen;
	int attach_ret;
};

/* Attaching from a kick function would deadlock if kick held the user lock. */
static void reentrant_kick(void *user)
{
	struct reentrant_user *ru = user;

	ru->attach_ret = td_tag_map_attach(ru->map, NULL, &ru->other);
	ru->users_seen = td_tag_map_users(ru->map);
}

static void test_tag_map_kick_calls_kick_without_user_lock(void **state)
{
	struct reentrant_user ru = {.attach_ret = 1};

	(void)state;
	ru.map = map_new(4);
	assert_int_equal(td_tag_map_attach(ru.map, reentrant_kick, &ru), 0);
	td_tag_map_kick(ru.map); /* a deadlock here is ended by the watchdog in main() */
	assert_int_equal(ru.attach_ret, 0);
	assert_int_equal(ru.users_seen, 2);
	assert_int_equal(td_tag_map_users(ru.map), 2);
	td_tag_map_detach(ru.map, &ru.other);
	td_tag_map_detach(ru.map, &ru);
}

struct blocking_user {
	atomic_bool entered;
	atomic_bool release;
	atomic_int returned;
};

static void blocking_kick(void *user)
{
	struct blocking_user *bu = user;

	atomic_store(&bu->entered, true);
	while (!atomic_load(&bu->release))
		sleep_ms(1);
	atomic_fetch_add(&bu->returned, 1);
}

struct detach_args {
	struct td_tag_map *map;
	void *user;
	atomic_bool done;
};

static void *kick_thread(void *arg)
{
	td_tag_map_kick(arg);
	return NULL;
}

static void *detach_thread(void *arg)
{
	struct detach_args *da = arg;

	td_tag_map_detach(da->map, da->user);
	atomic_store(&da->done, true);
	return NULL;
}

static void test_tag_map_detach_waits_for_running_kick(void **state)
{
	struct td_tag_map *map = map_new(4);
	struct blocking_user bu;
	struct kick_rec other = {0};
	struct detach_args da = {.map = map, .user = &bu};
	pthread_t kicker;
	pthread_t detacher;

	(void)state;
	atomic_init(&bu.entered, false);
	atomic_init(&bu.release, false);
	atomic_init(&bu.returned, 0);
	atomic_init(&da.done, false);
	assert_int_equal(td_tag_map_attach(map, blocking_kick, &bu), 0);
	assert_int_equal(td_tag_map_attach(map, count_kick, &other), 0);

	assert_int_equal(pthread_create(&kicker, NULL, kick_thread, map), 0);
	while (!atomic_load(&bu.entered))
		sleep_ms(1);
	assert_int_equal(pthread_create(&detacher, NULL, detach_thread, &da), 0);
	sleep_ms(100);
	assert_false(atomic_load(&da.done));
	assert_int_equal(atomic_load(&bu.returned), 0);

	atomic_store(&bu.release, true);
	assert_int_equal(pthread_join(detacher, NULL), 0);
	assert_true(atomic_load(&da.done));
	assert_int_equal(atomic_load(&bu.returned), 1);
	assert_int_equal(pthread_join(kicker, NULL), 0);
	assert_int_equal(other.calls, 1);
	assert_int_equal(td_tag_map_users(map), 1);

	/* Kicked no more once detached. */
	td_tag_map_kick(map);
	assert_int_equal(atomic_load(&bu.returned), 1);
	assert_int_equal(other.calls, 2);
	td_tag_map_detach(map, &other);
}

/* Run @fn(@arg) in a child and expect it to die of SIGABRT (a failed assert). */
static void expect_abort(void (*fn)(void *), void *arg)
{
	struct rlimit no_core = {0, 0};
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		setrlimit(RLIMIT_CORE, &no_core);
		if (devnull >= 0)
			dup2(devnull, STDERR_FILENO);
		fn(arg);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
}

static void end_free_tag(void *arg)
{
	struct td_tag_map *map = td_tag_map_create(8);

	(void)arg;
	if (map)
		td_tag_end(map, 3);
}

static void end_tag_twice(void *arg)
{
	struct td_tag_map *map = td_tag_map_create(8);

	(void)arg;
	if (!map)
		return;
	int tag = td_tag_start(map, rq_of(0));

	td_tag_end(map, tag);
	td_tag_end(map, tag);
}

static void end_tag_number(void *arg)
{
	struct td_tag_map *map = td_tag_map_create(8);

	if (map)
		td_tag_end(map, *(int *)arg);
}

static void test_tag_end_of_free_tag_aborts(void **state)
{
	(void)state;
	expect_abort(end_free_tag, NULL);
	expect_abort(end_tag_twice, NULL);
}

static void test_tag_end_of_out_of_range_tag_aborts(void **state)
{
	int max = TD_TAG_DEPTH_MAX;
	int negative = -1;

	(void)state;
	expect_abort(end_tag_number, &max);
	expect_abort(end_tag_number, &negative);
}

static void detach_stranger(void *arg)
{
	struct td_tag_map *map = td_tag_map_create(8);
	int user;

	(void)arg;
	if (map && td_tag_map_attach(map, NULL, &user) == 0)
		td_tag_map_detach(map, arg);
}

static void destroy_attached(void *arg)
{
	struct td_tag_map *map = td_tag_map_create(8);

	if (map && td_tag_map_attach(map, NULL, arg) == 0)
		td_tag_map_destroy(map);
}

static void test_tag_map_misuse_of_users_aborts(void **state)
{
	int stranger;

	(void)state;
	expect_abort(detach_stranger, &stranger);
	expect_abort(destroy_attached, &stranger);
}

/* ---- homes: where a CPU's scans start (the design in src/engine/tag.c) ------------------- */

static void test_tag_start_scans_from_home_word(void **state)
{
	struct td_tag_map *map = map_new(1024);
	unsigned int nr_words = 1024 / WORD_BITS;
	int cpus[8];
	cpu_set_t saved;
	int word;
	int next;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(saved), &saved), 0);
	usable_cpus(cpus);
	assert_true(pin_to(cpus[0]));
	word = (int)home_word(cpus[0], nr_words);
	/* The home word is empty, so its lowest bit comes first, then the rest in order. */
	for (int i = 0; i < WORD_BITS; i++)
		assert_int_equal(td_tag_start(map, rq_of(i)), word * WORD_BITS + i);

	/* Word full: the scan moves on to the next word, wrapping. */
	next = (int)(((unsigned int)word + 1) % nr_words) * WORD_BITS;
	assert_int_equal(td_tag_start(map, rq_of(64)), next);
	/* The home stays: a tag freed there is the next one handed out. */
	assert_false(td_tag_end(map, word * WORD_BITS + 5));
	assert_int_equal(td_tag_start(map, rq_of(65)), word * WORD_BITS + 5);
	assert_int_equal(td_tag_start(map, rq_of(66)), next + 1);
	assert_int_equal(td_tag_busy(map), 66);
	unpin(&saved);
	end_busy_and_destroy(map, 1024);
}

/* ---- td_tag_start_at(): a cursor for one go of starts --------------------------------- */

/*
 * A spread map of depth 32 has four words of 8 tags. A cursor at word 2
 * takes 16..23 in order and stays there; the next start moves it to word
 * 3, and past the last word the scan wraps to word 0.
 */
static void test_tag_start_at_resumes_at_cursor_word_and_moves_it(void **state)
{
	struct td_tag_map *map = td_tag_map_create_spread(32);
	unsigned int cursor = 2;

	(void)state;
	assert_non_null(map);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(td_tag_start_at(map, rq_of(i), &cursor), 16 + i);
		assert_int_equal(cursor, 2);
	}
	for (int i = 0; i < 8; i++)
		assert_int_equal(td_tag_start_at(map, rq_of(8 + i), &cursor), 24 + i);
	assert_int_equal(cursor, 3);
	assert_int_equal(td_tag_start_at(map, rq_of(16), &cursor), 0);
	assert_int_equal(cursor, 0);
	assert_ptr_equal(td_tag_find(map, 0), rq_of(16));
	assert_int_equal(td_tag_busy(map), 17);
	end_busy_and_destroy(map, 32);
}

/*
 * The cursor only says where to look first: a tag freed behind it is still
 * found, and -EBUSY comes only when every word is full. That failure marks
 * the map starved (the next end reports it) and leaves the cursor alone.
 */
static void test_tag_start_at_finds_tag_behind_cursor_then_ebusy(void **state)
{
	struct td_tag_map *map = td_tag_map_create_spread(32);
	unsigned int cursor = 0;

	(void)state;
	assert_non_null(map);
	for (int i = 0; i < 32; i++)
		assert_int_equal(td_tag_start_at(map, rq_of(i), &cursor), i);
	assert_int_equal(cursor, 3);
	assert_false(td_tag_end(map, 5));
	assert_int_equal(td_tag_start_at(map, rq_of(40), &cursor), 5);
	assert_int_equal(cursor, 0);
	cursor = 2;
	assert_int_equal(td_tag_start_at(map, rq_of(41), &cursor), -EBUSY);
	assert_int_equal(cursor, 2);
	assert_true(td_tag_end(map, 30));
	assert_int_equal(td_tag_start_at(map, rq_of(42), &cursor), 30);
	assert_int_equal(cursor, 3);
	for (int tag = 0; tag < 32; tag++)
		td_tag_end(map, tag);
	assert_int_equal(td_tag_busy(map), 0);
	td_tag_map_destroy(map);
}

/*
 * TD_TAG_CURSOR_HOME, or a cursor past the words of the current depth (the
 * map shrank since), starts at the home word of the caller's CPU, as
 * td_tag_start() does.
 */
static void test_tag_start_at_cursor_home_or_past_depth_starts_at_home(void **state)
{
	struct td_tag_map *map = map_new(1024);
	unsigned int nr_words = 1024 / WORD_BITS;
	unsigned int cursor = TD_TAG_CURSOR_HOME;
	int cpus[8];
	cpu_set_t saved;
	int word;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(saved), &saved), 0);
	usable_cpus(cpus);
	assert_true(pin_to(cpus[0]));
	word = (int)home_word(cpus[0], nr_words);
	assert_int_equal(td_tag_start_at(map, rq_of(0), &cursor), word * WORD_BITS);
	assert_int_equal(cursor, (unsigned int)word);
	assert_false(td_tag_end(map, word * WORD_BITS));

	/* Shrink to 2 words: a cursor at word 15 is past them, so the scan starts at home. */
	assert_int_equal(td_tag_resize(map, 2 * WORD_BITS), 0);
	word = (int)home_word(cpus[0], 2);
	cursor = 15;
	assert_int_equal(td_tag_start_at(map, rq_of(1), &cursor), word * WORD_BITS);
	assert_int_equal(cursor, (unsigned int)word);
	unpin(&saved);
	assert_false(td_tag_end(map, word * WORD_BITS));
	assert_int_equal(td_tag_busy(map), 0);
	td_tag_map_destroy(map);
}

struct first_tag_args {
	struct td_tag_map *map;
	int cpu;
	bool pinned;
	int tag;
};

static void *first_tag_thread(void *arg)
{
	struct first_tag_args *fa = arg;

	fa->pinned = pin_to(fa->cpu);
	fa->tag = td_tag_start(fa->map, rq_of(1));
	return NULL;
}

/*
 * On each usable CPU (up to 8), a new thread pinned there starts a tag on
 * @map, which is empty, and ends it: it gets the first tag of its CPU's
 * home word, exactly. CPUs 0 and 1 (the two of a 2-CPU machine) are half
 * the map apart.
 */
static void check_homes_of_cpus(struct td_tag_map *map, unsigned int word_bits,
				unsigned int nr_words)
{
	int cpus[8];
	unsigned int n = usable_cpus(cpus);
	pthread_t t;

	for (unsigned int i = 0; i < n; i++) {
		struct first_tag_args fa = { .map = map, .cpu = cpus[i] };

		assert_int_equal(pthread_create(&t, NULL, first_tag_thread, &fa), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		assert_true(fa.pinned);
		assert_int_equal(fa.tag, (int)(home_word(cpus[i], nr_words) * word_bits));
		assert_false(td_tag_end(map, fa.tag));
	}
	assert_int_equal(home_word(1, nr_words), nr_words / 2);
	assert_int_equal(td_tag_busy(map), 0);
}

static void test_tag_first_tags_on_each_cpu_start_at_its_home(void **state)
{
	struct td_tag_map *map = map_new(1024);

	(void)state;
	check_homes_of_cpus(map, WORD_BITS, 1024 / WORD_BITS);
	td_tag_map_destroy(map);
}

/* ---- spread maps (mq tag sets) ---------------------------------------------------------- */

struct spread_case {
	const char *name;
	unsigned int depth;
	unsigned int word_bits; /* what sbitmap's shift gives for this depth */
};

static const struct spread_case spread_cases[] = {
	{ "test_tag_spread_depth_1_uses_8_bit_words", 1, 8 },
	{ "test_tag_spread_depth_32_uses_8_bit_words", 32, 8 },
	{ "test_tag_spread_depth_64_uses_16_bit_words", 64, 16 },
	{ "test_tag_spread_depth_100_uses_16_bit_words", 100, 16 },
	{ "test_tag_spread_depth_128_uses_32_bit_words", 128, 32 },
	{ "test_tag_spread_depth_256_uses_64_bit_words", 256, 64 },
	{ "test_tag_spread_depth_max_uses_64_bit_words", TD_TAG_DEPTH_MAX, 64 },
};

/*
 * A spread map hands out [0, depth) once each, like any map; the words are
 * word_bits wide, and each CPU's first tag is at its home. A resize
 * to the maximum keeps the word size and hands out every tag.
 */
static void run_spread_case(void **state)
{
	const struct spread_case *c = *state;
	static bool seen[TD_TAG_DEPTH_MAX];
	struct td_tag_map *map = td_tag_map_create_spread(c->depth);
	unsigned int nr_words = TD_DIV_ROUND_UP(c->depth, c->word_bits);

	assert_non_null(map);
	assert_int_equal(td_tag_depth(map), c->depth);
	if (nr_words > 1)
		check_homes_of_cpus(map, c->word_bits, nr_words);
	memset(seen, 0, sizeof(seen));
	for (unsigned int i = 0; i < c->depth; i++) {
		int tag = td_tag_start(map, rq_of((int)i));

		assert_in_range(tag, 0, c->depth - 1);
		assert_false(seen[tag]);
		seen[tag] = true;
		assert_ptr_equal(td_tag_find(map, tag), rq_of((int)i));
	}
	assert_int_equal(td_tag_busy(map), c->depth);
	assert_int_equal(td_tag_start(map, rq_of(0)), -EBUSY);
	assert_int_equal(td_tag_resize(map, TD_TAG_DEPTH_MAX), 0);
	for (unsigned int i = c->depth; i < TD_TAG_DEPTH_MAX; i++) {
		int tag = td_tag_start(map, rq_of((int)i));

		assert_in_range(tag, c->depth, TD_TAG_DEPTH_MAX - 1);
		assert_false(seen[tag]);
		seen[tag] = true;
	}
	assert_int_equal(td_tag_start(map, rq_of(0)), -EBUSY);
	assert_int_equal(td_tag_busy(map), TD_TAG_DEPTH_MAX);
	for (int tag = 0; tag < TD_TAG_DEPTH_MAX; tag++)
		td_tag_end(map, tag);
	assert_int_equal(td_tag_busy(map), 0);
	td_tag_map_destroy(map);
}

/*
 * Threaded stress. owner[tag] counts the threads that believe they hold the
 * tag: start must take it from 0 to 1 and end from 1 to 0.
 */
#define STRESS_THREADS	4
#define STRESS_HOLD_MAX 8

static atomic_int owner[TD_TAG_DEPTH_MAX];

struct stress {
	struct td_tag_map *map;
	unsigned int depth;
	unsigned int cycles;
	unsigned int hold_max;
	atomic_uint violations;
	atomic_uint ebusy;
	atomic_uint reported; /* ends that returned true */
};

struct stress_thread {
	struct stress *s;
	uint64_t rng;
	uintptr_t id; /* thread number, in the high bits of its requests */
	uintptr_t nr_started;
	int held[STRESS_HOLD_MAX];
	void *held_rq[STRESS_HOLD_MAX]; /* the request started with held[i] */
	unsigned int nr_held;
};

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void stress_end_one(struct stress_thread *st, unsigned int i)
{
	struct stress *s = st->s;
	int tag = st->held[i];

	if (td_tag_find(s->map, tag) != st->held_rq[i])
		atomic_fetch_add(&s->violations, 1);
	if (atomic_fetch_sub(&owner[tag], 1) != 1)
		atomic_fetch_add(&s->violations, 1);
	if (td_tag_end(s->map, tag)) {
		atomic_fetch_add(&s->reported, 1);
		td_tag_map_kick(s->map);
	}
	st->nr_held--;
	st->held[i] = st->held[st->nr_held];
	st->held_rq[i] = st->held_rq[st->nr_held];
}

static void stress_end_random(struct stress_thread *st)
{
	stress_end_one(st, (unsigned int)(xorshift(&st->rng) % st->nr_held));
}

static void *stress_thread(void *arg)
{
	struct stress_thread *st = arg;
	struct stress *s = st->s;

	for (unsigned int c = 0; c < s->cycles; c++) {
		/* A fake request, never dereferenced, unique to this start. */
		void *rq = (void *)((st->id << 32) | ++st->nr_started);
		int tag;

		if (st->nr_held == s->hold_max)
			stress_end_random(st);
		tag = td_tag_start(s->map, rq);
		if (tag == -EBUSY) {
			atomic_fetch_add(&s->ebusy, 1);
			if (st->nr_held)
				stress_end_random(st);
			else
				sched_yield();
			continue;
		}
		if (tag < 0 || (unsigned int)tag >= s->depth) {
			atomic_fetch_add(&s->violations, 1);
			continue;
		}
		if (atomic_fetch_add(&owner[tag], 1) != 0)
			atomic_fetch_add(&s->violations, 1);
		st->held[st->nr_held] = tag;
		st->held_rq[st->nr_held] = rq;
		st->nr_held++;
		if (xorshift(&st->rng) & 1)
			stress_end_random(st);
	}
	while (st->nr_held)
		stress_end_one(st, st->nr_held - 1);
	return NULL;
}

static void run_stress(struct stress *s, struct kick_rec *kicks)
{
	struct stress_thread st[STRESS_THREADS];
	pthread_t th[STRESS_THREADS];

	for (unsigned int t = 0; t < TD_TAG_DEPTH_MAX; t++)
		atomic_store(&owner[t], 0);
	atomic_init(&s->violations, 0);
	atomic_init(&s->ebusy, 0);
	atomic_init(&s->reported, 0);
	s->map = map_new(s->depth);
	assert_int_equal(td_tag_map_attach(s->map, count_kick, kicks), 0);

	for (int i = 0; i < STRESS_THREADS; i++) {
		memset(&st[i], 0, sizeof(st[i]));
		st[i].s = s;
		st[i].id = (uintptr_t)i + 1;
		st[i].rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
		assert_int_equal(pthread_create(&th[i], NULL, stress_thread, &st[i]), 0);
	}
	for (int i = 0; i < STRESS_THREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);

	assert_int_equal(atomic_load(&s->violations), 0);
	assert_int_equal(td_tag_busy(s->map), 0);
	for (unsigned int t = 0; t < TD_TAG_DEPTH_MAX; t++) {
		assert_int_equal(atomic_load(&owner[t]), 0);
		assert_null(td_tag_find(s->map, (int)t));
	}
}

static void test_tag_concurrent_start_end_never_hands_out_a_tag_twice(void **state)
{
	struct stress s = {.depth = 64, .cycles = 200000, .hold_max = STRESS_HOLD_MAX};
	struct kick_rec kicks = {0};

	(void)state;
	run_stress(&s, &kicks);
	/* At most 4 * 8 of 64 tags are ever held, so no start may fail. */
	assert_int_equal(atomic_load(&s.ebusy), 0);
	assert_int_equal(atomic_load(&s.reported), 0);
	assert_int_equal(kicks.calls, 0);
	td_tag_map_detach(s.map, &kicks);
}

static void test_tag_concurrent_starvation_is_always_reported(void **state)
{
	/* A thread holding the whole map still tries another start, and starves. */
	struct stress s = {.depth = 4, .cycles = 50000, .hold_max = 5};
	struct kick_rec kicks = {0};
	unsigned int reported;
	int tag;

	(void)state;
	run_stress(&s, &kicks);
	reported = atomic_load(&s.reported);
	assert_true(atomic_load(&s.ebusy) > 0);
	assert_in_range(reported, 1, atomic_load(&s.ebusy));
	/* Kick passes that overlap may share a call, never skip one: 1..reported calls. */
	assert_in_range(kicks.calls, 1, reported);

	/*
	 * Every failed start was followed by an end that reported it, so nothing
	 * is left pending: a fresh start and end reports no starvation.
	 */
	tag = td_tag_start(s.map, rq_of(0));
	assert_in_range(tag, 0, 3);
	assert_false(td_tag_end(s.map, tag));
	td_tag_map_detach(s.map, &kicks);
}

/*
 * Lost wakeup: B's start fails just as A ends the only tag. Either B's start
 * must then succeed, or A's end must report the starvation so A kicks B.
 * Rounds: A holds the tag; B starts (expecting to fail); A ends it after a
 * random short spin, sometimes inside B's start, and kicks if told to; then
 * A waits until B has had the tag. B, having failed, waits for a kick. A
 * kick that never comes is the bug: B gives up after a long timeout.
 */
#define RACE_ROUNDS	50000
#define RACE_TIMEOUT_MS 10000

struct race {
	struct td_tag_map *map;
	atomic_uint round_ready;  /* A holds the tag for this round */
	atomic_uint round_trying; /* B is starting in this round */
	atomic_uint round_done;	  /* B has had the tag in this round */
	atomic_uint kicks;
	atomic_bool lost;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Busy-wait politely: spin, and yield every @every spins. Spinning keeps the
 * two threads in step on separate CPUs; yielding keeps a run where the threads
 * share one CPU (valgrind runs one thread at a time) from crawling.
 */
static void relax(unsigned int *spins, unsigned int every)
{
	if (++*spins % every == 0)
		sched_yield();
}

static void race_kick(void *user)
{
	struct race *r = user;

	atomic_fetch_add(&r->kicks, 1);
}

static void *race_ender(void *arg)
{
	struct race *r = arg;
	uint64_t rng = 0x2545f4914f6cdd1dULL;

	for (unsigned int round = 1; round <= RACE_ROUNDS && !atomic_load(&r->lost); round++) {
		unsigned int spins = 0;
		int tag;

		/* B ended the previous round's tag, so this start succeeds at once. */
		tag = td_tag_start(r->map, rq_of(1));
		if (tag != 0) {
			atomic_store(&r->lost, true);
			break;
		}
		atomic_store(&r->round_ready, round);
		while (atomic_load(&r->round_trying) != round)
			relax(&spins, 1024);
		for (volatile unsigned int spin = xorshift(&rng) % 256; spin; spin--)
			;
		if (td_tag_end(r->map, tag))
			td_tag_map_kick(r->map);
		while (atomic_load(&r->round_done) != round && !atomic_load(&r->lost))
			relax(&spins, 16);
	}
	return NULL;
}

static void *race_starter(void *arg)
{
	struct race *r = arg;

	for (unsigned int round = 1; round <= RACE_ROUNDS; round++) {
		unsigned int spins = 0;
		unsigned int kicks;
		int tag;

		while (atomic_load(&r->round_ready) != round) {
			if (atomic_load(&r->lost))
				return NULL;
			relax(&spins, 16);
		}
		for (;;) {
			uint64_t deadline;

			kicks = atomic_load(&r->kicks);
			atomic_store(&r->round_trying, round);
			tag = td_tag_start(r->map, rq_of(2));
			if (tag >= 0)
				break;
			deadline = now_ms() + RACE_TIMEOUT_MS;
			while (atomic_load(&r->kicks) == kicks) {
				if (now_ms() > deadline) {
					atomic_store(&r->lost, true);
					return NULL;
				}
				relax(&spins, 16);
			}
		}
		if (td_tag_end(r->map, tag))
			td_tag_map_kick(r->map);
		atomic_store(&r->round_done, round);
	}
	return NULL;
}

static void test_tag_end_racing_a_failing_start_never_loses_the_kick(void **state)
{
	struct race r = {0};
	pthread_t a;
	pthread_t b;

	(void)state;
	r.map = map_new(1);
	assert_int_equal(td_tag_map_attach(r.map, race_kick, &r), 0);
	assert_int_equal(pthread_create(&a, NULL, race_ender, &r), 0);
	assert_int_equal(pthread_create(&b, NULL, race_starter, &r), 0);
	assert_int_equal(pthread_join(a, NULL), 0);
	assert_int_equal(pthread_join(b, NULL), 0);
	assert_false(atomic_load(&r.lost));
	assert_int_equal(td_tag_busy(r.map), 0);
	td_tag_map_detach(r.map, &r);
}

/* Generous for valgrind; a deadlock must fail the run, not hang it. */
#define WATCHDOG_S 300

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tag_map_create_rejects_depth_out_of_range),
	    cmocka_unit_test(test_tag_map_create_has_depth_and_no_users),
	    cmocka_unit_test(test_tag_start_returns_each_tag_once_then_ebusy),
	    cmocka_unit_test(test_tag_start_depth_one_has_only_tag_zero),
	    cmocka_unit_test(test_tag_start_depth_max_hands_out_every_tag),
	    cmocka_unit_test(test_tag_end_frees_tag_that_start_returns_again),
	    cmocka_unit_test(test_tag_find_returns_request_of_busy_tag_only),
	    cmocka_unit_test(test_tag_end_returns_false_without_failed_start),
	    cmocka_unit_test(test_tag_end_reports_starvation_exactly_once),
	    cmocka_unit_test(test_tag_resize_shrink_keeps_busy_tags_above_depth),
	    cmocka_unit_test(test_tag_resize_shrink_within_a_word_masks_upper_bits),
	    cmocka_unit_test(test_tag_resize_grow_makes_more_tags_available),
	    cmocka_unit_test(test_tag_resize_rejects_depth_out_of_range),
	    cmocka_unit_test(test_tag_map_detach_one_of_two_users_keeps_map_usable),
	    cmocka_unit_test(test_tag_map_same_user_attached_twice_needs_two_detaches),
	    cmocka_unit_test(test_tag_map_destroy_frees_never_attached_map),
	    cmocka_unit_test(test_tag_map_kick_calls_each_user_once),
	    cmocka_unit_test(test_tag_end_after_starvation_then_kick_wakes_users),
	    cmocka_unit_test(test_tag_map_kick_calls_kick_without_user_lock),
	    cmocka_unit_test(test_tag_map_detach_waits_for_running_kick),
	    cmocka_unit_test(test_tag_end_of_free_tag_aborts),
	    cmocka_unit_test(test_tag_end_of_out_of_range_tag_aborts),
	    cmocka_unit_test(test_tag_map_misuse_of_users_aborts),
	    cmocka_unit_test(test_tag_start_scans_from_home_word),
	    cmocka_unit_test(test_tag_first_tags_on_each_cpu_start_at_its_home),
	    cmocka_unit_test(test_tag_start_at_resumes_at_cursor_word_and_moves_it),
	    cmocka_unit_test(test_tag_start_at_finds_tag_behind_cursor_then_ebusy),
	    cmocka_unit_test(test_tag_start_at_cursor_home_or_past_depth_starts_at_home),
	    cmocka_unit_test(test_tag_concurrent_start_end_never_hands_out_a_tag_twice),
	    cmocka_unit_test(test_tag_concurrent_starvation_is_always_reported),
	    cmocka_unit_test(test_tag_end_racing_a_failing_start_never_loses_the_kick),
	};

	struct CMUnitTest all[TD_ARRAY_SIZE(tests) + TD_ARRAY_SIZE(spread_cases)];
	size_t n = 0;

	for (size_t i = 0; i < TD_ARRAY_SIZE(tests); i++)
		all[n++] = tests[i];
	for (size_t i = 0; i < TD_ARRAY_SIZE(spread_cases); i++)
		all[n++] = (struct CMUnitTest){ .name = spread_cases[i].name,
						.test_func = run_spread_case,
						.initial_state = (void *)&spread_cases[i] };
	alarm(WATCHDOG_S);
	return _cmocka_run_group_tests("test_tag", all, n, NULL, NULL);
}
