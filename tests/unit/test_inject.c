// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_inject.c - the fault injector: rule matching, counts, reproducible
 * random failures, and concurrent use.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "tagdisk/inject.h"

#define NR_DRAWS 1000

static const enum td_op eligible_ops[] = {
	TD_OP_READ,
	TD_OP_WRITE,
	TD_OP_DISCARD,
	TD_OP_WRITE_ZEROES,
};

static struct td_inject *new_inject(uint64_t seed)
{
	struct td_inject *inj = td_inject_create(seed);

	assert_non_null(inj);
	return inj;
}

/* The error of a command, after checking it asks for neither a hang nor latency. */
static int check_error(struct td_inject *inj, enum td_op op, uint64_t sector, uint32_t nr)
{
	struct td_inject_verdict v;

	memset(&v, 0xa5, sizeof(v));
	td_inject_check(inj, op, sector, nr, &v);
	assert_false(v.hang);
	assert_int_equal(v.latency_us, 0);
	assert_true(v.error == 0 || v.error == -EIO);
	return v.error;
}

static size_t list_rules(struct td_inject *inj, struct td_inject_rule *out)
{
	return td_inject_list(inj, out, TD_INJECT_MAX_RULES + 2);
}

static void assert_all_clear(struct td_inject *inj, enum td_op op, uint64_t sector, uint32_t nr)
{
	struct td_inject_verdict v;

	memset(&v, 0xa5, sizeof(v));
	td_inject_check(inj, op, sector, nr, &v);
	assert_int_equal(v.error, 0);
	assert_false(v.hang);
	assert_int_equal(v.latency_us, 0);
}

/* Run NR_DRAWS eligible commands (cycling through the ops) and record which failed. */
static unsigned int record_pattern(struct td_inject *inj, bool *failed, bool with_flushes)
{
	unsigned int nr_failed = 0;

	for (unsigned int i = 0; i < NR_DRAWS; i++) {
		enum td_op op = eligible_ops[i % TD_ARRAY_SIZE(eligible_ops)];

		if (with_flushes)
			assert_int_equal(check_error(inj, TD_OP_FLUSH, 0, 0), 0);
		failed[i] = check_error(inj, op, (uint64_t)i * 8, 8) == -EIO;
		nr_failed += failed[i];
	}
	return nr_failed;
}

/* An independent splitmix64, checked against published values below. */
static uint64_t ref_splitmix64(uint64_t *state)
{
	uint64_t z;

	*state += 0x9e3779b97f4a7c15ULL;
	z = *state;
	z ^= z >> 30;
	z *= 0xbf58476d1ce4e5b9ULL;
	z ^= z >> 27;
	z *= 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return z;
}

static void test_inject_nothing_armed_gives_all_clear_verdict(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[4];

	(void)state;
	for (unsigned int op = 0; op < TD_OP_COUNT; op++)
		assert_all_clear(inj, (enum td_op)op, 0, op == TD_OP_FLUSH ? 0 : 8);
	assert_all_clear(inj, TD_OP_WRITE, UINT64_MAX - 8, 8);
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 0);
	td_inject_destroy(inj);
}

static void test_inject_error_rule_fails_exactly_overlapping_commands(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[4];

	(void)state;
	/* The rule covers sectors [100, 108). */
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_WRITE, 100, 8, TD_INJECT_FOREVER), 0);

	assert_int_equal(check_error(inj, TD_OP_WRITE, 96, 4), 0);	/* ends at 100 */
	assert_int_equal(check_error(inj, TD_OP_WRITE, 99, 1), 0);	/* last sector 99 */
	assert_int_equal(check_error(inj, TD_OP_WRITE, 108, 8), 0);	/* starts at the end */
	assert_int_equal(check_error(inj, TD_OP_WRITE, 0, 100), 0);	/* everything before */
	assert_int_equal(check_error(inj, TD_OP_WRITE, 104, 0), 0);	/* empty: touches nothing */
	assert_int_equal(check_error(inj, TD_OP_WRITE, 92, 9), -EIO);	/* last sector 100 */
	assert_int_equal(check_error(inj, TD_OP_WRITE, 107, 1), -EIO);	/* rule end - 1 */
	assert_int_equal(check_error(inj, TD_OP_WRITE, 102, 2), -EIO);	/* inside */
	assert_int_equal(check_error(inj, TD_OP_WRITE, 50, 200), -EIO);	/* covers it */

	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 1);
	assert_int_equal(rules[0].fired, 4);
	assert_true(rules[0].times_left == TD_INJECT_FOREVER);
	td_inject_destroy(inj);
}

