// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_stats.c - counters, histogram buckets, percentiles and busy-time integrals.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "common/clock.h"
#include "tagdisk/stats.h"

struct stats_fixture {
	struct td_stats *st;
	struct td_stats_snapshot *snap;
};

static int stats_setup(void **state)
{
	struct stats_fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->st = td_stats_create();
	assert_non_null(f->st);
	f->snap = calloc(1, sizeof(*f->snap));
	assert_non_null(f->snap);
	*state = f;
	return 0;
}

static int stats_teardown(void **state)
{
	struct stats_fixture *f = *state;

	td_stats_destroy(f->st);
	free(f->snap);
	free(f);
	return 0;
}

static uint64_t hist_total(const uint64_t hist[TD_STATS_BUCKETS])
{
	uint64_t total = 0;

	for (unsigned int i = 0; i < TD_STATS_BUCKETS; i++)
		total += hist[i];
	return total;
}

/* Largest distance from a value to its bucket's midpoint that stats.c promises. */
static uint64_t bucket_error_bound(uint64_t v)
{
	return v / (2 * TD_STATS_SUB);
}

static uint64_t abs_diff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

static void test_stats_new_object_snapshots_all_zero(void **state)
{
	struct stats_fixture *f = *state;
	struct td_stats_snapshot *zero = calloc(1, sizeof(*zero));

	assert_non_null(zero);
	memset(f->snap, 0xa5, sizeof(*f->snap));
	td_stats_snapshot(f->st, f->snap, 12345);
	assert_memory_equal(f->snap, zero, sizeof(*zero));
	free(zero);
}

static void test_stats_io_done_counts_ios_sectors_and_latency_per_op(void **state)
{
	struct stats_fixture *f = *state;
	struct td_stats_snapshot *s = f->snap;

	for (int i = 0; i < 6; i++)
		td_stats_io_start(f->st, 0);
	td_stats_io_done(f->st, TD_OP_READ, 8, 100, 0, 1);
	td_stats_io_done(f->st, TD_OP_READ, 16, 200, 0, 2);
	td_stats_io_done(f->st, TD_OP_READ, 24, 300, 0, 3);
	td_stats_io_done(f->st, TD_OP_WRITE, 64, 1000, 0, 4);
	td_stats_io_done(f->st, TD_OP_FLUSH, 0, 5000, 0, 5);
	td_stats_io_done(f->st, TD_OP_DISCARD, 2048, 7, 0, 6);
	td_stats_snapshot(f->st, s, 6);

	assert_int_equal(s->ios[TD_OP_READ], 3);
	assert_int_equal(s->ios[TD_OP_WRITE], 1);
	assert_int_equal(s->ios[TD_OP_FLUSH], 1);
	assert_int_equal(s->ios[TD_OP_DISCARD], 1);
	assert_int_equal(s->ios[TD_OP_WRITE_ZEROES], 0);

	assert_int_equal(s->sectors[TD_OP_READ], 48);
	assert_int_equal(s->sectors[TD_OP_WRITE], 64);
	assert_int_equal(s->sectors[TD_OP_FLUSH], 0);
	assert_int_equal(s->sectors[TD_OP_DISCARD], 2048);
	assert_int_equal(s->sectors[TD_OP_WRITE_ZEROES], 0);

	assert_int_equal(s->ticks_ns[TD_OP_READ], 600);
	assert_int_equal(s->ticks_ns[TD_OP_WRITE], 1000);
	assert_int_equal(s->ticks_ns[TD_OP_FLUSH], 5000);
	assert_int_equal(s->ticks_ns[TD_OP_DISCARD], 7);
	assert_int_equal(s->ticks_ns[TD_OP_WRITE_ZEROES], 0);

	assert_int_equal(s->max_ns[TD_OP_READ], 300);
	assert_int_equal(s->max_ns[TD_OP_WRITE], 1000);
	assert_int_equal(s->max_ns[TD_OP_FLUSH], 5000);
	assert_int_equal(s->max_ns[TD_OP_WRITE_ZEROES], 0);

	/* Each latency sits in its own op's histogram, in its own bucket. */
	assert_int_equal(hist_total(s->hist[TD_OP_READ]), 3);
	assert_int_equal(s->hist[TD_OP_READ][td_stats_bucket(100)], 1);
	assert_int_equal(s->hist[TD_OP_READ][td_stats_bucket(200)], 1);
	assert_int_equal(s->hist[TD_OP_READ][td_stats_bucket(300)], 1);
	assert_int_equal(hist_total(s->hist[TD_OP_WRITE]), 1);
	assert_int_equal(s->hist[TD_OP_WRITE][td_stats_bucket(1000)], 1);
	assert_int_equal(hist_total(s->hist[TD_OP_FLUSH]), 1);
	assert_int_equal(s->hist[TD_OP_FLUSH][td_stats_bucket(5000)], 1);
	assert_int_equal(s->hist[TD_OP_DISCARD][7], 1);
	assert_int_equal(hist_total(s->hist[TD_OP_WRITE_ZEROES]), 0);

	for (int op = 0; op < TD_OP_COUNT; op++) {
		assert_int_equal(s->errors[op], 0);
		assert_int_equal(s->front_merges[op], 0);
		assert_int_equal(s->back_merges[op], 0);
	}
	for (int c = 0; c < TD_STAT_NR_COUNTERS; c++)
		assert_int_equal(s->counters[c], 0);
	assert_int_equal(s->in_flight, 0);
}

