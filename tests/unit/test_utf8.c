// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_utf8.c - strict UTF-8: every boundary of RFC 3629's table, both ways,
 * and the sequence lengths the JSON writer relies on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "common/utf8.h"

#define S(lit) lit, sizeof(lit) - 1 /* a literal and its length, NULs included */

struct utf8_case {
	const char *s;
	size_t len;
	bool valid;
};

static void test_utf8_valid_per_table(void **state)
{
	static const struct utf8_case cases[] = {
		{ S(""), true },
		{ S("abc"), true },
		{ S("\0"), true },
		{ S("\x7f"), true },
		{ S("\xc2\x80"), true },	 /* U+0080 */
		{ S("\xdf\xbf"), true },	 /* U+07FF */
		{ S("\xe0\xa0\x80"), true },	 /* U+0800 */
		{ S("\xed\x9f\xbf"), true },	 /* U+D7FF */
		{ S("\xee\x80\x80"), true },	 /* U+E000 */
		{ S("\xef\xbf\xbf"), true },	 /* U+FFFF */
		{ S("\xf0\x90\x80\x80"), true }, /* U+10000 */
		{ S("\xf4\x8f\xbf\xbf"), true }, /* U+10FFFF, the maximum */
		{ S("a\xc3\xa9z\xf0\x9f\x98\x80"), true },
		{ S("\xc0\xaf"), false },	  /* overlong '/' */
		{ S("\xc1\xbf"), false },	  /* overlong */
		{ S("\xe0\x80\xaf"), false },	  /* overlong 3-byte */
		{ S("\xe0\x9f\xbf"), false },	  /* overlong U+07FF */
		{ S("\xf0\x80\x80\xaf"), false }, /* overlong 4-byte */
		{ S("\xf0\x8f\xbf\xbf"), false }, /* overlong U+FFFF */
		{ S("\xed\xa0\x80"), false },	  /* U+D800 */
		{ S("\xed\xbf\xbf"), false },	  /* U+DFFF */
		{ S("\xed\xa0\xbd\xed\xb8\x80"), false }, /* CESU-8 surrogate pair */
		{ S("\xf4\x90\x80\x80"), false }, /* U+110000 */
		{ S("\xf5\x80\x80\x80"), false },
		{ S("\xf8\x88\x80\x80\x80"), false },
		{ S("\xfe"), false },
		{ S("\xff"), false },
		{ S("\x80"), false }, /* lone continuation */
		{ S("\xbf"), false },
		{ S("\xc2"), false },	      /* truncated 2-byte */
		{ S("\xe2\x82"), false },     /* truncated 3-byte */
		{ S("\xf0\x9f\x98"), false }, /* truncated 4-byte */
		{ S("abc\xe2\x82"), false },
		{ S("\xe2\x82"
		    "A"),
		  false }, /* bad continuation */
		{ S("\xf0\x9f\x98"
		    "A"),
		  false },
		{ S("\xc2\xc2\x80"), false },
		{ "\xc2\x80", 1, false }, /* len cuts the sequence */
		{ "ab\xff", 2, true },	  /* len stops before the bad byte */
	};
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++)
		if (td_utf8_valid(cases[i].s, cases[i].len) != cases[i].valid)
			fail_msg("case %zu: expected %s", i, cases[i].valid ? "valid" : "invalid");
}

static void test_utf8_seq_gives_the_length_of_a_valid_sequence_else_0(void **state)
{
	static const struct {
		const char *s;
		size_t avail;
		size_t len;
	} cases[] = {
		{ "a", 1, 1 },
		{ "\0", 1, 1 },
		{ "\xc3\xa9", 2, 2 },
		{ "\xe2\x82\xac", 3, 3 },
		{ "\xf0\x9f\x98\x80", 4, 4 },
		{ "\xf0\x9f\x98\x80", 3, 0 }, /* not all of it may be read */
		{ "\xc3\xa9xyz", 5, 2 },      /* only the first sequence */
		{ "\x80", 1, 0 },
		{ "\xed\xa0\x80", 3, 0 },
		{ "\xff", 1, 0 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++)
		if (td_utf8_seq(cases[i].s, cases[i].avail) != cases[i].len)
			fail_msg("case %zu: got %zu, want %zu", i,
				 td_utf8_seq(cases[i].s, cases[i].avail), cases[i].len);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_utf8_valid_per_table),
		cmocka_unit_test(test_utf8_seq_gives_the_length_of_a_valid_sequence_else_0),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
