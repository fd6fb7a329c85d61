// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_ctl_format.c - the exact text tagdiskctl prints: human units, table
 * layout, iostat arithmetic and trace lines.
 *
 * Unit tables probe both sides of every boundary where the unit or the
 * number of decimals changes, since that is where such code goes wrong.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "ctl/ctl_format.h"

/* Doubles computed from small integers: equal to the expected value to the last few bits. */
#define assert_near(a, b)                                                                    \
	do {                                                                                 \
		double a_ = (a), b_ = (b);                                                   \
		if (fabs(a_ - b_) > 1e-9 * fmax(1, fabs(b_)))                                \
			fail_msg("%s = %.12g, expected %.12g", #a, a_, b_);                  \
	} while (0)

static void test_fmt_size_picks_binary_unit_with_one_decimal(void **state)
{
	static const struct {
		uint64_t bytes;
		const char *text;
	} cases[] = {
		{ 0, "0 B" },
		{ 1, "1 B" },
		{ 1023, "1023 B" },
		{ 1024, "1.0 KiB" },
		{ 1536, "1.5 KiB" },
		{ 1048514, "1023.9 KiB" },   /* 1023.94 KiB stays in KiB */
		{ 1048525, "1.0 MiB" },	     /* 1023.95 KiB would print as 1024.0 KiB */
		{ 1048576, "1.0 MiB" },
		{ 1072693248, "1023.0 MiB" },
		{ 1073741824, "1.0 GiB" },
		{ 1099511627776ULL, "1.0 TiB" },
		{ 1125899906842624ULL, "1.0 PiB" },
		{ 1152921504606846976ULL, "1.0 EiB" },
		{ UINT64_MAX, "16.0 EiB" },
	};
	char buf[TD_CTL_FMT_LEN];
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		const char *r = td_ctl_fmt_size(cases[i].bytes, buf, sizeof(buf));

		assert_ptr_equal(r, buf);
		assert_string_equal(buf, cases[i].text);
	}
}

static void test_fmt_size_truncates_like_snprintf(void **state)
{
	char buf[4];

	(void)state;
	td_ctl_fmt_size(1073741824, buf, sizeof(buf));
	assert_string_equal(buf, "1.0");
	memset(buf, 'x', sizeof(buf));
	td_ctl_fmt_size(1073741824, buf, 1);
	assert_string_equal(buf, "");
	assert_int_equal(buf[1], 'x');
}

/* Rates are binary, as sizes are (tagdiskctl.8, OUTPUT: never kB under a KiB label). */
static void test_fmt_rate_uses_binary_units_and_three_significant_digits(void **state)
{
	static const struct {
		double rate;
		const char *text;
	} cases[] = {
		{ 0, "0 B/s" },
		{ 999, "999 B/s" },
		{ 999.4, "999 B/s" },
		{ 1000, "1000 B/s" },
		{ 1023.4, "1023 B/s" },
		{ 1023.5, "1.00 KiB/s" },
		{ 1024, "1.00 KiB/s" },
		{ 10229, "9.99 KiB/s" },
		{ 10235, "10.0 KiB/s" },
		{ 12345, "12.1 KiB/s" },
		{ 102348, "99.9 KiB/s" },
		{ 102350, "100 KiB/s" },
		{ 123456, "121 KiB/s" },
		{ 1023487, "999 KiB/s" },
		{ 1023999, "1000 KiB/s" },
		{ 1048063, "1023 KiB/s" },
		{ 1048064, "1.00 MiB/s" },
		{ 1644167, "1.57 MiB/s" },
		{ 1.23e9, "1.15 GiB/s" },
		{ 4.5e12, "4.09 TiB/s" },
		{ 7e15, "6.22 PiB/s" },
		{ 2e18, "1.73 EiB/s" },
		{ 1e21, "867 EiB/s" },
		{ 1e22, "8674 EiB/s" },
	};
	char buf[TD_CTL_FMT_LEN];
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		td_ctl_fmt_rate(cases[i].rate, buf, sizeof(buf));
		if (strcmp(buf, cases[i].text) != 0)
			fail_msg("rate %g: got \"%s\", expected \"%s\"", cases[i].rate, buf,
				 cases[i].text);
	}
}

static void test_fmt_rate_shows_dash_for_negative_or_non_finite(void **state)
{
	char buf[TD_CTL_FMT_LEN];

	(void)state;
	assert_string_equal(td_ctl_fmt_rate(-1, buf, sizeof(buf)), "-");
	assert_string_equal(td_ctl_fmt_rate(NAN, buf, sizeof(buf)), "-");
	assert_string_equal(td_ctl_fmt_rate(INFINITY, buf, sizeof(buf)), "-");
}