static void test_stats_errors_counted_per_op_and_still_counted_as_ios(void **state)
{
	struct stats_fixture *f = *state;
	struct td_stats_snapshot *s = f->snap;

	for (int i = 0; i < 5; i++)
		td_stats_io_start(f->st, 0);
	td_stats_io_done(f->st, TD_OP_READ, 8, 10, -EIO, 1);
	td_stats_io_done(f->st, TD_OP_WRITE, 8, 10, 0, 2);
	td_stats_io_done(f->st, TD_OP_WRITE, 8, 10, -ENOSPC, 3);
	td_stats_io_done(f->st, TD_OP_WRITE, 8, 10, -EIO, 4);
	td_stats_io_done(f->st, TD_OP_FLUSH, 0, 10, 0, 5);
	td_stats_snapshot(f->st, s, 5);

	assert_int_equal(s->errors[TD_OP_READ], 1);
	assert_int_equal(s->errors[TD_OP_WRITE], 2);
	assert_int_equal(s->errors[TD_OP_FLUSH], 0);
	assert_int_equal(s->errors[TD_OP_DISCARD], 0);
	assert_int_equal(s->errors[TD_OP_WRITE_ZEROES], 0);
	assert_int_equal(s->ios[TD_OP_READ], 1);
	assert_int_equal(s->ios[TD_OP_WRITE], 3);
	assert_int_equal(s->sectors[TD_OP_WRITE], 24);
}

static void test_stats_merges_counted_front_and_back_per_op(void **state)
{
	struct stats_fixture *f = *state;
	struct td_stats_snapshot *s = f->snap;

	td_stats_merge(f->st, TD_OP_READ, true);
	td_stats_merge(f->st, TD_OP_READ, false);
	td_stats_merge(f->st, TD_OP_READ, false);
	td_stats_merge(f->st, TD_OP_WRITE, true);
	td_stats_merge(f->st, TD_OP_WRITE, true);
	td_stats_merge(f->st, TD_OP_WRITE, true);
	td_stats_merge(f->st, TD_OP_DISCARD, false);
	td_stats_snapshot(f->st, s, 0);

	assert_int_equal(s->front_merges[TD_OP_READ], 1);
	assert_int_equal(s->back_merges[TD_OP_READ], 2);
	assert_int_equal(s->front_merges[TD_OP_WRITE], 3);
	assert_int_equal(s->back_merges[TD_OP_WRITE], 0);
	assert_int_equal(s->front_merges[TD_OP_DISCARD], 0);
	assert_int_equal(s->back_merges[TD_OP_DISCARD], 1);
	assert_int_equal(s->front_merges[TD_OP_FLUSH], 0);
	assert_int_equal(s->back_merges[TD_OP_FLUSH], 0);
	/* Merges are not completions. */
	assert_int_equal(s->ios[TD_OP_READ], 0);
	assert_int_equal(s->ios[TD_OP_WRITE], 0);
}

static void test_stats_named_counters_accumulate_separately(void **state)
{
	struct stats_fixture *f = *state;
	struct td_stats_snapshot *s = f->snap;

	td_stats_add(f->st, TD_STAT_DEFERRED, 1);
	td_stats_add(f->st, TD_STAT_DEFERRED, 2);
	td_stats_add(f->st, TD_STAT_KILLED, 5);
	td_stats_add(f->st, TD_STAT_REQUEUED, 7);
	td_stats_add(f->st, TD_STAT_RESETS, 1);
	td_stats_add(f->st, TD_STAT_TIMEOUTS, 0);
	td_stats_add(f->st, TD_STAT_RETRIES_EXHAUSTED, 11);
	td_stats_snapshot(f->st, s, 0);

	assert_int_equal(s->counters[TD_STAT_DEFERRED], 3);
	assert_int_equal(s->counters[TD_STAT_KILLED], 5);
	assert_int_equal(s->counters[TD_STAT_REQUEUED], 7);
	assert_int_equal(s->counters[TD_STAT_RESETS], 1);
	assert_int_equal(s->counters[TD_STAT_TIMEOUTS], 0);
	assert_int_equal(s->counters[TD_STAT_RETRIES_EXHAUSTED], 11);
}

static void test_stats_counter_names_are_fixed_and_unknown_is_null(void **state)
{
	(void)state;
	assert_string_equal(td_stats_counter_name(TD_STAT_DEFERRED), "deferred");
	assert_string_equal(td_stats_counter_name(TD_STAT_KILLED), "killed");
	assert_string_equal(td_stats_counter_name(TD_STAT_REQUEUED), "requeued");
	assert_string_equal(td_stats_counter_name(TD_STAT_RESETS), "resets");
	assert_string_equal(td_stats_counter_name(TD_STAT_TIMEOUTS), "timeouts");
	assert_string_equal(td_stats_counter_name(TD_STAT_RETRIES_EXHAUSTED),
			    "retries_exhausted");
	assert_null(td_stats_counter_name(TD_STAT_NR_COUNTERS));
	assert_null(td_stats_counter_name((enum td_stats_counter)1000));
}

static void test_stats_bucket_exact_below_sub(void **state)
{
	(void)state;
	for (uint64_t v = 0; v < TD_STATS_SUB; v++) {
		assert_int_equal(td_stats_bucket(v), v);
		assert_int_equal(td_stats_bucket_value((unsigned int)v), v);
	}
}