static void test_inject_error_rule_at_top_of_sector_space_does_not_overflow(void **state)
{
	struct td_inject *inj = new_inject(1);

	(void)state;
	/* [UINT64_MAX - 8, UINT64_MAX): the largest range whose end is representable. */
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_ANY, UINT64_MAX - 8, 8, 10), 0);
	assert_int_equal(check_error(inj, TD_OP_READ, UINT64_MAX - 16, 8), 0);
	assert_int_equal(check_error(inj, TD_OP_READ, 0, UINT32_MAX), 0);
	assert_int_equal(check_error(inj, TD_OP_READ, UINT64_MAX - 9, 1), 0);
	assert_int_equal(check_error(inj, TD_OP_READ, UINT64_MAX - 9, 2), -EIO);
	assert_int_equal(check_error(inj, TD_OP_WRITE, UINT64_MAX - 1, 1), -EIO);
	/* sector + nr_sectors wraps past 2^64: still the rule's last sectors. */
	assert_int_equal(check_error(inj, TD_OP_WRITE, UINT64_MAX - 2, 8), -EIO);
	td_inject_destroy(inj);
}

static void test_inject_write_rule_catches_discard_and_write_zeroes_not_read_or_flush(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[4];

	(void)state;
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_WRITE, 0, 1000, TD_INJECT_FOREVER), 0);
	assert_int_equal(check_error(inj, TD_OP_READ, 10, 8), 0);
	assert_int_equal(check_error(inj, TD_OP_FLUSH, 0, 0), 0);
	assert_int_equal(check_error(inj, TD_OP_WRITE, 10, 8), -EIO);
	assert_int_equal(check_error(inj, TD_OP_DISCARD, 10, 8), -EIO);
	assert_int_equal(check_error(inj, TD_OP_WRITE_ZEROES, 10, 8), -EIO);

	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 1);
	assert_int_equal(rules[0].fired, 3);
	td_inject_destroy(inj);
}

static void test_inject_read_rule_ignores_writes_and_flushes(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[4];

	(void)state;
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_READ, 0, 1000, TD_INJECT_FOREVER), 0);
	assert_int_equal(check_error(inj, TD_OP_WRITE, 10, 8), 0);
	assert_int_equal(check_error(inj, TD_OP_DISCARD, 10, 8), 0);
	assert_int_equal(check_error(inj, TD_OP_WRITE_ZEROES, 10, 8), 0);
	assert_int_equal(check_error(inj, TD_OP_FLUSH, 0, 0), 0);
	assert_int_equal(check_error(inj, TD_OP_READ, 10, 8), -EIO);

	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 1);
	assert_int_equal(rules[0].fired, 1);
	td_inject_destroy(inj);
}

static void test_inject_any_rule_catches_reads_and_writes_never_flushes(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[4];

	(void)state;
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_ANY, 0, 1000, TD_INJECT_FOREVER), 0);
	assert_int_equal(check_error(inj, TD_OP_FLUSH, 0, 0), 0);
	/* Even a flush that carries a range inside the rule. */
	assert_int_equal(check_error(inj, TD_OP_FLUSH, 10, 8), 0);
	for (size_t i = 0; i < TD_ARRAY_SIZE(eligible_ops); i++)
		assert_int_equal(check_error(inj, eligible_ops[i], 10, 8), -EIO);

	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 1);
	assert_int_equal(rules[0].fired, TD_ARRAY_SIZE(eligible_ops));
	td_inject_destroy(inj);
}

static void test_inject_error_times_two_fires_twice_then_stops(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[4];

	(void)state;
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_READ, 0, 8, 2), 0);
	assert_int_equal(check_error(inj, TD_OP_READ, 0, 8), -EIO);
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 1);
	assert_int_equal(rules[0].fired, 1);
	assert_int_equal(rules[0].times_left, 1);

	assert_int_equal(check_error(inj, TD_OP_READ, 0, 8), -EIO);
	for (int i = 0; i < 10; i++)
		assert_all_clear(inj, TD_OP_READ, 0, 8);

	/* Spent, but still listed with what it did. */
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 1);
	assert_int_equal(rules[0].kind, TD_INJECT_ERROR);
	assert_int_equal(rules[0].fired, 2);
	assert_int_equal(rules[0].times_left, 0);
	td_inject_destroy(inj);
}

static void test_inject_forever_rule_keeps_firing(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[4];

	(void)state;
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_ANY, 0, 8, TD_INJECT_FOREVER), 0);
	for (int i = 0; i < 5000; i++)
		assert_int_equal(check_error(inj, i % 2 ? TD_OP_READ : TD_OP_WRITE, 4, 1), -EIO);
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 1);
	assert_int_equal(rules[0].fired, 5000);
	assert_true(rules[0].times_left == TD_INJECT_FOREVER);
	td_inject_destroy(inj);
}

