// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_bufpool.c - the front end's buffer pool: page-aligned buffers of the
 * right class, and after any burst no more free buffers than the reserve,
 * the rest unmapped (issue 11: a burst of 1 MiB I/O used to leave hundreds of
 * MiB locked in the pool).
 *
 * Whether a buffer's memory went back to the kernel is seen from outside:
 * mincore(2) fails with ENOMEM on an address range that is no longer mapped.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>
#include "daemon/bufpool.h"
#include "unit_util.h"

#define KIB	  ((size_t)1 << 10)
#define MIB	  ((size_t)1 << 20)
#define RECV_SIZE (MIB + 4 * KIB) /* libfuse's receive buffer, as the front end sizes it */

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

/* Return: true while the first page at @addr is mapped. */
static bool is_mapped(void *addr)
{
	unsigned char vec;

	if (mincore(addr, page_size(), &vec) == 0)
		return true;
	assert_int_equal(errno, ENOMEM);
	return false;
}

static struct td_bufpool *make_pool(void)
{
	struct td_bufpool *pool = td_bufpool_create(RECV_SIZE);

	assert_non_null(pool);
	return pool;
}

static void test_create_rejects_sizes_out_of_range(void **state)
{
	(void)state;
	errno = 0;
	assert_null(td_bufpool_create(4095));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(td_bufpool_create(((size_t)64 << 20) + 1));
	assert_int_equal(errno, EINVAL);
}

/* Asked size -> the class's size and how many free buffers that class keeps. */
static const struct {
	size_t size;
	size_t cap;
	unsigned int keep;
} class_cases[] = {
	{ 0, 4 * KIB, 256 },	    { 1, 4 * KIB, 256 },	 { 4 * KIB, 4 * KIB, 256 },
	{ 4 * KIB + 1, 8 * KIB, 128 }, { 64 * KIB, 64 * KIB, 16 }, { 100 * KIB, 128 * KIB, 8 },
	{ 256 * KIB, 256 * KIB, 8 }, { 512 * KIB, 512 * KIB, 8 }, { MIB - 1, MIB, 8 },
	{ MIB, MIB, 8 },	    { MIB + 1, RECV_SIZE, 8 },	 { RECV_SIZE, RECV_SIZE, 8 },
};

static void test_buffers_are_page_aligned_and_of_their_class_per_table(void **state)
{
	struct td_bufpool *pool = make_pool();

	(void)state;
	for (size_t i = 0; i < TD_ARRAY_SIZE(class_cases); i++) {
		struct td_buf *b = td_bufpool_get(pool, class_cases[i].size);

		assert_non_null(b);
		assert_int_equal((uintptr_t)b->mem % page_size(), 0);
		assert_int_equal(b->cap, class_cases[i].cap);
		assert_int_equal(td_bufpool_keep(pool, class_cases[i].size), class_cases[i].keep);
		memset(b->mem, 0xa5, b->cap); /* every byte is ours */
		td_bufpool_put(pool, b);
	}
	td_bufpool_destroy(pool);
}

static void test_sizes_above_the_largest_class_get_nothing(void **state)
{
	struct td_bufpool *pool = make_pool();
	struct td_bufpool_stats st;

	(void)state;
	assert_null(td_bufpool_get(pool, RECV_SIZE + 1));
	assert_int_equal(td_bufpool_keep(pool, RECV_SIZE + 1), 0);
	td_bufpool_stats(pool, &st);
	assert_int_equal(st.nr_out, 0);
	td_bufpool_destroy(pool);
}

static void test_reserve_bound_is_28_mib_and_32_kib_for_the_front_ends_classes(void **state)
{
	struct td_bufpool *pool = make_pool();

	(void)state;
	/* 4 KiB .. 128 KiB: 1 MiB each; 256K, 512K, 1M: 8 each; 8 receive buffers. */
	assert_int_equal(td_bufpool_reserve_bytes(pool), 28 * MIB + 32 * KIB);
	td_bufpool_destroy(pool);
}