static void test_stats_bucket_known_answers(void **state)
{
	(void)state;
	/* [8, 16): width 1, still exact. */
	assert_int_equal(td_stats_bucket(8), 8);
	assert_int_equal(td_stats_bucket(15), 15);
	assert_int_equal(td_stats_bucket_value(15), 15);
	/* [16, 32): width 2. */
	assert_int_equal(td_stats_bucket(16), 16);
	assert_int_equal(td_stats_bucket(17), 16);
	assert_int_equal(td_stats_bucket(18), 17);
	assert_int_equal(td_stats_bucket(31), 23);
	assert_int_equal(td_stats_bucket_value(16), 17);
	/* 100 = 0b1100100: e = 6, group 4, next three bits 100 -> bucket 36 = [96, 104). */
	assert_int_equal(td_stats_bucket(100), 36);
	assert_int_equal(td_stats_bucket(96), 36);
	assert_int_equal(td_stats_bucket(103), 36);
	assert_int_equal(td_stats_bucket(104), 37);
	assert_int_equal(td_stats_bucket_value(36), 100);
}

static void test_stats_bucket_monotonic_and_within_bound_over_sweep(void **state)
{
	unsigned int prev = 0;

	(void)state;
	/* Every value up to 2^20, then every power of two and its neighbours. */
	for (uint64_t v = 0; v < (1U << 20); v++) {
		unsigned int b = td_stats_bucket(v);

		assert_true(b >= prev);
		assert_true(b < TD_STATS_BUCKETS);
		assert_true(abs_diff(td_stats_bucket_value(b), v) <= bucket_error_bound(v));
		prev = b;
	}
	for (unsigned int e = 20; e < 64; e++) {
		uint64_t p = 1ULL << e;
		uint64_t vals[] = { p - 1, p, p + 1, p + p / 3, p + p / 2, p | (p - 1) };

		for (size_t i = 0; i < TD_ARRAY_SIZE(vals); i++) {
			unsigned int b = td_stats_bucket(vals[i]);

			assert_true(b >= prev);
			assert_true(b < TD_STATS_BUCKETS);
			assert_true(abs_diff(td_stats_bucket_value(b), vals[i]) <=
				    bucket_error_bound(vals[i]));
			prev = b;
		}
	}
}

static void test_stats_bucket_covers_uint64_max_without_overflow(void **state)
{
	unsigned int top = td_stats_bucket(UINT64_MAX);
	uint64_t mid = td_stats_bucket_value(top);

	(void)state;
	assert_int_equal(top, (64 - TD_STATS_SUB_BITS) * TD_STATS_SUB + TD_STATS_SUB - 1);
	assert_true(top < TD_STATS_BUCKETS);
	/* The top bucket is [15 << 60, 2^64): its midpoint must not have wrapped. */
	assert_true(mid >= (15ULL << 60));
	assert_true(UINT64_MAX - mid <= bucket_error_bound(UINT64_MAX));
	/* Unreachable buckets report the top one rather than garbage. */
	assert_int_equal(td_stats_bucket_value(TD_STATS_BUCKETS - 1), mid);
}

static void test_stats_bucket_value_round_trips_every_reachable_bucket(void **state)
{
	unsigned int top = td_stats_bucket(UINT64_MAX);

	(void)state;
	for (unsigned int b = 0; b <= top; b++)
		assert_int_equal(td_stats_bucket(td_stats_bucket_value(b)), b);
	for (unsigned int b = 1; b <= top; b++)
		assert_true(td_stats_bucket_value(b) > td_stats_bucket_value(b - 1));
}

static void test_stats_percentile_of_1_to_1000_us_within_bound(void **state)
{
	uint64_t hist[TD_STATS_BUCKETS] = { 0 };
	uint64_t p50, p99;

	(void)state;
	for (uint64_t us = 1; us <= 1000; us++)
		hist[td_stats_bucket(us * TD_NSEC_PER_USEC)]++;

	p50 = td_stats_percentile(hist, 0.50);
	p99 = td_stats_percentile(hist, 0.99);
	/* 500000 ns lies in [491520, 524288) (width 2^15): midpoint 507904. */
	assert_int_equal(p50, 507904);
	assert_true(abs_diff(p50, 500000) <= bucket_error_bound(500000));
	/* 990000 ns lies in [983040, 1048576) (width 2^16): midpoint 1015808. */
	assert_int_equal(p99, 1015808);
	assert_true(abs_diff(p99, 990000) <= bucket_error_bound(990000));

	assert_int_equal(td_stats_percentile(hist, 0.0),
			 td_stats_bucket_value(td_stats_bucket(1000)));
	assert_int_equal(td_stats_percentile(hist, 1.0),
			 td_stats_bucket_value(td_stats_bucket(1000000)));
}

/*
 * One flush of 1007 us: its bucket's midpoint is 1015.8 us, and a sample just
 * above a midpoint read below it, so the mean could exceed the p99.9 (the
 * stats reply once showed that). With the largest sample known every
 * percentile of one sample is that sample.
 */
static void test_stats_percentile_max_of_one_sample_is_the_sample(void **state)
{
	static const uint64_t samples_ns[] = { 1007000, 1020000, 1000, 123456789 };

	(void)state;
	for (size_t i = 0; i < TD_ARRAY_SIZE(samples_ns); i++) {
		uint64_t hist[TD_STATS_BUCKETS] = { 0 };
		uint64_t v = samples_ns[i];

		hist[td_stats_bucket(v)] = 1;
		/* The bucket's value alone is not the sample ... */
		assert_int_not_equal(td_stats_percentile(hist, 0.999), v);
		/* ... the maximum makes every percentile exact. */
		assert_int_equal(td_stats_percentile_max(hist, 0.5, v), v);
		assert_int_equal(td_stats_percentile_max(hist, 0.999, v), v);
		assert_int_equal(td_stats_percentile_max(hist, 1.0, v), v);
	}
}