static void test_fmt_latency_moves_to_ms_and_s_after_rounding(void **state)
{
	static const struct {
		uint64_t us;
		const char *text;
	} cases[] = {
		{ 0, "0 us" },
		{ 85, "85 us" },
		{ 999, "999 us" },
		{ 1000, "1.00 ms" },
		{ 1200, "1.20 ms" },
		{ 9994, "9.99 ms" },
		{ 9996, "10.0 ms" },
		{ 12345, "12.3 ms" },
		{ 123456, "123 ms" },
		{ 999499, "999 ms" },
		{ 999500, "1.00 s" },
		{ 999999, "1.00 s" },
		{ 1234567, "1.23 s" },
		{ 12345678, "12.3 s" },
		{ 999000000, "999 s" },
		{ 999500000, "1000 s" },
		{ 4567000000ULL, "4567 s" },
	};
	char buf[TD_CTL_FMT_LEN];
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		td_ctl_fmt_latency(cases[i].us, buf, sizeof(buf));
		if (strcmp(buf, cases[i].text) != 0)
			fail_msg("%llu us: got \"%s\", expected \"%s\"",
				 (unsigned long long)cases[i].us, buf, cases[i].text);
	}
}

static void test_fmt_duration_drops_leading_zero_units(void **state)
{
	static const struct {
		uint64_t s;
		const char *text;
	} cases[] = {
		{ 0, "0s" },
		{ 59, "59s" },
		{ 60, "1m 00s" },
		{ 3599, "59m 59s" },
		{ 3600, "1h 00m 00s" },
		{ 7390, "2h 03m 10s" },
		{ 86399, "23h 59m 59s" },
		{ 86400, "1d 00h 00m 00s" },
		{ 259207, "3d 00h 00m 07s" },
		{ 400 * 86400ULL + 3661, "400d 01h 01m 01s" },
	};
	char buf[TD_CTL_FMT_LEN];
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++)
		assert_string_equal(td_ctl_fmt_duration(cases[i].s, buf, sizeof(buf)),
				    cases[i].text);
}

/* Render @t with @indent, compare with @expected, free both. */
static void assert_table(struct td_ctl_table *t, const char *indent, const char *expected)
{
	char *text = td_ctl_table_render(t, indent);

	assert_non_null(text);
	assert_string_equal(text, expected);
	free(text);
	td_ctl_table_free(t);
}

static void test_table_aligns_columns_and_trims_trailing_spaces(void **state)
{
	static const struct td_ctl_column cols[] = {
		{ "TAG", TD_CTL_RIGHT },
		{ "OP", TD_CTL_LEFT },
		{ "SECTOR", TD_CTL_RIGHT },
		{ "CDB", TD_CTL_LEFT },
	};
	struct td_ctl_table *t = td_ctl_table_create(cols, TD_ARRAY_SIZE(cols));

	(void)state;
	assert_non_null(t);
	assert_int_equal(td_ctl_table_add(t, "%d", 5), 0);
	assert_int_equal(td_ctl_table_add(t, "write"), 0);
	assert_int_equal(td_ctl_table_add(t, "%llu", 2048ULL), 0);
	assert_int_equal(td_ctl_table_add(t, "2a 00"), 0);
	assert_int_equal(td_ctl_table_add(t, "%d", 17), 0);
	assert_int_equal(td_ctl_table_add(t, "read"), 0);
	assert_int_equal(td_ctl_table_add(t, "%d", 123456789), 0);
	assert_int_equal(td_ctl_table_add(t, "%s", ""), 0);
	assert_int_equal(td_ctl_table_rows(t), 2);
	assert_table(t, "",
		     "TAG  OP        SECTOR  CDB\n"
		     "  5  write       2048  2a 00\n"
		     " 17  read   123456789\n");
}

static void test_table_without_titles_has_no_header_and_takes_indent(void **state)
{
	static const struct td_ctl_column cols[] = {
		{ NULL, TD_CTL_LEFT },
		{ NULL, TD_CTL_LEFT },
	};
	struct td_ctl_table *t = td_ctl_table_create(cols, TD_ARRAY_SIZE(cols));

	(void)state;
	assert_non_null(t);
	td_ctl_table_add(t, "deferred");
	td_ctl_table_add(t, "11");
	td_ctl_table_add(t, "retries exhausted");
	td_ctl_table_add(t, "0");
	assert_table(t, "  ",
		     "  deferred           11\n"
		     "  retries exhausted  0\n");
}