static void test_a_returned_buffer_is_reused_without_a_new_mapping(void **state)
{
	struct td_bufpool *pool = make_pool();
	struct td_buf *a, *b;
	void *mem;

	(void)state;
	a = td_bufpool_get(pool, MIB);
	assert_non_null(a);
	mem = a->mem;
	td_bufpool_put(pool, a);
	assert_int_equal(td_bufpool_nr_free(pool, MIB), 1);
	b = td_bufpool_get(pool, MIB);
	assert_ptr_equal(b->mem, mem);
	assert_int_equal(td_bufpool_nr_free(pool, MIB), 0);
	td_bufpool_put(pool, b);
	td_bufpool_destroy(pool);
}

/*
 * @n buffers of @size out at once, written, then all returned: the class keeps
 * exactly @keep of them, and exactly the others are unmapped.
 */
static void burst_then_return(size_t size, unsigned int n, unsigned int keep)
{
	struct td_bufpool *pool = make_pool();
	struct td_buf **bufs = (struct td_buf **)xmalloc(n * sizeof(*bufs));
	void **mems = (void **)xmalloc(n * sizeof(*mems));
	struct td_bufpool_stats st;
	unsigned int mapped = 0;
	size_t cap = 0;

	for (unsigned int i = 0; i < n; i++) {
		bufs[i] = td_bufpool_get(pool, size);
		assert_non_null(bufs[i]);
		mems[i] = bufs[i]->mem;
		cap = bufs[i]->cap;
		memset(bufs[i]->mem, (int)i, cap);
	}
	td_bufpool_stats(pool, &st);
	assert_int_equal(st.nr_out, n);
	assert_int_equal(st.out_bytes, n * cap);
	assert_int_equal(st.nr_free, 0);
	for (unsigned int i = 0; i < n; i++)
		td_bufpool_put(pool, bufs[i]);
	td_bufpool_stats(pool, &st);
	assert_int_equal(st.nr_out, 0);
	assert_int_equal(st.out_bytes, 0);
	assert_int_equal(st.nr_free, keep);
	assert_int_equal(st.free_bytes, keep * cap);
	assert_int_equal(td_bufpool_nr_free(pool, size), keep);
	for (unsigned int i = 0; i < n; i++)
		mapped += is_mapped(mems[i]);
	assert_int_equal(mapped, keep);
	td_bufpool_destroy(pool);
	free(mems);
	free(bufs);
}

/* A receive buffer is wholly resident before the kernel copies into it, and stays so. */
static void test_make_resident_faults_in_every_page_once(void **state)
{
	struct td_bufpool *pool = make_pool();
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct td_buf *b;
	void *mem;

	(void)state;
	b = td_bufpool_get(pool, MIB);
	assert_non_null(b);
	assert_false(b->resident);
	assert_int_equal(resident_pages(b->mem, b->cap), 0); /* a fresh mapping */
	assert_int_equal(td_buf_make_resident(b), 0);
	assert_true(b->resident);
	assert_int_equal(resident_pages(b->mem, b->cap), b->cap / page);
	/* Kept by the pool, it comes back with its pages and its flag. */
	mem = b->mem;
	td_bufpool_put(pool, b);
	b = td_bufpool_get(pool, MIB);
	assert_ptr_equal(b->mem, mem);
	assert_true(b->resident);
	assert_int_equal(resident_pages(b->mem, b->cap), b->cap / page);
	assert_int_equal(td_buf_make_resident(b), 0);
	td_bufpool_put(pool, b);
	td_bufpool_destroy(pool);
}

static void test_burst_of_256_1mib_buffers_leaves_8_mapped(void **state)
{
	(void)state;
	burst_then_return(MIB, 256, 8);
}

static void test_burst_of_256_receive_buffers_leaves_8_mapped(void **state)
{
	(void)state;
	burst_then_return(RECV_SIZE, 256, 8);
}

static void test_burst_of_300_4k_buffers_leaves_256_mapped(void **state)
{
	(void)state;
	burst_then_return(4 * KIB, 300, 256);
}

static void test_burst_smaller_than_the_reserve_keeps_every_buffer(void **state)
{
	(void)state;
	burst_then_return(MIB, 5, 5);
}

/* ---- concurrent bursts ---------------------------------------------------------------- */

#define BURST_THREADS	  8
#define BURST_PER_THREAD  16
#define BURST_ROUNDS	  3

struct burster {
	struct td_bufpool *pool;
	pthread_barrier_t *all_out; /* every buffer of every thread is out */
	pthread_barrier_t *go_back;
	unsigned int idx;
	bool misaligned;
};