/* Below the highest bucket in use the buckets answer; from it on, the maximum. */
static void test_stats_percentile_max_reads_the_top_bucket_as_the_maximum(void **state)
{
	struct stats_fixture *f = *state;
	struct td_stats_snapshot *s = f->snap;
	const uint64_t *h = s->hist[TD_OP_READ];

	/* 1..1000 us, then one of 5000.5 us. */
	for (uint64_t us = 1; us <= 1000; us++)
		td_stats_io_account(f->st, TD_OP_READ, 8, us * TD_NSEC_PER_USEC, 0);
	td_stats_io_account(f->st, TD_OP_READ, 8, 5000500, 0);
	td_stats_snapshot(f->st, s, 0);
	assert_int_equal(s->max_ns[TD_OP_READ], 5000500);
	assert_int_equal(td_stats_percentile_max(h, 0.50, s->max_ns[TD_OP_READ]),
			 td_stats_percentile(h, 0.50));
	assert_int_equal(td_stats_percentile_max(h, 0.99, s->max_ns[TD_OP_READ]),
			 td_stats_percentile(h, 0.99));
	assert_int_equal(td_stats_percentile_max(h, 1.0, s->max_ns[TD_OP_READ]), 5000500);
	/* Never above the largest sample, and still ordered. */
	assert_true(td_stats_percentile_max(h, 0.999, s->max_ns[TD_OP_READ]) <= 5000500);
	assert_true(td_stats_percentile_max(h, 0.999, s->max_ns[TD_OP_READ]) >=
		    td_stats_percentile_max(h, 0.99, s->max_ns[TD_OP_READ]));
	/* A maximum from elsewhere (not in the top bucket) changes nothing. */
	assert_int_equal(td_stats_percentile_max(h, 1.0, 7), td_stats_percentile(h, 1.0));
	/* Empty: 0. */
	assert_int_equal(td_stats_percentile_max(s->hist[TD_OP_FLUSH], 0.5, 0), 0);
}

static void test_stats_percentile_exact_for_small_values(void **state)
{
	uint64_t hist[TD_STATS_BUCKETS] = { 0 };

	(void)state;
	/* Samples 1, 3, 3, 6 (ns). */
	hist[td_stats_bucket(1)] += 1;
	hist[td_stats_bucket(3)] += 2;
	hist[td_stats_bucket(6)] += 1;

	assert_int_equal(td_stats_percentile(hist, 0.0), 1);
	assert_int_equal(td_stats_percentile(hist, 0.25), 1);
	assert_int_equal(td_stats_percentile(hist, 0.26), 3);
	assert_int_equal(td_stats_percentile(hist, 0.50), 3);
	assert_int_equal(td_stats_percentile(hist, 0.75), 3);
	assert_int_equal(td_stats_percentile(hist, 0.76), 6);
	assert_int_equal(td_stats_percentile(hist, 1.0), 6);
}

static void test_stats_percentile_rank_not_bumped_by_binary_rounding(void **state)
{
	uint64_t hist[TD_STATS_BUCKETS] = { 0 };

	(void)state;
	/* One sample in each of buckets 0..99; in binary, 0.07 * 100 is a hair above 7. */
	for (unsigned int b = 0; b < 100; b++)
		hist[b] = 1;
	assert_true(0.07 * 100.0 > 7.0);
	assert_int_equal(td_stats_percentile(hist, 0.07), td_stats_bucket_value(6));
	assert_int_equal(td_stats_percentile(hist, 0.071), td_stats_bucket_value(7));
	assert_int_equal(td_stats_percentile(hist, 0.5), td_stats_bucket_value(49));
}

static void test_stats_percentile_clamps_fraction(void **state)
{
	uint64_t hist[TD_STATS_BUCKETS] = { 0 };

	(void)state;
	hist[td_stats_bucket(2)] = 10;
	hist[td_stats_bucket(5000)] = 10;

	assert_int_equal(td_stats_percentile(hist, -1.0), 2);
	assert_int_equal(td_stats_percentile(hist, NAN), 2);
	assert_int_equal(td_stats_percentile(hist, 2.0),
			 td_stats_bucket_value(td_stats_bucket(5000)));
	assert_int_equal(td_stats_percentile(hist, INFINITY),
			 td_stats_bucket_value(td_stats_bucket(5000)));
}

static void test_stats_percentile_of_empty_histogram_is_zero(void **state)
{
	uint64_t hist[TD_STATS_BUCKETS] = { 0 };

	(void)state;
	assert_int_equal(td_stats_percentile(hist, 0.0), 0);
	assert_int_equal(td_stats_percentile(hist, 0.5), 0);
	assert_int_equal(td_stats_percentile(hist, 1.0), 0);
}