static void test_inject_first_matching_rule_fires_and_only_one(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[4];

	(void)state;
	/* A = [0, 10) once, B = [5, 15) three times; they share [5, 10). */
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_ANY, 0, 10, 1), 0);
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_ANY, 5, 10, 3), 0);

	assert_int_equal(check_error(inj, TD_OP_READ, 6, 1), -EIO); /* A, not B */
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 2);
	assert_int_equal(rules[0].fired, 1);
	assert_int_equal(rules[1].fired, 0);
	assert_int_equal(rules[1].times_left, 3);

	assert_int_equal(check_error(inj, TD_OP_READ, 6, 1), -EIO);	/* A is spent: B */
	assert_int_equal(check_error(inj, TD_OP_READ, 0, 2), 0);	/* only A covered it */
	assert_int_equal(check_error(inj, TD_OP_READ, 12, 1), -EIO);	/* B */
	assert_int_equal(check_error(inj, TD_OP_READ, 14, 1), -EIO);	/* B, last time */
	assert_int_equal(check_error(inj, TD_OP_READ, 6, 1), 0);

	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 2);
	assert_int_equal(rules[0].fired, 1);
	assert_int_equal(rules[0].times_left, 0);
	assert_int_equal(rules[1].fired, 3);
	assert_int_equal(rules[1].times_left, 0);
	td_inject_destroy(inj);
}

static void test_inject_every_same_seed_repeats_pattern(void **state)
{
	static bool first[NR_DRAWS], again[NR_DRAWS], flushed[NR_DRAWS];
	struct td_inject *inj = new_inject(42);
	struct td_inject_rule rules[4];
	unsigned int nr_failed;

	(void)state;
	assert_int_equal(td_inject_set_every(inj, 4), 0);
	nr_failed = record_pattern(inj, first, false);
	/* One in four on average: a generator stuck on 0 or never 0 fails here. */
	assert_in_range(nr_failed, 180, 320);
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 1);
	assert_int_equal(rules[0].kind, TD_INJECT_EVERY);
	assert_int_equal(rules[0].every, 4);
	assert_int_equal(rules[0].fired, nr_failed);

	td_inject_set_seed(inj, 42);
	assert_int_equal(record_pattern(inj, again, false), nr_failed);
	assert_memory_equal(first, again, sizeof(first));

	/* Flushes draw nothing, so interleaving them changes nothing. */
	td_inject_set_seed(inj, 42);
	assert_int_equal(record_pattern(inj, flushed, true), nr_failed);
	assert_memory_equal(first, flushed, sizeof(first));
	td_inject_destroy(inj);
}

static void test_inject_every_different_seed_gives_different_pattern(void **state)
{
	static bool a[NR_DRAWS], b[NR_DRAWS];
	struct td_inject *inj = new_inject(42);

	(void)state;
	assert_int_equal(td_inject_set_every(inj, 4), 0);
	record_pattern(inj, a, false);
	td_inject_set_seed(inj, 43);
	record_pattern(inj, b, false);
	assert_memory_not_equal(a, b, sizeof(a));
	td_inject_destroy(inj);
}

static void test_inject_every_continues_sequence_until_seed_is_set(void **state)
{
	static bool a[NR_DRAWS], b[NR_DRAWS];
	struct td_inject *inj = new_inject(42);

	(void)state;
	assert_int_equal(td_inject_set_every(inj, 4), 0);
	record_pattern(inj, a, false);
	/* Without a new seed the generator goes on, so the next thousand differ. */
	record_pattern(inj, b, false);
	assert_memory_not_equal(a, b, sizeof(a));
	td_inject_destroy(inj);
}

static void test_inject_every_follows_splitmix64(void **state)
{
	static bool got[NR_DRAWS];
	struct td_inject *inj = new_inject(1234567);
	uint64_t ref = 1234567;

	(void)state;
	/* The reference itself, against the published first outputs for seed 1234567. */
	assert_true(ref_splitmix64(&ref) == 6457827717110365317ULL);
	assert_true(ref_splitmix64(&ref) == 3203168211198807973ULL);
	assert_true(ref_splitmix64(&ref) == 9817491932198370423ULL);

	assert_int_equal(td_inject_set_every(inj, 7), 0);
	record_pattern(inj, got, false);
	ref = 1234567;
	for (unsigned int i = 0; i < NR_DRAWS; i++)
		assert_int_equal(got[i], ref_splitmix64(&ref) % 7 == 0);
	td_inject_destroy(inj);
}

static void test_inject_every_one_fails_all_eligible_never_flush(void **state)
{
	struct td_inject *inj = new_inject(5);
	struct td_inject_rule rules[4];

	(void)state;
	assert_int_equal(td_inject_set_every(inj, 1), 0);
	for (unsigned int i = 0; i < 400; i++) {
		enum td_op op = eligible_ops[i % TD_ARRAY_SIZE(eligible_ops)];

		assert_int_equal(check_error(inj, op, i, 1), -EIO);
		assert_int_equal(check_error(inj, TD_OP_FLUSH, 0, 0), 0);
	}
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 1);
	assert_int_equal(rules[0].fired, 400);
	td_inject_destroy(inj);
}

