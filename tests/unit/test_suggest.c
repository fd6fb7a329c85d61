// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_suggest.c - "did you mean": which names are near a mistyped word, in
 * what order, and how they are written.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "common/suggest.h"

/* tagdiskctl's commands, in its table's order. */
static const char *const commands[] = {
	"help", "status", "stats", "tags",  "reset",  "elevator", "depth",
	"inject", "powerfail", "trace", "iostat", "top",
};

struct suggest_case {
	const char *word;
	const char *text; /* "": nothing near */
};

static void test_suggest_names_the_near_commands_nearest_first(void **state)
{
	static const struct suggest_case cases[] = {
		/* prefixes, nearest (fewest missing characters) first */
		{ "stat", "\"stats\" or \"status\"" },
		{ "elev", "\"elevator\"" },
		{ "po", "\"powerfail\"" },
		/* one edit in a short word: changed, dropped, added, swapped */
		{ "tage", "\"tags\"" },
		{ "tgs", "\"tags\"" },
		{ "tpo", "\"top\"" },
		{ "tops", "\"top\"" },
		{ "stauts", "\"status\" or \"stats\"" },
		/* two edits in a longer word, and case */
		{ "elevatr", "\"elevator\"" },
		{ "injcet", "\"inject\"" },
		{ "RESET", "\"reset\"" },
		{ "Depht", "\"depth\"" },
		{ "powrfial", "\"powerfail\"" },
		/* nothing near */
		{ "frobnicate", "" },
		{ "x", "" },
		{ "zzzz", "" },
		{ "", "" },
	};
	char buf[128];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = td_suggest(cases[i].word, commands, sizeof(commands) / sizeof(commands[0]),
				      buf, sizeof(buf));

		print_message("# \"%s\" -> %s\n", cases[i].word, buf);
		assert_string_equal(buf, cases[i].text);
		assert_int_equal(n == 0, cases[i].text[0] == '\0');
	}
}

static void test_suggest_keeps_the_three_nearest(void **state)
{
	static const char *const names[] = { "abcd", "abce", "abcf", "abc", "abcg" };
	char buf[128];

	(void)state;
	/* "abc" itself (distance 0) first, then the first two of the equally near. */
	assert_int_equal(td_suggest("abc", names, 5, buf, sizeof(buf)), 3);
	assert_string_equal(buf, "\"abc\", \"abcd\" or \"abce\"");
}

static void test_suggest_long_words_and_small_buffers(void **state)
{
	static const char *const names[] = { "status" };
	char word[TD_SUGGEST_WORD_MAX + 2];
	char small[5];

	(void)state;
	memset(word, 's', sizeof(word) - 1);
	word[sizeof(word) - 1] = '\0';
	assert_int_equal(td_suggest(word, names, 1, small, sizeof(small)), 0);
	assert_string_equal(small, "");
	/* Truncated like snprintf(), still terminated. */
	assert_int_equal(td_suggest("stat", names, 1, small, sizeof(small)), 1);
	assert_string_equal(small, "\"sta");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_suggest_names_the_near_commands_nearest_first),
		cmocka_unit_test(test_suggest_keeps_the_three_nearest),
		cmocka_unit_test(test_suggest_long_words_and_small_buffers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