static void test_stats_percentile_reads_snapshot_histogram(void **state)
{
	struct stats_fixture *f = *state;

	for (int i = 0; i < 4; i++)
		td_stats_io_start(f->st, 0);
	td_stats_io_done(f->st, TD_OP_WRITE, 8, 4, 0, 1);
	td_stats_io_done(f->st, TD_OP_WRITE, 8, 5, 0, 1);
	td_stats_io_done(f->st, TD_OP_WRITE, 8, 6, 0, 1);
	td_stats_io_done(f->st, TD_OP_READ, 8, 7, 0, 1);
	td_stats_snapshot(f->st, f->snap, 1);

	assert_int_equal(td_stats_percentile(f->snap->hist[TD_OP_WRITE], 0.5), 5);
	assert_int_equal(td_stats_percentile(f->snap->hist[TD_OP_WRITE], 0.99), 6);
	assert_int_equal(td_stats_percentile(f->snap->hist[TD_OP_READ], 0.5), 7);
	assert_int_equal(td_stats_percentile(f->snap->hist[TD_OP_FLUSH], 0.5), 0);
}

static void test_stats_busy_integrals_with_overlapping_requests(void **state)
{
	struct stats_fixture *f = *state;
	struct td_stats_snapshot *s = f->snap;

	td_stats_io_start(f->st, 0);
	td_stats_io_start(f->st, 10);
	td_stats_io_done(f->st, TD_OP_READ, 8, 30, 0, 30);
	td_stats_io_done(f->st, TD_OP_READ, 8, 30, 0, 40);
	td_stats_snapshot(f->st, s, 40);

	assert_int_equal(s->in_flight, 0);
	assert_int_equal(s->io_ticks_ns, 40);
	/* 10 ns with one in flight, 20 with two, 10 with one. */
	assert_int_equal(s->time_in_queue_ns, 10 * 1 + 20 * 2 + 10 * 1);

	/* Idle time afterwards adds nothing. */
	td_stats_snapshot(f->st, s, 1000);
	assert_int_equal(s->io_ticks_ns, 40);
	assert_int_equal(s->time_in_queue_ns, 60);
}

static void test_stats_io_cancel_leaves_flight_without_counting_an_io(void **state)
{
	struct stats_fixture *f = *state;
	struct td_stats_snapshot *s = f->snap;

	td_stats_io_start(f->st, 0);
	td_stats_io_start(f->st, 10);
	/* The second request is merged into the first at t=20. */
	td_stats_io_cancel(f->st, 20);
	td_stats_snapshot(f->st, s, 20);
	assert_int_equal(s->in_flight, 1);
	td_stats_io_done(f->st, TD_OP_WRITE, 16, 50, 0, 50);
	td_stats_snapshot(f->st, s, 50);

	assert_int_equal(s->in_flight, 0);
	assert_int_equal(s->io_ticks_ns, 50);
	assert_int_equal(s->time_in_queue_ns, 10 * 1 + 10 * 2 + 30 * 1);
	for (int op = 0; op < TD_OP_COUNT; op++)
		assert_int_equal(s->ios[op], op == TD_OP_WRITE ? 1 : 0);
	assert_int_equal(s->sectors[TD_OP_WRITE], 16);
	assert_int_equal(hist_total(s->hist[TD_OP_WRITE]), 1);
}

static void test_stats_busy_idle_gaps_not_counted(void **state)
{
	struct stats_fixture *f = *state;
	struct td_stats_snapshot *s = f->snap;

	td_stats_io_start(f->st, 100);
	td_stats_io_done(f->st, TD_OP_WRITE, 8, 10, 0, 110);
	/* idle from 110 to 500 */
	td_stats_io_start(f->st, 500);
	td_stats_io_start(f->st, 500);
	td_stats_io_done(f->st, TD_OP_WRITE, 8, 25, 0, 525);
	td_stats_io_done(f->st, TD_OP_WRITE, 8, 30, 0, 530);
	td_stats_snapshot(f->st, s, 2000);

	assert_int_equal(s->in_flight, 0);
	assert_int_equal(s->io_ticks_ns, 10 + 30);
	assert_int_equal(s->time_in_queue_ns, 10 + 25 * 2 + 5);
}

static void test_stats_snapshot_closes_open_interval_without_changing_state(void **state)
{
	struct stats_fixture *f = *state;
	struct td_stats_snapshot *s = f->snap;

	td_stats_io_start(f->st, 0);
	td_stats_io_start(f->st, 0);
	td_stats_snapshot(f->st, s, 25);
	assert_int_equal(s->in_flight, 2);
	assert_int_equal(s->io_ticks_ns, 25);
	assert_int_equal(s->time_in_queue_ns, 50);

	/* An earlier timestamp shows what was closed, never a negative interval. */
	td_stats_snapshot(f->st, s, 0);
	assert_int_equal(s->in_flight, 2);
	assert_int_equal(s->io_ticks_ns, 0);
	assert_int_equal(s->time_in_queue_ns, 0);

	td_stats_io_done(f->st, TD_OP_READ, 8, 30, 0, 30);
	td_stats_io_done(f->st, TD_OP_READ, 8, 30, 0, 30);
	td_stats_snapshot(f->st, s, 30);
	assert_int_equal(s->in_flight, 0);
	assert_int_equal(s->io_ticks_ns, 30);
	assert_int_equal(s->time_in_queue_ns, 60);
}