static void test_table_counts_utf8_characters_not_bytes(void **state)
{
	static const struct td_ctl_column cols[] = {
		{ "A", TD_CTL_RIGHT },
		{ "B", TD_CTL_LEFT },
	};
	struct td_ctl_table *t = td_ctl_table_create(cols, TD_ARRAY_SIZE(cols));

	(void)state;
	assert_non_null(t);
	td_ctl_table_add(t, "85 \xc2\xb5s"); /* "85 µs": 5 characters, 6 bytes */
	td_ctl_table_add(t, "x");
	td_ctl_table_add(t, "1 ms");
	td_ctl_table_add(t, "y");
	assert_table(t, "",
		     "    A  B\n"
		     "85 \xc2\xb5s  x\n"
		     " 1 ms  y\n");
}

static void test_table_pads_a_partial_last_row_with_empty_cells(void **state)
{
	static const struct td_ctl_column cols[] = {
		{ "K", TD_CTL_LEFT },
		{ "V", TD_CTL_RIGHT },
		{ "W", TD_CTL_RIGHT },
	};
	struct td_ctl_table *t = td_ctl_table_create(cols, TD_ARRAY_SIZE(cols));

	(void)state;
	assert_non_null(t);
	td_ctl_table_add(t, "a");
	td_ctl_table_add(t, "1");
	td_ctl_table_add(t, "22");
	td_ctl_table_add(t, "bbb");
	td_ctl_table_add(t, "3");
	assert_int_equal(td_ctl_table_rows(t), 2);
	assert_table(t, "",
		     "K    V   W\n"
		     "a    1  22\n"
		     "bbb  3\n");
}

static void test_table_grows_past_its_first_allocation(void **state)
{
	static const struct td_ctl_column cols[] = {
		{ "N", TD_CTL_RIGHT },
	};
	struct td_ctl_table *t = td_ctl_table_create(cols, TD_ARRAY_SIZE(cols));
	char expected[16 + 1000 * 5];
	size_t o;
	int i;

	(void)state;
	assert_non_null(t);
	o = (size_t)sprintf(expected, "  N\n");
	for (i = 0; i < 1000; i++) {
		assert_int_equal(td_ctl_table_add(t, "%d", i), 0);
		o += (size_t)sprintf(expected + o, "%3d\n", i);
	}
	assert_int_equal(td_ctl_table_rows(t), 1000);
	assert_table(t, "", expected);
}

static void test_table_empty_renders_header_only_or_nothing(void **state)
{
	static const struct td_ctl_column titled[] = {
		{ "OP", TD_CTL_LEFT },
		{ "COUNT", TD_CTL_RIGHT },
	};
	static const struct td_ctl_column bare[] = {
		{ NULL, TD_CTL_LEFT },
	};
	struct td_ctl_table *t;

	(void)state;
	t = td_ctl_table_create(titled, TD_ARRAY_SIZE(titled));
	assert_non_null(t);
	assert_int_equal(td_ctl_table_rows(t), 0);
	assert_table(t, "", "OP  COUNT\n");
	t = td_ctl_table_create(bare, TD_ARRAY_SIZE(bare));
	assert_non_null(t);
	assert_table(t, "  ", "");
}

static void test_table_create_rejects_zero_columns_and_free_accepts_null(void **state)
{
	static const struct td_ctl_column cols[] = {
		{ "X", TD_CTL_LEFT },
	};

	(void)state;
	assert_null(td_ctl_table_create(cols, 0));
	td_ctl_table_free(NULL);
}

static const struct td_ctl_iostat_sample sample1 = {
	.uptime_us = 10000000,
	.stat = { 100, 10, 800, 50, 200, 20, 3200, 400, 2, 5000, 6000, 5, 1, 80, 3, 7, 14 },
};
static const struct td_ctl_iostat_sample sample2 = {
	.uptime_us = 12000000,
	.stat = { 150, 12, 1800, 80, 260, 26, 4400, 580, 1, 6500, 9000, 5, 1, 80, 3, 7, 14 },
};

static void test_iostat_first_row_covers_the_uptime(void **state)
{
	struct td_ctl_iostat io;

	(void)state;
	td_ctl_iostat_compute(NULL, &sample1, &io);
	assert_near(io.interval_s, 10);
	assert_near(io.r_s, 10);
	assert_near(io.w_s, 20);
	assert_near(io.rkib_s, 40);	/* 800 sectors = 400 KiB over 10 s */
	assert_near(io.wkib_s, 160);
	assert_near(io.rrqm_s, 1);
	assert_near(io.wrqm_s, 2);
	assert_near(io.r_await_ms, 0.5); /* 50 ms over 100 reads */
	assert_near(io.w_await_ms, 2);
	assert_near(io.aqu_sz, 0.6);	/* 6000 ms in queue over 10000 ms */
	assert_near(io.util_pct, 50);	/* 5000 ms busy over 10000 ms */
}