static void *burster_main(void *arg)
{
	struct burster *w = arg;
	struct td_buf *bufs[BURST_PER_THREAD];

	for (unsigned int r = 0; r < BURST_ROUNDS; r++) {
		for (unsigned int i = 0; i < BURST_PER_THREAD; i++) {
			/* Half 1 MiB data buffers, half receive buffers, like a 1 MiB read/write mix. */
			bufs[i] = td_bufpool_get(w->pool, (i + w->idx) % 2 ? MIB : RECV_SIZE);
			if (!bufs[i] || (uintptr_t)bufs[i]->mem % page_size())
				w->misaligned = true;
			if (bufs[i])
				memset(bufs[i]->mem, (int)i, bufs[i]->cap);
		}
		pthread_barrier_wait(w->all_out);
		pthread_barrier_wait(w->go_back);
		for (unsigned int i = 0; i < BURST_PER_THREAD; i++)
			td_bufpool_put(w->pool, bufs[i]);
	}
	return NULL;
}

static void test_concurrent_large_bursts_leave_exactly_the_reserve(void **state)
{
	struct td_bufpool *pool = make_pool();
	struct burster w[BURST_THREADS];
	pthread_t tids[BURST_THREADS];
	pthread_barrier_t all_out, go_back;
	struct td_bufpool_stats st;
	const unsigned int n = BURST_THREADS * BURST_PER_THREAD;

	(void)state;
	pthread_barrier_init(&all_out, NULL, BURST_THREADS + 1);
	pthread_barrier_init(&go_back, NULL, BURST_THREADS + 1);
	for (unsigned int t = 0; t < BURST_THREADS; t++) {
		w[t] = (struct burster){ .pool = pool, .all_out = &all_out, .go_back = &go_back,
					 .idx = t };
		assert_int_equal(pthread_create(&tids[t], NULL, burster_main, &w[t]), 0);
	}
	for (unsigned int r = 0; r < BURST_ROUNDS; r++) {
		pthread_barrier_wait(&all_out);
		td_bufpool_stats(pool, &st);
		assert_int_equal(st.nr_out, n);
		assert_int_equal(st.out_bytes, n / 2 * (MIB + RECV_SIZE));
		/* The reserve the last round left was handed out first. */
		assert_int_equal(st.nr_free, 0);
		pthread_barrier_wait(&go_back);
	}
	for (unsigned int t = 0; t < BURST_THREADS; t++) {
		assert_int_equal(pthread_join(tids[t], NULL), 0);
		assert_false(w[t].misaligned);
	}
	td_bufpool_stats(pool, &st);
	assert_int_equal(st.nr_out, 0);
	assert_int_equal(td_bufpool_nr_free(pool, MIB), 8);
	assert_int_equal(td_bufpool_nr_free(pool, RECV_SIZE), 8);
	assert_int_equal(st.nr_free, 16);
	assert_int_equal(st.free_bytes, 8 * (MIB + RECV_SIZE));
	assert_true(st.free_bytes <= td_bufpool_reserve_bytes(pool));
	pthread_barrier_destroy(&all_out);
	pthread_barrier_destroy(&go_back);
	td_bufpool_destroy(pool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_rejects_sizes_out_of_range),
		cmocka_unit_test(test_buffers_are_page_aligned_and_of_their_class_per_table),
		cmocka_unit_test(test_sizes_above_the_largest_class_get_nothing),
		cmocka_unit_test(test_reserve_bound_is_28_mib_and_32_kib_for_the_front_ends_classes),
		cmocka_unit_test(test_a_returned_buffer_is_reused_without_a_new_mapping),
		cmocka_unit_test(test_make_resident_faults_in_every_page_once),
		cmocka_unit_test(test_burst_of_256_1mib_buffers_leaves_8_mapped),
		cmocka_unit_test(test_burst_of_256_receive_buffers_leaves_8_mapped),
		cmocka_unit_test(test_burst_of_300_4k_buffers_leaves_256_mapped),
		cmocka_unit_test(test_burst_smaller_than_the_reserve_keeps_every_buffer),
		cmocka_unit_test(test_concurrent_large_bursts_leave_exactly_the_reserve),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