static void test_stats_busy_out_of_order_timestamps_do_not_underflow(void **state)
{
	struct stats_fixture *f = *state;
	struct td_stats_snapshot *s = f->snap;

	/* Two racing submitters reach the lock in the opposite order of their clocks. */
	td_stats_io_start(f->st, 100);
	td_stats_io_start(f->st, 90);
	td_stats_io_done(f->st, TD_OP_READ, 8, 20, 0, 120);
	td_stats_io_done(f->st, TD_OP_READ, 8, 5, 0, 115);
	td_stats_snapshot(f->st, s, 200);

	assert_int_equal(s->in_flight, 0);
	/* Only [100, 120) is counted: 20 ns busy, with two in flight. */
	assert_int_equal(s->io_ticks_ns, 20);
	assert_int_equal(s->time_in_queue_ns, 40);
}

#define MT_THREADS 4
#define MT_ITERS   100000

struct mt_worker {
	pthread_t thread;
	struct td_stats *st;
};

static uint64_t mt_latency(int i)
{
	return (uint64_t)(i % 1000) + 1;
}

static void *mt_worker_main(void *arg)
{
	struct mt_worker *w = arg;

	for (int i = 0; i < MT_ITERS; i++) {
		enum td_op op = i % 2 ? TD_OP_WRITE : TD_OP_READ;

		td_stats_io_start(w->st, td_now_ns());
		td_stats_io_done(w->st, op, 8, mt_latency(i), i % 10 == 0 ? -EIO : 0, td_now_ns());
		if (i % 4 == 0)
			td_stats_merge(w->st, op, i % 8 == 0);
		td_stats_add(w->st, TD_STAT_DEFERRED, 1);
	}
	return NULL;
}

static void test_stats_threads_totals_exact(void **state)
{
	struct stats_fixture *f = *state;
	struct td_stats_snapshot *s = f->snap;
	struct mt_worker workers[MT_THREADS];
	uint64_t ticks[TD_OP_COUNT] = { 0 };
	uint64_t prev_ios = 0;
	uint64_t start_ns, end_ns;
	int snapshots = 0;

	start_ns = td_now_ns();
	for (int t = 0; t < MT_THREADS; t++) {
		workers[t].st = f->st;
		assert_int_equal(pthread_create(&workers[t].thread, NULL, mt_worker_main,
						&workers[t]),
				 0);
	}
	/* Snapshots taken while the workers run never go backwards. */
	do {
		td_stats_snapshot(f->st, s, td_now_ns());
		uint64_t ios = s->ios[TD_OP_READ] + s->ios[TD_OP_WRITE];

		assert_true(ios >= prev_ios);
		assert_true(s->in_flight <= MT_THREADS);
		prev_ios = ios;
		snapshots++;
	} while (prev_ios < (uint64_t)MT_THREADS * MT_ITERS && snapshots < 100000);
	for (int t = 0; t < MT_THREADS; t++)
		assert_int_equal(pthread_join(workers[t].thread, NULL), 0);
	end_ns = td_now_ns();

	for (int i = 0; i < MT_ITERS; i++)
		ticks[i % 2 ? TD_OP_WRITE : TD_OP_READ] += MT_THREADS * mt_latency(i);

	td_stats_snapshot(f->st, s, end_ns);
	assert_int_equal(s->ios[TD_OP_READ], MT_THREADS * MT_ITERS / 2);
	assert_int_equal(s->ios[TD_OP_WRITE], MT_THREADS * MT_ITERS / 2);
	assert_int_equal(s->sectors[TD_OP_READ], 8ULL * MT_THREADS * MT_ITERS / 2);
	assert_int_equal(s->sectors[TD_OP_WRITE], 8ULL * MT_THREADS * MT_ITERS / 2);
	/* i % 10 == 0 only for even i: reads. */
	assert_int_equal(s->errors[TD_OP_READ], MT_THREADS * MT_ITERS / 10);
	assert_int_equal(s->errors[TD_OP_WRITE], 0);
	assert_int_equal(s->ticks_ns[TD_OP_READ], ticks[TD_OP_READ]);
	assert_int_equal(s->ticks_ns[TD_OP_WRITE], ticks[TD_OP_WRITE]);
	assert_int_equal(hist_total(s->hist[TD_OP_READ]), MT_THREADS * MT_ITERS / 2);
	assert_int_equal(hist_total(s->hist[TD_OP_WRITE]), MT_THREADS * MT_ITERS / 2);
	/* i % 4 == 0 is even (reads); of those, i % 8 == 0 are front merges. */
	assert_int_equal(s->front_merges[TD_OP_READ], MT_THREADS * MT_ITERS / 8);
	assert_int_equal(s->back_merges[TD_OP_READ], MT_THREADS * MT_ITERS / 8);
	assert_int_equal(s->front_merges[TD_OP_WRITE], 0);
	assert_int_equal(s->back_merges[TD_OP_WRITE], 0);
	assert_int_equal(s->counters[TD_STAT_DEFERRED], MT_THREADS * MT_ITERS);
	assert_int_equal(s->in_flight, 0);
	assert_true(s->io_ticks_ns <= end_ns - start_ns);
	assert_true(s->time_in_queue_ns <= MT_THREADS * (end_ns - start_ns));
	assert_true(s->time_in_queue_ns >= s->io_ticks_ns);
}

/* More threads than shards: several threads must add to the same shard. */
#define SHARED_THREADS (2 * TD_STATS_SHARDS + 1)
#define SHARED_ITERS   20000

static void *shared_worker_main(void *arg)
{
	struct td_stats *st = arg;

	for (int i = 0; i < SHARED_ITERS; i++) {
		td_stats_io_start(st, 0);
		td_stats_io_done(st, TD_OP_WRITE, 1, 3, 0, 0);
		td_stats_add(st, TD_STAT_KILLED, 2);
	}
	return NULL;
}