static void test_iostat_interval_row_uses_deltas(void **state)
{
	struct td_ctl_iostat io;

	(void)state;
	td_ctl_iostat_compute(&sample1, &sample2, &io);
	assert_near(io.interval_s, 2);
	assert_near(io.r_s, 25);
	assert_near(io.w_s, 30);
	assert_near(io.rkib_s, 250);
	assert_near(io.wkib_s, 300);
	assert_near(io.rrqm_s, 1);
	assert_near(io.wrqm_s, 3);
	assert_near(io.r_await_ms, 0.6);
	assert_near(io.w_await_ms, 3);
	assert_near(io.aqu_sz, 1.5);
	assert_near(io.util_pct, 75);
}

static void test_iostat_clamps_util_and_zeroes_await_without_io(void **state)
{
	struct td_ctl_iostat_sample s3 = sample2;
	struct td_ctl_iostat io;

	(void)state;
	s3.uptime_us += 1000000;
	s3.stat[TD_CTL_IO_TICKS_MS] += 1200; /* more busy time than wall time */
	s3.stat[TD_CTL_WRITES] += 1;
	s3.stat[TD_CTL_WRITE_TICKS_MS] += 10;
	td_ctl_iostat_compute(&sample2, &s3, &io);
	assert_near(io.util_pct, 100);
	assert_near(io.r_s, 0);
	assert_near(io.r_await_ms, 0);
	assert_near(io.w_s, 1);
	assert_near(io.w_await_ms, 10);
}

static void test_iostat_counter_going_back_counts_as_no_change(void **state)
{
	struct td_ctl_iostat_sample later = sample1;
	struct td_ctl_iostat io;

	(void)state;
	later.uptime_us = sample2.uptime_us;
	later.stat[TD_CTL_READS] = 150;
	td_ctl_iostat_compute(&sample2, &later, &io);
	assert_near(io.interval_s, 0); /* same uptime: nothing to divide by */
	later.uptime_us = sample2.uptime_us + 1000000;
	td_ctl_iostat_compute(&sample2, &later, &io);
	assert_near(io.interval_s, 1);
	assert_near(io.r_s, 0);
	assert_near(io.w_s, 0);	    /* 200 < 260: went back */
	assert_near(io.util_pct, 0);
}

static void test_iostat_empty_interval_gives_zeros(void **state)
{
	struct td_ctl_iostat io;

	(void)state;
	memset(&io, 0xff, sizeof(io));
	td_ctl_iostat_compute(&sample2, &sample2, &io);
	assert_near(io.interval_s, 0);
	assert_near(io.r_s, 0);
	assert_near(io.aqu_sz, 0);
	assert_near(io.util_pct, 0);
}

static void test_op_letters_per_table(void **state)
{
	(void)state;
	assert_string_equal(td_ctl_op_letters("read", false), "R");
	assert_string_equal(td_ctl_op_letters("read", true), "R");
	assert_string_equal(td_ctl_op_letters("write", false), "W");
	/* blkparse's RWBS for the records trace -o writes: FUA is F after W, a flush F then N. */
	assert_string_equal(td_ctl_op_letters("write", true), "WF");
	assert_string_equal(td_ctl_op_letters("flush", false), "FN");
	assert_string_equal(td_ctl_op_letters("discard", false), "D");
	assert_string_equal(td_ctl_op_letters("write_zeroes", false), "Z");
	assert_string_equal(td_ctl_op_letters("writ", false), "?");
	assert_string_equal(td_ctl_op_letters("", false), "?");
}

#define T0 1000000000000ULL