static void test_inject_every_pattern_not_shifted_by_error_rule(void **state)
{
	static bool plain[NR_DRAWS];
	struct td_inject *inj = new_inject(7);
	struct td_inject_rule rules[4];
	unsigned int nr_plain;
	unsigned int nr_every = 0;

	(void)state;
	assert_int_equal(td_inject_set_every(inj, 3), 0);
	nr_plain = record_pattern(inj, plain, false);

	td_inject_set_seed(inj, 7);
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_ANY, 0, 8, TD_INJECT_FOREVER), 0);
	for (unsigned int i = 0; i < NR_DRAWS; i++) {
		enum td_op op = eligible_ops[i % TD_ARRAY_SIZE(eligible_ops)];
		/* Every tenth command hits the error rule; the others follow the plain run. */
		uint64_t sector = i % 10 ? (uint64_t)i * 8 + 8 : 0;
		int err = check_error(inj, op, sector, 8);

		if (sector == 0) {
			assert_int_equal(err, -EIO);
			continue;
		}
		assert_int_equal(err == -EIO, plain[i]);
		nr_every += plain[i];
	}
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 2);
	assert_int_equal(rules[0].kind, TD_INJECT_ERROR);
	assert_int_equal(rules[0].fired, NR_DRAWS / 10);
	assert_int_equal(rules[1].kind, TD_INJECT_EVERY);
	/* A new seed restarts the sequence, not the fired count. */
	assert_int_equal(rules[1].fired, nr_plain + nr_every);
	td_inject_destroy(inj);
}

static void test_inject_set_every_replaces_earlier_rule(void **state)
{
	struct td_inject *inj = new_inject(5);
	struct td_inject_rule rules[4];

	(void)state;
	assert_int_equal(td_inject_set_every(inj, 1), 0);
	assert_int_equal(check_error(inj, TD_OP_READ, 0, 1), -EIO);
	assert_int_equal(check_error(inj, TD_OP_READ, 0, 1), -EIO);
	assert_int_equal(td_inject_set_every(inj, 1000000), 0);

	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 1);
	assert_int_equal(rules[0].kind, TD_INJECT_EVERY);
	assert_int_equal(rules[0].every, 1000000);
	assert_int_equal(rules[0].fired, 0);
	td_inject_destroy(inj);
}

static void test_inject_hang_fires_once_with_times_one(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[4];
	struct td_inject_verdict v;

	(void)state;
	assert_int_equal(td_inject_add_hang(inj, 1), 0);
	td_inject_check(inj, TD_OP_FLUSH, 0, 0, &v);
	assert_true(v.hang);
	assert_int_equal(v.error, 0);
	assert_int_equal(v.latency_us, 0);
	for (unsigned int op = 0; op < TD_OP_COUNT; op++)
		assert_all_clear(inj, (enum td_op)op, 0, op == TD_OP_FLUSH ? 0 : 8);

	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 1);
	assert_int_equal(rules[0].kind, TD_INJECT_HANG);
	assert_int_equal(rules[0].fired, 1);
	assert_int_equal(rules[0].times_left, 0);
	td_inject_destroy(inj);
}

static void test_inject_hang_rules_fire_in_order_on_any_command(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[4];
	struct td_inject_verdict v;

	(void)state;
	assert_int_equal(td_inject_add_hang(inj, 2), 0);
	assert_int_equal(td_inject_add_hang(inj, 1), 0);
	for (unsigned int i = 0; i < 3; i++) {
		td_inject_check(inj, eligible_ops[i], 1000 * i, 8, &v);
		assert_true(v.hang);
		assert_int_equal(v.error, 0);
	}
	assert_all_clear(inj, TD_OP_WRITE, 0, 8);
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 2);
	assert_int_equal(rules[0].fired, 2);
	assert_int_equal(rules[1].fired, 1);
	td_inject_destroy(inj);
}

static void test_inject_hang_wins_and_spends_no_error_rule(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[4];
	struct td_inject_verdict v;

	(void)state;
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_READ, 0, 8, 1), 0);
	assert_int_equal(td_inject_set_every(inj, 1), 0);
	assert_int_equal(td_inject_add_hang(inj, 1), 0);

	td_inject_check(inj, TD_OP_READ, 0, 8, &v);
	assert_true(v.hang);
	assert_int_equal(v.error, 0);
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 3);
	assert_int_equal(rules[0].fired, 0); /* error */
	assert_int_equal(rules[0].times_left, 1);
	assert_int_equal(rules[1].fired, 1); /* hang */
	assert_int_equal(rules[2].fired, 0); /* every */

	assert_int_equal(check_error(inj, TD_OP_READ, 0, 8), -EIO);
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 3);
	assert_int_equal(rules[0].fired, 1);
	assert_int_equal(rules[2].fired, 0); /* the error rule decided, not every */
	td_inject_destroy(inj);
}