static void test_stats_threads_sharing_shards_totals_exact(void **state)
{
	struct stats_fixture *f = *state;
	struct td_stats_snapshot *s = f->snap;
	pthread_t threads[SHARED_THREADS];

	for (int t = 0; t < SHARED_THREADS; t++)
		assert_int_equal(pthread_create(&threads[t], NULL, shared_worker_main, f->st), 0);
	for (int t = 0; t < SHARED_THREADS; t++)
		assert_int_equal(pthread_join(threads[t], NULL), 0);

	td_stats_snapshot(f->st, s, 0);
	assert_int_equal(s->ios[TD_OP_WRITE], SHARED_THREADS * SHARED_ITERS);
	assert_int_equal(s->sectors[TD_OP_WRITE], SHARED_THREADS * SHARED_ITERS);
	assert_int_equal(s->ticks_ns[TD_OP_WRITE], 3 * SHARED_THREADS * SHARED_ITERS);
	assert_int_equal(s->hist[TD_OP_WRITE][3], SHARED_THREADS * SHARED_ITERS);
	assert_int_equal(s->counters[TD_STAT_KILLED], 2 * SHARED_THREADS * SHARED_ITERS);
	assert_int_equal(s->in_flight, 0);
}

static void test_stats_create_gives_independent_objects(void **state)
{
	struct stats_fixture *f = *state;
	struct td_stats *other = td_stats_create();

	assert_non_null(other);
	td_stats_add(other, TD_STAT_RESETS, 4);
	td_stats_io_start(other, 0);
	td_stats_snapshot(f->st, f->snap, 10);
	assert_int_equal(f->snap->counters[TD_STAT_RESETS], 0);
	assert_int_equal(f->snap->in_flight, 0);
	td_stats_snapshot(other, f->snap, 10);
	assert_int_equal(f->snap->counters[TD_STAT_RESETS], 4);
	assert_int_equal(f->snap->in_flight, 1);
	assert_int_equal(f->snap->io_ticks_ns, 10);
	td_stats_destroy(other);
}

/* ---- per-CPU stats: Linux's approximated io_ticks ------------------------------------- */

#define T TD_STATS_TICK_NS
/* Tenths of a tick, so the cases read like the timelines they are. */
#define AT(tenths) ((uint64_t)(tenths) * T / 10)

struct percpu_step {
	char what;	     /* 'S' start, 'D' done (a read of latency @arg), 'C' cancel, '?' snapshot */
	uint64_t at;	     /* the time of the event */
	uint64_t arg;	     /* 'D': latency; '?': io_ticks expected */
	uint64_t in_flight;  /* '?': expected */
	uint64_t time_in_q;  /* '?': expected */
};

struct percpu_case {
	const char *name;
	struct percpu_step steps[12];
};

static const struct percpu_case percpu_cases[] = {
	{ "test_stats_percpu_io_ticks_counts_the_whole_ticks_a_request_spans",
	  { { 'S', AT(2) }, { '?', AT(20), 2 * T, 1, 0 }, { 'D', AT(37), AT(35) },
	    { '?', AT(100), 3 * T, 0, AT(35) } } },
	{ "test_stats_percpu_idle_gap_between_requests_not_counted",
	  { { 'S', AT(15) }, { 'D', AT(25), AT(10) }, { '?', AT(30), 1 * T, 0, AT(10) },
	    { 'S', AT(55) }, { 'D', AT(72), AT(17) }, { '?', AT(90), 3 * T, 0, AT(27) } } },
	{ "test_stats_percpu_snapshot_counts_open_interval_without_moving_the_stamp",
	  { { 'S', AT(15) }, { '?', AT(45), 3 * T, 1, 0 }, { '?', AT(45), 3 * T, 1, 0 },
	    { 'D', AT(62), AT(47) }, { '?', AT(80), 5 * T, 0, AT(47) } } },
	{ "test_stats_percpu_overlapping_requests_ending_in_one_tick_count_it_once",
	  { { 'S', AT(5) }, { 'S', AT(7) }, { 'D', AT(21), AT(16) }, { 'D', AT(29), AT(22) },
	    { '?', AT(50), 2 * T, 0, AT(38) } } },
	{ "test_stats_percpu_cancel_leaves_flight_without_an_io",
	  { { 'S', AT(12) }, { 'S', AT(13) }, { 'C', AT(14) }, { '?', AT(14), 0, 1, 0 },
	    { 'D', AT(35), AT(23) }, { '?', AT(40), 2 * T, 0, AT(23) } } },
};

static void run_percpu_case(void **state)
{
	const struct percpu_case *c = *state;
	struct td_stats *st = td_stats_create_percpu();
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	uint64_t ios = 0;

	assert_non_null(st);
	assert_non_null(s);
	for (size_t i = 0; i < TD_ARRAY_SIZE(c->steps) && c->steps[i].what; i++) {
		const struct percpu_step *p = &c->steps[i];

		switch (p->what) {
		case 'S':
			td_stats_io_start(st, p->at);
			break;
		case 'D':
			td_stats_io_done(st, TD_OP_READ, 8, p->arg, 0, p->at);
			ios++;
			break;
		case 'C':
			td_stats_io_cancel(st, p->at);
			break;
		default:
			td_stats_snapshot(st, s, p->at);
			assert_int_equal(s->io_ticks_ns, p->arg);
			assert_int_equal(s->in_flight, p->in_flight);
			assert_int_equal(s->time_in_queue_ns, p->time_in_q);
			assert_int_equal(s->ios[TD_OP_READ], ios);
			assert_int_equal(s->sectors[TD_OP_READ], ios * 8);
			break;
		}
	}
	td_stats_destroy(st);
	free(s);
}