static void test_fmt_event_lines_per_table(void **state)
{
	static const struct {
		struct td_ctl_event ev;
		const char *line;
	} cases[] = {
		{ { T0, 4321, 'Q', "write", false, 2048, 8, -1, 0 },
		  "  0.000000  4321  Q  W  2048 + 8 [tag -]" },
		{ { T0 + 1234567890, 4321, 'D', "write", false, 2048, 8, 5, 0 },
		  "  1.234567  4321  D  W  2048 + 8 [tag 5]" },
		{ { T0 + 1300000999, 4321, 'C', "write", false, 2048, 8, 5, -5 },
		  "  1.300000  4321  C  W  2048 + 8 [tag 5] err -5" },
		{ { T0 + 2000, 7, 'C', "read", false, 0, 1, 0, 0 },
		  "  0.000002     7  C  R  0 + 1 [tag 0]" },
		{ { T0, 77, 'Q', "write", true, 0, 1, -1, 0 },
		  "  0.000000    77  Q  WF 0 + 1 [tag -]" },
		{ { T0 + 12000001000ULL, 77, 'D', "flush", false, 0, 0, 0, 0 },
		  " 12.000001    77  D  FN 0 + 0 [tag 0]" },
		{ { T0 + 5, 1, 'R', "discard", false, 4096, 2048, 31, 0 },
		  "  0.000000     1  R  D  4096 + 2048 [tag 31]" },
		{ { T0 + 123456789012ULL, 123456, 'M', "write_zeroes", false, 8, 16, -1, 0 },
		  "123.456789 123456  M  Z  8 + 16 [tag -]" },
		/* Only C shows an error; R with an error value shows none. */
		{ { T0, 1, 'R', "read", false, 1, 1, 3, -5 },
		  "  0.000000     1  R  R  1 + 1 [tag 3]" },
		{ { T0 - 1000, 1, 'I', "read", false, 1, 1, -1, 0 },
		  " -0.000001     1  I  R  1 + 1 [tag -]" },
		{ { T0, 1, '\n', "bogus", false, 1, 1, -1, 0 },
		  "  0.000000     1  ?  ?  1 + 1 [tag -]" },
	};
	char buf[TD_CTL_EVENT_LEN];
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		const char *r = td_ctl_fmt_event(&cases[i].ev, T0, buf, sizeof(buf));

		assert_ptr_equal(r, buf);
		if (strcmp(buf, cases[i].line) != 0)
			fail_msg("case %zu: got \"%s\", expected \"%s\"", i, buf, cases[i].line);
	}
}

static void test_fmt_event_longest_fields_fit_event_len(void **state)
{
	const struct td_ctl_event ev = {
		.time_ns = UINT64_MAX, .pid = INT64_MIN, .action = 'C', .op = "write_zeroes",
		.sector = UINT64_MAX, .sectors = UINT64_MAX, .tag = INT64_MAX, .error = INT64_MIN,
	};
	char buf[TD_CTL_EVENT_LEN];
	char big[512];

	(void)state;
	td_ctl_fmt_event(&ev, 0, big, sizeof(big));
	td_ctl_fmt_event(&ev, 0, buf, sizeof(buf));
	assert_true(strlen(big) < sizeof(buf));
	assert_string_equal(buf, big);
	assert_string_equal(big, "18446744073.709551 -9223372036854775808  C  Z  "
				 "18446744073709551615 + 18446744073709551615 "
				 "[tag 9223372036854775807] err -9223372036854775808");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fmt_size_picks_binary_unit_with_one_decimal),
		cmocka_unit_test(test_fmt_size_truncates_like_snprintf),
		cmocka_unit_test(test_fmt_rate_uses_binary_units_and_three_significant_digits),
		cmocka_unit_test(test_fmt_rate_shows_dash_for_negative_or_non_finite),
		cmocka_unit_test(test_fmt_latency_moves_to_ms_and_s_after_rounding),
		cmocka_unit_test(test_fmt_duration_drops_leading_zero_units),
		cmocka_unit_test(test_table_aligns_columns_and_trims_trailing_spaces),
		cmocka_unit_test(test_table_without_titles_has_no_header_and_takes_indent),
		cmocka_unit_test(test_table_counts_utf8_characters_not_bytes),
		cmocka_unit_test(test_table_pads_a_partial_last_row_with_empty_cells),
		cmocka_unit_test(test_table_grows_past_its_first_allocation),
		cmocka_unit_test(test_table_empty_renders_header_only_or_nothing),
		cmocka_unit_test(test_table_create_rejects_zero_columns_and_free_accepts_null),
		cmocka_unit_test(test_iostat_first_row_covers_the_uptime),
		cmocka_unit_test(test_iostat_interval_row_uses_deltas),
		cmocka_unit_test(test_iostat_clamps_util_and_zeroes_await_without_io),
		cmocka_unit_test(test_iostat_counter_going_back_counts_as_no_change),
		cmocka_unit_test(test_iostat_empty_interval_gives_zeros),
		cmocka_unit_test(test_op_letters_per_table),
		cmocka_unit_test(test_fmt_event_lines_per_table),
		cmocka_unit_test(test_fmt_event_longest_fields_fit_event_len),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