static void test_inject_latency_reported_for_every_command(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[4];
	struct td_inject_verdict v;

	(void)state;
	td_inject_set_latency(inj, 2500);
	for (unsigned int op = 0; op < TD_OP_COUNT; op++) {
		memset(&v, 0xa5, sizeof(v));
		td_inject_check(inj, (enum td_op)op, 64, op == TD_OP_FLUSH ? 0 : 8, &v);
		assert_int_equal(v.latency_us, 2500);
		assert_int_equal(v.error, 0);
		assert_false(v.hang);
	}
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 1);
	assert_int_equal(rules[0].kind, TD_INJECT_LATENCY);
	assert_int_equal(rules[0].latency_us, 2500);
	assert_int_equal(rules[0].fired, TD_OP_COUNT);

	/* Latency comes with errors and hangs too. */
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_ANY, 0, 8, 1), 0);
	td_inject_check(inj, TD_OP_WRITE, 0, 8, &v);
	assert_int_equal(v.error, -EIO);
	assert_int_equal(v.latency_us, 2500);

	td_inject_set_latency(inj, 0);
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 1);
	assert_int_equal(rules[0].kind, TD_INJECT_ERROR);
	assert_all_clear(inj, TD_OP_READ, 0, 8);
	td_inject_destroy(inj);
}

static void test_inject_clear_disarms_everything_but_keeps_seed(void **state)
{
	static bool before[NR_DRAWS], after[NR_DRAWS];
	struct td_inject *inj = new_inject(42);
	struct td_inject_rule rules[4];

	(void)state;
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_ANY, 0, 1000, TD_INJECT_FOREVER), 0);
	assert_int_equal(td_inject_add_hang(inj, 3), 0);
	assert_int_equal(td_inject_set_every(inj, 1), 0);
	td_inject_set_latency(inj, 10);
	td_inject_clear(inj);

	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 0);
	for (unsigned int op = 0; op < TD_OP_COUNT; op++)
		assert_all_clear(inj, (enum td_op)op, 0, op == TD_OP_FLUSH ? 0 : 8);
	assert_true(td_inject_seed(inj) == 42);

	/* The kept seed still gives the pattern a fresh injector with seed 42 gives. */
	td_inject_set_seed(inj, td_inject_seed(inj));
	assert_int_equal(td_inject_set_every(inj, 4), 0);
	record_pattern(inj, after, false);
	td_inject_destroy(inj);
	inj = new_inject(42);
	assert_int_equal(td_inject_set_every(inj, 4), 0);
	record_pattern(inj, before, false);
	assert_memory_equal(before, after, sizeof(before));
	td_inject_destroy(inj);
}

static void test_inject_seed_reports_current_seed(void **state)
{
	struct td_inject *inj = new_inject(42);

	(void)state;
	assert_true(td_inject_seed(inj) == 42);
	td_inject_set_seed(inj, UINT64_MAX);
	assert_true(td_inject_seed(inj) == UINT64_MAX);
	td_inject_destroy(inj);
}

static void test_inject_list_reports_rules_in_order(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[8];

	(void)state;
	td_inject_set_latency(inj, 300);
	assert_int_equal(td_inject_set_every(inj, 9), 0);
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_READ, 10, 20, 3), 0);
	assert_int_equal(td_inject_add_hang(inj, 2), 0);
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_WRITE, 500, 1, TD_INJECT_FOREVER), 0);

	memset(rules, 0xa5, sizeof(rules));
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 5);

	assert_int_equal(rules[0].kind, TD_INJECT_ERROR);
	assert_int_equal(rules[0].op, TD_INJECT_READ);
	assert_int_equal(rules[0].sector, 10);
	assert_int_equal(rules[0].count, 20);
	assert_int_equal(rules[0].times_left, 3);
	assert_int_equal(rules[0].fired, 0);

	assert_int_equal(rules[1].kind, TD_INJECT_HANG);
	assert_int_equal(rules[1].times_left, 2);
	assert_int_equal(rules[1].fired, 0);

	assert_int_equal(rules[2].kind, TD_INJECT_ERROR);
	assert_int_equal(rules[2].op, TD_INJECT_WRITE);
	assert_int_equal(rules[2].sector, 500);
	assert_int_equal(rules[2].count, 1);
	assert_true(rules[2].times_left == TD_INJECT_FOREVER);

	assert_int_equal(rules[3].kind, TD_INJECT_EVERY);
	assert_int_equal(rules[3].every, 9);
	assert_int_equal(rules[3].fired, 0);

	assert_int_equal(rules[4].kind, TD_INJECT_LATENCY);
	assert_int_equal(rules[4].latency_us, 300);
	assert_int_equal(rules[4].fired, 0);
	td_inject_destroy(inj);
}