#undef AT
#undef T

struct percpu_thread_arg {
	struct td_stats *st;
	int cpu;
	bool start;
};

static void *percpu_thread(void *p)
{
	struct percpu_thread_arg *a = p;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(a->cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	for (unsigned int i = 0; i < 1000; i++) {
		if (a->start)
			td_stats_io_start(a->st, 0);
		else
			td_stats_io_done(a->st, TD_OP_WRITE, 8, 10, 0, 0);
	}
	return NULL;
}

/* Requests started on one CPU and ended on another: the shards' sum is exact, never negative. */
static void test_stats_percpu_start_and_end_on_different_cpus_sum_exactly(void **state)
{
	struct td_stats *st = td_stats_create_percpu();
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct percpu_thread_arg a[2];
	cpu_set_t set;
	int cpus[2] = { 0, 0 };
	int n = 0;
	pthread_t th;

	(void)state;
	assert_non_null(st);
	assert_non_null(s);
	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	if (n == 1)
		cpus[1] = cpus[0];
	a[0] = (struct percpu_thread_arg){ .st = st, .cpu = cpus[0], .start = true };
	a[1] = (struct percpu_thread_arg){ .st = st, .cpu = cpus[1], .start = false };
	assert_int_equal(pthread_create(&th, NULL, percpu_thread, &a[0]), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	td_stats_snapshot(st, s, 0);
	assert_int_equal(s->in_flight, 1000);
	assert_int_equal(pthread_create(&th, NULL, percpu_thread, &a[1]), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	td_stats_snapshot(st, s, 0);
	assert_int_equal(s->in_flight, 0);
	assert_int_equal(s->ios[TD_OP_WRITE], 1000);
	assert_int_equal(s->time_in_queue_ns, 1000 * 10);
	assert_int_equal(s->io_ticks_ns, 0);
	td_stats_destroy(st);
	free(s);
}

#define STATS_TEST(fn) cmocka_unit_test_setup_teardown(fn, stats_setup, stats_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		STATS_TEST(test_stats_new_object_snapshots_all_zero),
		STATS_TEST(test_stats_io_done_counts_ios_sectors_and_latency_per_op),
		STATS_TEST(test_stats_errors_counted_per_op_and_still_counted_as_ios),
		STATS_TEST(test_stats_merges_counted_front_and_back_per_op),
		STATS_TEST(test_stats_named_counters_accumulate_separately),
		cmocka_unit_test(test_stats_counter_names_are_fixed_and_unknown_is_null),
		cmocka_unit_test(test_stats_bucket_exact_below_sub),
		cmocka_unit_test(test_stats_bucket_known_answers),
		cmocka_unit_test(test_stats_bucket_monotonic_and_within_bound_over_sweep),
		cmocka_unit_test(test_stats_bucket_covers_uint64_max_without_overflow),
		cmocka_unit_test(test_stats_bucket_value_round_trips_every_reachable_bucket),
		cmocka_unit_test(test_stats_percentile_of_1_to_1000_us_within_bound),
		cmocka_unit_test(test_stats_percentile_exact_for_small_values),
		cmocka_unit_test(test_stats_percentile_max_of_one_sample_is_the_sample),
		cmocka_unit_test_setup_teardown(
			test_stats_percentile_max_reads_the_top_bucket_as_the_maximum, stats_setup,
			stats_teardown),
		cmocka_unit_test(test_stats_percentile_rank_not_bumped_by_binary_rounding),
		cmocka_unit_test(test_stats_percentile_clamps_fraction),
		cmocka_unit_test(test_stats_percentile_of_empty_histogram_is_zero),
		STATS_TEST(test_stats_percentile_reads_snapshot_histogram),
		STATS_TEST(test_stats_busy_integrals_with_overlapping_requests),
		STATS_TEST(test_stats_io_cancel_leaves_flight_without_counting_an_io),
		STATS_TEST(test_stats_busy_idle_gaps_not_counted),
		STATS_TEST(test_stats_snapshot_closes_open_interval_without_changing_state),
		STATS_TEST(test_stats_busy_out_of_order_timestamps_do_not_underflow),
		STATS_TEST(test_stats_threads_totals_exact),
		STATS_TEST(test_stats_threads_sharing_shards_totals_exact),
		STATS_TEST(test_stats_create_gives_independent_objects),
		cmocka_unit_test(test_stats_percpu_start_and_end_on_different_cpus_sum_exactly),
	};
	struct CMUnitTest all[TD_ARRAY_SIZE(tests) + TD_ARRAY_SIZE(percpu_cases)];
	size_t n = 0;

	for (size_t i = 0; i < TD_ARRAY_SIZE(tests); i++)
		all[n++] = tests[i];
	for (size_t i = 0; i < TD_ARRAY_SIZE(percpu_cases); i++)
		all[n++] = (struct CMUnitTest){ .name = percpu_cases[i].name,
						.test_func = run_percpu_case,
						.initial_state = (void *)&percpu_cases[i] };
	return _cmocka_run_group_tests("test_stats", all, n, NULL, NULL);
}
