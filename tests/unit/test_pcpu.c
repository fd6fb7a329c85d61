// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_pcpu.c - unit tests for the per-CPU counters (src/common/pcpu.h).
 *
 * The property the queue's drain relies on: td_pcpu_pending() never says 0
 * while something started and has not ended, even while other threads
 * start and end on other CPUs' shards all through the sum. The churning
 * threads are pinned to alternate CPUs between a start and its end, so the
 * end lands in a different shard from its start whenever the machine has
 * two CPUs or more.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>
#include "common/pcpu.h"

#define CHURN_THREADS 2
#define CHURN_ROUNDS  5000

struct churn {
	struct td_pcpu_counter *started;
	struct td_pcpu_counter *ended;
	unsigned int first_cpu;
	uint64_t moved; /* starts whose end ran on another CPU */
};

static void pin(unsigned int cpu)
{
	cpu_set_t set;
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	CPU_ZERO(&set);
	CPU_SET(cpu % (unsigned int)(n > 0 ? n : 1), &set);
	/* A CPU set the sandbox refuses only means no move; the sums stay the test. */
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *churn_main(void *arg)
{
	struct churn *c = arg;

	for (unsigned int i = 0; i < CHURN_ROUNDS; i++) {
		pin(c->first_cpu + i);
		int before = sched_getcpu();

		td_pcpu_add(c->started, 1);
		pin(c->first_cpu + i + 1);
		if (sched_getcpu() != before)
			c->moved++;
		td_pcpu_add(c->ended, 1);
	}
	return NULL;
}

static void test_pcpu_sum_counts_every_add(void **state)
{
	struct td_pcpu_counter c;

	(void)state;
	td_pcpu_init(&c);
	assert_int_equal(td_pcpu_sum(&c), 0);
	td_pcpu_add(&c, 5);
	td_pcpu_add(&c, 7);
	assert_int_equal(td_pcpu_sum(&c), 12);
	/* Adds on other shards count the same. */
	atomic_fetch_add(&c.shard[TD_PCPU_SHARDS - 1].v, 30);
	assert_int_equal(td_pcpu_sum(&c), 42);
	assert_true(td_pcpu_index() < TD_PCPU_SHARDS);
}

static void test_pcpu_pending_is_zero_only_when_all_ended(void **state)
{
	struct td_pcpu_counter started, ended;
	struct churn churn[CHURN_THREADS];
	pthread_t tid[CHURN_THREADS];
	uint64_t looks = 0, moved = 0;

	(void)state;
	td_pcpu_init(&started);
	td_pcpu_init(&ended);
	assert_int_equal(td_pcpu_pending(&started, &ended), 0);

	/* One held start, never ended during the churn. */
	td_pcpu_add(&started, 1);
	for (unsigned int i = 0; i < CHURN_THREADS; i++) {
		churn[i] = (struct churn){ &started, &ended, i, 0 };
		assert_int_equal(pthread_create(&tid[i], NULL, churn_main, &churn[i]), 0);
	}
	for (unsigned int i = 0; i < CHURN_THREADS; i++) {
		/* Look while they run: pending must count the held one every time. */
		while (pthread_tryjoin_np(tid[i], NULL) != 0) {
			uint64_t p = td_pcpu_pending(&started, &ended);

			assert_true(p >= 1);
			looks++;
			/*
			 * Let the churners run: under valgrind, which runs one
			 * thread at a time, a looker that never yields can keep
			 * them from running for minutes.
			 */
			sched_yield();
		}
		moved += churn[i].moved;
	}
	assert_true(looks > 0);
	assert_int_equal(td_pcpu_sum(&started), 1 + CHURN_THREADS * (uint64_t)CHURN_ROUNDS);
	assert_int_equal(td_pcpu_sum(&ended), CHURN_THREADS * (uint64_t)CHURN_ROUNDS);
	assert_int_equal(td_pcpu_pending(&started, &ended), 1);
	td_pcpu_add(&ended, 1);
	assert_int_equal(td_pcpu_pending(&started, &ended), 0);
	/* With two CPUs, ends really landed on other shards than their starts. */
	if (sysconf(_SC_NPROCESSORS_ONLN) >= 2 && TD_PCPU_SHARDS >= 2)
		print_message("%llu of %u ends ran on another CPU than their start; %llu looks\n",
			      (unsigned long long)moved, CHURN_THREADS * CHURN_ROUNDS,
			      (unsigned long long)looks);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pcpu_sum_counts_every_add),
		cmocka_unit_test(test_pcpu_pending_is_zero_only_when_all_ended),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