static void test_inject_list_counts_all_but_copies_at_most_max(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[3];

	(void)state;
	assert_int_equal(td_inject_add_hang(inj, 1), 0);
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_ANY, 0, 1, 1), 0);
	assert_int_equal(td_inject_set_every(inj, 2), 0);
	td_inject_set_latency(inj, 1);

	memset(rules, 0xa5, sizeof(rules));
	assert_int_equal(td_inject_list(inj, rules, 2), 4);
	assert_int_equal(rules[0].kind, TD_INJECT_HANG);
	assert_int_equal(rules[1].kind, TD_INJECT_ERROR);
	assert_int_equal(rules[2].fired, 0xa5a5a5a5a5a5a5a5ULL); /* untouched */
	assert_int_equal(td_inject_list(inj, NULL, 0), 4);
	td_inject_destroy(inj);
}

static void test_inject_add_error_rejects_bad_arguments_with_einval(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[4];

	(void)state;
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_READ, 0, 0, 1), -EINVAL);
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_READ, 0, 8, 0), -EINVAL);
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_READ, UINT64_MAX, 1, 1), -EINVAL);
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_READ, UINT64_MAX - 9, 10, 1), -EINVAL);
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_READ, 1, UINT64_MAX, 1), -EINVAL);
	assert_int_equal(td_inject_add_error(inj, (enum td_inject_op)7, 0, 8, 1), -EINVAL);
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 0);
	assert_all_clear(inj, TD_OP_READ, 0, 8);

	/* The boundary itself is valid. */
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_READ, UINT64_MAX - 9, 9, 1), 0);
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_READ, 0, UINT64_MAX, 1), 0);
	td_inject_destroy(inj);
}

static void test_inject_zero_every_and_zero_hang_rejected_with_einval(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[4];

	(void)state;
	assert_int_equal(td_inject_set_every(inj, 0), -EINVAL);
	assert_int_equal(td_inject_add_hang(inj, 0), -EINVAL);
	assert_int_equal(td_inject_list(inj, rules, TD_ARRAY_SIZE(rules)), 0);
	assert_all_clear(inj, TD_OP_READ, 0, 8);
	td_inject_destroy(inj);
}

static void test_inject_full_rule_table_returns_enospc_until_clear(void **state)
{
	struct td_inject *inj = new_inject(1);
	struct td_inject_rule rules[TD_INJECT_MAX_RULES + 2];

	(void)state;
	for (unsigned int i = 0; i < TD_INJECT_MAX_RULES; i++) {
		if (i % 2)
			assert_int_equal(td_inject_add_hang(inj, 1), 0);
		else
			assert_int_equal(td_inject_add_error(inj, TD_INJECT_ANY, i, 1, 1), 0);
	}
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_ANY, 0, 1, 1), -ENOSPC);
	assert_int_equal(td_inject_add_hang(inj, 1), -ENOSPC);
	/* every and latency have their own places. */
	assert_int_equal(td_inject_set_every(inj, 3), 0);
	td_inject_set_latency(inj, 1);
	assert_int_equal(list_rules(inj, rules), TD_INJECT_MAX_RULES + 2);

	td_inject_clear(inj);
	assert_int_equal(td_inject_add_hang(inj, 1), 0);
	assert_int_equal(list_rules(inj, rules), 1);
	td_inject_destroy(inj);
}

static void test_inject_names(void **state)
{
	(void)state;
	assert_string_equal(td_inject_op_name(TD_INJECT_READ), "read");
	assert_string_equal(td_inject_op_name(TD_INJECT_WRITE), "write");
	assert_string_equal(td_inject_op_name(TD_INJECT_ANY), "any");
	assert_string_equal(td_inject_kind_name(TD_INJECT_ERROR), "error");
	assert_string_equal(td_inject_kind_name(TD_INJECT_EVERY), "every");
	assert_string_equal(td_inject_kind_name(TD_INJECT_HANG), "hang");
	assert_string_equal(td_inject_kind_name(TD_INJECT_LATENCY), "latency");
	assert_string_equal(td_inject_op_name((enum td_inject_op)99), "unknown");
	assert_string_equal(td_inject_kind_name((enum td_inject_kind)99), "unknown");
}

/*
 * Concurrency. Checker threads cannot use cmocka's asserts, so they count
 * what they saw and count anything impossible as bad; the main thread
 * asserts on the totals after joining.
 */
#define NR_CHECKERS	  4
#define CHECKS_PER_THREAD 10000
#define FAR_SECTOR	  (1ULL << 40)

struct concurrent {
	struct td_inject *inj;
	atomic_bool stop;
	atomic_uint bad;
	atomic_uint every_errors; /* reads outside [0, 8) that failed */
};

static void *checker_counting(void *arg)
{
	struct concurrent *c = arg;
	struct td_inject_verdict v;

	for (unsigned int i = 0; i < CHECKS_PER_THREAD; i++) {
		/* Inside the FOREVER read rule: always fails. */
		td_inject_check(c->inj, TD_OP_READ, 0, 8, &v);
		if (v.error != -EIO || v.hang || v.latency_us != 10)
			atomic_fetch_add(&c->bad, 1);
		/* Outside it: only every N can fail it. */
		td_inject_check(c->inj, TD_OP_READ, 5000 + i, 8, &v);
		if ((v.error != 0 && v.error != -EIO) || v.hang || v.latency_us != 10)
			atomic_fetch_add(&c->bad, 1);
		if (v.error)
			atomic_fetch_add(&c->every_errors, 1);
		td_inject_check(c->inj, TD_OP_FLUSH, 0, 0, &v);
		if (v.error || v.hang || v.latency_us != 10)
			atomic_fetch_add(&c->bad, 1);
	}
	return NULL;
}

static void *adder(void *arg)
{
	struct concurrent *c = arg;
	struct td_inject_rule rules[TD_INJECT_MAX_RULES + 2];

	/* Write rules far away: they must never fire for the checkers' reads. */
	while (td_inject_add_error(c->inj, TD_INJECT_WRITE, FAR_SECTOR, 8, 1) == 0) {
		if (td_inject_list(c->inj, rules, TD_ARRAY_SIZE(rules)) < 3)
			atomic_fetch_add(&c->bad, 1);
	}
	return NULL;
}

static void test_inject_concurrent_checks_count_every_firing(void **state)
{
	struct concurrent c = { .inj = new_inject(99) };
	struct td_inject_rule rules[TD_INJECT_MAX_RULES + 2];
	pthread_t checkers[NR_CHECKERS];
	pthread_t add;
	size_t n;

	(void)state;
	assert_int_equal(td_inject_add_error(c.inj, TD_INJECT_READ, 0, 8, TD_INJECT_FOREVER), 0);
	assert_int_equal(td_inject_set_every(c.inj, 5), 0);
	td_inject_set_latency(c.inj, 10);
	for (int i = 0; i < NR_CHECKERS; i++)
		assert_int_equal(pthread_create(&checkers[i], NULL, checker_counting, &c), 0);
	assert_int_equal(pthread_create(&add, NULL, adder, &c), 0);
	for (int i = 0; i < NR_CHECKERS; i++)
		assert_int_equal(pthread_join(checkers[i], NULL), 0);
	assert_int_equal(pthread_join(add, NULL), 0);

	assert_int_equal(atomic_load(&c.bad), 0);
	n = list_rules(c.inj, rules);
	assert_int_equal(n, TD_INJECT_MAX_RULES + 2);
	assert_int_equal(rules[0].fired, NR_CHECKERS * CHECKS_PER_THREAD);
	for (size_t i = 1; i < TD_INJECT_MAX_RULES; i++) {
		assert_int_equal(rules[i].sector, FAR_SECTOR);
		assert_int_equal(rules[i].fired, 0);
	}
	assert_int_equal(rules[n - 2].kind, TD_INJECT_EVERY);
	assert_int_equal(rules[n - 2].fired, atomic_load(&c.every_errors));
	assert_in_range(atomic_load(&c.every_errors), 1, NR_CHECKERS * CHECKS_PER_THREAD - 1);
	assert_int_equal(rules[n - 1].kind, TD_INJECT_LATENCY);
	assert_int_equal(rules[n - 1].fired, 3 * NR_CHECKERS * CHECKS_PER_THREAD);
	td_inject_destroy(c.inj);
}

static void *checker_sane(void *arg)
{
	struct concurrent *c = arg;
	struct td_inject_verdict v;

	for (unsigned int i = 0; i < CHECKS_PER_THREAD; i++) {
		enum td_op op = i % 5 == 4 ? TD_OP_FLUSH : eligible_ops[i % 4];

		td_inject_check(c->inj, op, i % 16, op == TD_OP_FLUSH ? 0 : 8, &v);
		if (v.error != 0 && v.error != -EIO)
			atomic_fetch_add(&c->bad, 1);
		if (v.hang && v.error)
			atomic_fetch_add(&c->bad, 1);
		if (op == TD_OP_FLUSH && v.error)
			atomic_fetch_add(&c->bad, 1);
		if (v.latency_us != 0 && v.latency_us != 10)
			atomic_fetch_add(&c->bad, 1);
	}
	return NULL;
}

static void *mutator(void *arg)
{
	struct concurrent *c = arg;
	struct td_inject_rule rules[TD_INJECT_MAX_RULES + 2];

	for (uint64_t i = 0; !atomic_load(&c->stop); i++) {
		if (td_inject_add_error(c->inj, TD_INJECT_ANY, 0, 8, TD_INJECT_FOREVER) ||
		    td_inject_set_every(c->inj, 3) || td_inject_add_hang(c->inj, 1))
			atomic_fetch_add(&c->bad, 1);
		td_inject_set_latency(c->inj, 10);
		if (i % 7 == 0)
			td_inject_set_seed(c->inj, i);
		if (td_inject_list(c->inj, rules, TD_ARRAY_SIZE(rules)) > 4)
			atomic_fetch_add(&c->bad, 1);
		td_inject_clear(c->inj);
	}
	return NULL;
}

static void test_inject_concurrent_clear_and_check_stay_consistent(void **state)
{
	struct concurrent c = { .inj = new_inject(3) };
	struct td_inject_rule rules[4];
	pthread_t checkers[NR_CHECKERS];
	pthread_t mut;

	(void)state;
	assert_int_equal(pthread_create(&mut, NULL, mutator, &c), 0);
	for (int i = 0; i < NR_CHECKERS; i++)
		assert_int_equal(pthread_create(&checkers[i], NULL, checker_sane, &c), 0);
	for (int i = 0; i < NR_CHECKERS; i++)
		assert_int_equal(pthread_join(checkers[i], NULL), 0);
	atomic_store(&c.stop, true);
	assert_int_equal(pthread_join(mut, NULL), 0);

	assert_int_equal(atomic_load(&c.bad), 0);
	assert_int_equal(td_inject_list(c.inj, rules, TD_ARRAY_SIZE(rules)), 0);
	for (unsigned int op = 0; op < TD_OP_COUNT; op++)
		assert_all_clear(c.inj, (enum td_op)op, 0, op == TD_OP_FLUSH ? 0 : 8);
	td_inject_destroy(c.inj);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inject_nothing_armed_gives_all_clear_verdict),
		cmocka_unit_test(test_inject_error_rule_fails_exactly_overlapping_commands),
		cmocka_unit_test(test_inject_error_rule_at_top_of_sector_space_does_not_overflow),
		cmocka_unit_test(
			test_inject_write_rule_catches_discard_and_write_zeroes_not_read_or_flush),
		cmocka_unit_test(test_inject_read_rule_ignores_writes_and_flushes),
		cmocka_unit_test(test_inject_any_rule_catches_reads_and_writes_never_flushes),
		cmocka_unit_test(test_inject_error_times_two_fires_twice_then_stops),
		cmocka_unit_test(test_inject_forever_rule_keeps_firing),
		cmocka_unit_test(test_inject_first_matching_rule_fires_and_only_one),
		cmocka_unit_test(test_inject_every_same_seed_repeats_pattern),
		cmocka_unit_test(test_inject_every_different_seed_gives_different_pattern),
		cmocka_unit_test(test_inject_every_continues_sequence_until_seed_is_set),
		cmocka_unit_test(test_inject_every_follows_splitmix64),
		cmocka_unit_test(test_inject_every_one_fails_all_eligible_never_flush),
		cmocka_unit_test(test_inject_every_pattern_not_shifted_by_error_rule),
		cmocka_unit_test(test_inject_set_every_replaces_earlier_rule),
		cmocka_unit_test(test_inject_hang_fires_once_with_times_one),
		cmocka_unit_test(test_inject_hang_rules_fire_in_order_on_any_command),
		cmocka_unit_test(test_inject_hang_wins_and_spends_no_error_rule),
		cmocka_unit_test(test_inject_latency_reported_for_every_command),
		cmocka_unit_test(test_inject_clear_disarms_everything_but_keeps_seed),
		cmocka_unit_test(test_inject_seed_reports_current_seed),
		cmocka_unit_test(test_inject_list_reports_rules_in_order),
		cmocka_unit_test(test_inject_list_counts_all_but_copies_at_most_max),
		cmocka_unit_test(test_inject_add_error_rejects_bad_arguments_with_einval),
		cmocka_unit_test(test_inject_zero_every_and_zero_hang_rejected_with_einval),
		cmocka_unit_test(test_inject_full_rule_table_returns_enospc_until_clear),
		cmocka_unit_test(test_inject_names),
		cmocka_unit_test(test_inject_concurrent_checks_count_every_firing),
		cmocka_unit_test(test_inject_concurrent_clear_and_check_stay_consistent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
