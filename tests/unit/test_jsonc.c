// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_jsonc.c - the admin protocol's JSON on json-c: the exact text of
 * lines, strings and numbers, strict reading, and the typed readers.
 *
 * The tables of expected text are the protocol's (docs/protocol.md,
 * "Encoding"): the same bytes the hand-written writer produced before json-c
 * took over, so clients see no change. Every parse goes through
 * parse_exact(), which copies the input into a heap block of exactly its
 * length, so a sanitizer build catches any read past the end.
 */
#include <float.h>
#include <ftw.h>
#include <locale.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "common/jsonc.h"
#include "common/utf8.h"

#define S(lit) lit, sizeof(lit) - 1 /* a literal and its length, NULs included */

static struct json_object *parse_exact(const char *text, size_t len)
{
	char *copy = malloc(len ? len : 1);
	struct json_object *v;

	assert_non_null(copy);
	memcpy(copy, text, len);
	v = td_jsonc_parse(copy, len);
	free(copy);
	return v;
}

/* The line of @v, which the test owns and frees. */
static void assert_line(struct json_object *v, const char *want)
{
	size_t len;
	const char *text = td_jsonc_line(v, &len);

	assert_non_null(text);
	if (strcmp(text, want) != 0)
		fail_msg("got %s, want %s", text, want);
	assert_int_equal(len, strlen(want));
	json_object_put(v);
}

/* ---- writing ---------------------------------------------------------------------------- */

static void test_line_is_compact_keeps_member_order_and_leaves_slashes(void **state)
{
	struct json_object *o = json_object_new_object();
	struct json_object *arr, *inner;

	(void)state;
	assert_true(td_jsonc_add_bool(o, "ok", true));
	assert_true(td_jsonc_add_str(o, "image", "/var/lib/td/a.img"));
	assert_true(td_jsonc_add_u64(o, "size", 67108864));
	assert_true(td_jsonc_add_i64(o, "tag", -1));
	assert_true(td_jsonc_add_null(o, "times_left"));
	assert_true(td_jsonc_add_str(o, "none", NULL));
	assert_true(td_jsonc_add_double(o, "rate", 0.1 + 0.2));
	arr = td_jsonc_add_array(o, "empty");
	assert_non_null(arr);
	arr = td_jsonc_add_array(o, "list");
	assert_true(td_jsonc_append(arr, json_object_new_uint64(1)));
	assert_true(td_jsonc_append(arr, td_jsonc_new_string(S("a/b"))));
	inner = td_jsonc_add_object(o, "inner");
	assert_non_null(td_jsonc_add_object(inner, "deeper"));
	/* A member added again keeps its place. */
	assert_true(td_jsonc_add_bool(o, "ok", false));
	assert_line(o, "{\"ok\":false,\"image\":\"/var/lib/td/a.img\",\"size\":67108864,\"tag\":-1,"
		       "\"times_left\":null,\"none\":null,\"rate\":0.3,\"empty\":[],"
		       "\"list\":[1,\"a/b\"],\"inner\":{\"deeper\":{}}}");
}

struct escape_case {
	const char *in;
	size_t len;
	const char *out;
};

static void test_strings_escape_per_table_and_invalid_bytes_become_fffd(void **state)
{
	static const struct escape_case cases[] = {
		{ S("plain"), "\"plain\"" },
		{ S("\""), "\"\\\"\"" },
		{ S("\\"), "\"\\\\\"" },
		{ S("/"), "\"/\"" },
		{ S("\b\f\n\r\t"), "\"\\b\\f\\n\\r\\t\"" },
		{ S("\x01\x1f\x0b"), "\"\\u0001\\u001f\\u000b\"" },
		{ S("\0"), "\"\\u0000\"" },
		{ S("\x7f"), "\"\x7f\"" },
		{ S(" ~"), "\" ~\"" },
		{ S("\xc3\xa9"), "\"\xc3\xa9\"" },
		{ S("\xe2\x82\xac"), "\"\xe2\x82\xac\"" },
		{ S("\xf0\x9f\x98\x80"), "\"\xf0\x9f\x98\x80\"" },
		{ S("\xf4\x8f\xbf\xbf"), "\"\xf4\x8f\xbf\xbf\"" },
		{ S("\xef\xbf\xbd"), "\"\xef\xbf\xbd\"" },
		{ S("\xff"), "\"\\ufffd\"" },
		{ S("\x80"), "\"\\ufffd\"" },
		{ S("\xc0\xaf"), "\"\\ufffd\\ufffd\"" },
		{ S("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"" },
		{ S("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"" },
		{ S("a\xe2\x82"), "\"a\\ufffd\\ufffd\"" },
		{ S("\xe2\x82"
		    "b"),
		  "\"\\ufffd\\ufffdb\"" },
		{ S("\xf0\x9f\x98"), "\"\\ufffd\\ufffd\\ufffd\"" },
		/* Around an invalid byte, json-c still escapes: quotes, slashes, controls. */
		{ S("x\"/\xffy\n\xc3\xa9\0"), "\"x\\\"/\\ufffdy\\n\xc3\xa9\\u0000\"" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		struct json_object *v = td_jsonc_new_string(cases[i].in, cases[i].len);
		const char *text;
		size_t len;

		assert_non_null(v);
		text = td_jsonc_line(v, &len);
		if (strcmp(text, cases[i].out) != 0)
			fail_msg("case %zu: got %s, want %s", i, text, cases[i].out);
		assert_true(td_utf8_valid(text, len));
		/* The string itself is kept as given. */
		assert_int_equal(json_object_get_string_len(v), cases[i].len);
		assert_memory_equal(json_object_get_string(v), cases[i].in, cases[i].len);
		json_object_put(v);
	}
}

struct double_case {
	double v;
	const char *out;
};

static void test_doubles_are_written_per_table(void **state)
{
	static const struct double_case cases[] = {
		{ 0.0, "0" },
		{ -0.0, "0" },
		{ 1.5, "1.5" },
		{ 12345.678, "12345.678" },
		{ 1e-7, "1e-7" },
		{ -3.0, "-3" },
		{ 0.1 + 0.2, "0.3" },
		{ 1e-6, "0.000001" },
		{ 0.1234567, "0.123457" },
		{ -2.5e-7, "-2.5e-7" },
		{ 123456789012345.0, "123456789012345" },
		{ 1e15, "1e15" },
		{ 1.5e20, "1.5e20" },
		{ -1.2345678e-9, "-1.23457e-9" },
		{ DBL_MAX, "1.79769e308" },
		{ 5e-324, "4.94066e-324" },
		{ NAN, "null" },
		{ INFINITY, "null" },
		{ -INFINITY, "null" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		struct json_object *o = json_object_new_object();
		char text[TD_JSONC_DOUBLE_LEN];
		char want[64];

		assert_int_equal(td_jsonc_format_double(cases[i].v, text), strlen(cases[i].out));
		if (strcmp(text, cases[i].out) != 0)
			fail_msg("case %zu (%g): got %s, want %s", i, cases[i].v, text,
				 cases[i].out);
		assert_true(td_jsonc_add_double(o, "v", cases[i].v));
		snprintf(want, sizeof(want), "{\"v\":%s}", cases[i].out);
		assert_line(o, want);
		if (!isfinite(cases[i].v))
			assert_null(td_jsonc_new_double(cases[i].v));
	}
}

/* Locales whose decimal point is a comma. */
static const char *const comma_locales[] = { "de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8",
					     "fr_FR.utf8", "de_DE", "fr_FR" };

/* Switch LC_NUMERIC to one of comma_locales[]. Return: false when none is found. */
static bool set_comma_locale(void)
{
	for (size_t i = 0; i < TD_ARRAY_SIZE(comma_locales); i++) {
		if (setlocale(LC_NUMERIC, comma_locales[i]) &&
		    strcmp(localeconv()->decimal_point, ".") != 0)
			return true;
	}
	setlocale(LC_NUMERIC, "C");
	return false;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

/* Remove the directory @dir that make_comma_locale() made. */
static void drop_comma_locale(const char *dir)
{
	if (nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS) != 0)
		print_message("# could not remove %s\n", dir);
}

/*
 * Minimal images ship only C and C.UTF-8: then compile de_DE.UTF-8 from the
 * locale sources (Debian's package "locales", which tests/deps.sh installs)
 * into the directory @dir (a mkdtemp() template), and load it from there
 * through LOCPATH, so nothing of the system changes. LOCPATH is unset again
 * at once: glibc's newlocale(), which json-c calls, leaks its copy of it.
 * Return: true when LC_NUMERIC is de_DE.UTF-8; false with @dir removed.
 */
static bool make_comma_locale(char *dir)
{
	char cmd[256];
	bool set = false;

	if (!mkdtemp(dir))
		return false;
	snprintf(cmd, sizeof(cmd), "localedef -c -i de_DE -f UTF-8 '%s/de_DE.UTF-8' >/dev/null 2>&1",
		 dir);
	if (system(cmd) == 0 && setenv("LOCPATH", dir, 1) == 0) {
		set = set_comma_locale();
		unsetenv("LOCPATH");
	}
	if (!set)
		drop_comma_locale(dir);
	return set;
}

static void test_doubles_ignore_a_comma_decimal_locale(void **state)
{
	char dir[] = "/tmp/test_jsonc.XXXXXX";
	char a[TD_JSONC_DOUBLE_LEN];
	char b[TD_JSONC_DOUBLE_LEN];
	char plain[16];
	struct json_object *v;
	bool made = false;

	(void)state;
	if (!set_comma_locale()) {
		made = make_comma_locale(dir);
		if (!made) {
			/* Counted as a skip, never as a pass: nothing was checked. */
			print_message("# no locale with a comma decimal point, and localedef could"
				      " not make de_DE.UTF-8 (install the package locales)\n");
			skip();
		}
	}
	/* The locale is in force: printf itself writes a comma now. */
	snprintf(plain, sizeof(plain), "%.1f", 1.5);
	td_jsonc_format_double(12345.678, a);
	td_jsonc_format_double(-2.5e-7, b);
	v = parse_exact(S("[1.5,2.5e-3]"));
	setlocale(LC_NUMERIC, "C");
	if (made)
		drop_comma_locale(dir);

	assert_string_equal(plain, "1,5");
	assert_string_equal(a, "12345.678");
	assert_string_equal(b, "-2.5e-7");
	assert_non_null(v);
	assert_true(td_jsonc_as_double(td_jsonc_get(v, "/0"), 0) == 1.5);
	assert_true(td_jsonc_as_double(td_jsonc_get(v, "/1"), 0) == 2.5e-3);
	json_object_put(v);
}

static void test_integers_are_exact_at_the_extremes_both_ways(void **state)
{
	struct json_object *o = json_object_new_object();
	struct json_object *v;
	size_t len;
	const char *text;

	(void)state;
	td_jsonc_add_u64(o, "u", UINT64_MAX);
	td_jsonc_add_i64(o, "i", INT64_MIN);
	td_jsonc_add_i64(o, "j", INT64_MAX);
	td_jsonc_add_u64(o, "z", 0);
	text = td_jsonc_line(o, &len);
	assert_string_equal(text, "{\"u\":18446744073709551615,\"i\":-9223372036854775808,"
				  "\"j\":9223372036854775807,\"z\":0}");
	v = parse_exact(text, len);
	assert_non_null(v);
	assert_true(td_jsonc_as_u64(td_jsonc_get(v, "/u"), 0) == UINT64_MAX);
	assert_true(td_jsonc_as_i64(td_jsonc_get(v, "/i"), 0) == INT64_MIN);
	assert_true(td_jsonc_as_i64(td_jsonc_get(v, "/j"), 0) == INT64_MAX);
	assert_true(td_jsonc_as_u64(td_jsonc_get(v, "/j"), 0) == INT64_MAX);
	/* Each where the other type cannot hold it. */
	assert_true(td_jsonc_as_i64(td_jsonc_get(v, "/u"), 7) == 7);
	assert_true(td_jsonc_as_u64(td_jsonc_get(v, "/i"), 7) == 7);
	json_object_put(v);
	json_object_put(o);
}

static void test_add_helpers_fail_on_a_missing_container_or_value(void **state)
{
	struct json_object *o = json_object_new_object();
	struct json_object *arr = json_object_new_array();

	(void)state;
	/* Under a sanitizer build, a value not freed on failure is a leak. */
	assert_false(td_jsonc_add(NULL, "k", json_object_new_uint64(1)));
	assert_false(td_jsonc_add_u64(NULL, "k", 1));
	assert_false(td_jsonc_add_str(NULL, "k", "v"));
	assert_false(td_jsonc_add_double(NULL, "k", 1.5));
	assert_false(td_jsonc_add_null(NULL, "k"));
	assert_null(td_jsonc_add_object(NULL, "k"));
	assert_null(td_jsonc_add_array(NULL, "k"));
	assert_false(td_jsonc_append(NULL, json_object_new_uint64(1)));

	assert_false(td_jsonc_add(o, "k", NULL));
	assert_false(td_jsonc_append(arr, NULL));
	assert_line(o, "{}");
	assert_line(arr, "[]");
}

/* ---- reading ---------------------------------------------------------------------------- */

struct parse_case {
	const char *text;
	size_t len;
};

static void test_parse_accepts_one_value_with_blanks_around(void **state)
{
	static const struct parse_case cases[] = {
		{ S("{\"ok\":true}") },
		{ S(" \t{\"ok\":true}\r\n ") },
		{ S("{\"a\":[1,-2.5e3,\"x\\u00e9\\ud83d\\ude00\"],\"b\":{\"c\":null},\"d\":false}") },
		{ S("[]") },
		{ S("123") }, /* a number that ends the text */
		{ S("-0.5") },
		{ S("\"\\u0000\"") },
		{ S("\"\xc3\xa9\"") },
	};
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		struct json_object *v = parse_exact(cases[i].text, cases[i].len);

		if (!v)
			fail_msg("case %zu: \"%.*s\" not parsed", i, (int)cases[i].len,
				 cases[i].text);
		json_object_put(v);
	}
}

static void test_parse_rejects_anything_but_one_value_per_table(void **state)
{
	static const struct parse_case cases[] = {
		{ S("") },
		{ S("   ") },
		{ S("{\"ok\":true}x") },
		{ S("{\"ok\":true}{}") },
		{ S("{\"ok\":true}\0") }, /* a NUL after the value */
		{ S("{\"ok\":\0true}") }, /* and inside it */
		{ S("[1,]") },
		{ S("{\"a\":01}") },
		{ S("{\"a\":tru}") },
		{ S("[1]/* c */") },
		{ S("\xef\xbb\xbf{}") },     /* a byte order mark */
		{ S("{\"a\":\"\xff\"}") },   /* not UTF-8 */
		{ S("{\"a\":\"\xc0\xaf\"}") }, /* overlong */
		{ S("{\"a\":") },
		{ S("\"open") },
	};
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		struct json_object *v = parse_exact(cases[i].text, cases[i].len);

		if (v) {
			json_object_put(v);
			fail_msg("case %zu: \"%.*s\" parsed", i, (int)cases[i].len, cases[i].text);
		}
	}
}

static void test_parse_rejects_every_truncation_of_a_document(void **state)
{
	static const char doc[] = " {\"a\":[1,-2.5e3,\"x\\u00e9\\ud83d\\ude00\"],"
				  "\"b\":{\"c\":null},\"d\":true,\"e\":false} ";
	size_t len = sizeof(doc) - 1;
	struct json_object *v;
	size_t cut;

	(void)state;
	v = parse_exact(doc, len);
	assert_non_null(v);
	json_object_put(v);
	/* Every cut before the closing brace loses part of the value. */
	for (cut = 0; cut < len - 1; cut++) {
		v = parse_exact(doc, cut);
		if (v) {
			json_object_put(v);
			fail_msg("cut at %zu parsed", cut);
		}
	}
}

static void test_parse_accepts_depth_64_and_rejects_depth_65(void **state)
{
	char text[2 * 65 + 1];

	(void)state;
	for (size_t depth = 64; depth <= 65; depth++) {
		struct json_object *v;

		memset(text, '[', depth);
		memset(text + depth, ']', depth);
		v = parse_exact(text, 2 * depth);
		if (depth == TD_JSONC_MAX_DEPTH)
			assert_non_null(v);
		else
			assert_null(v);
		json_object_put(v);
	}
}

static void test_readers_follow_pointers_and_give_the_default_otherwise(void **state)
{
	static const char doc[] = "{\"n\":5,\"neg\":-3,\"f\":1.5,\"e\":1e3,\"big\":1e300,"
				  "\"s\":\"5\",\"t\":true,\"z\":null,\"a\":[10,{\"k\":\"v\"}],"
				  "\"o\":{\"p\":{\"q\":7}}}";
	struct json_object *v = parse_exact(S(doc));

	(void)state;
	assert_non_null(v);
	assert_true(td_jsonc_as_u64(td_jsonc_get(v, "/n"), 0) == 5);
	assert_true(td_jsonc_as_i64(td_jsonc_get(v, "/neg"), 0) == -3);
	assert_true(td_jsonc_as_u64(td_jsonc_get(v, "/neg"), 9) == 9);
	assert_true(td_jsonc_as_u64(td_jsonc_get(v, "/f"), 9) == 9);  /* a fraction */
	assert_true(td_jsonc_as_u64(td_jsonc_get(v, "/e"), 0) == 1000); /* integral, exact */
	assert_true(td_jsonc_as_i64(td_jsonc_get(v, "/big"), 9) == 9); /* past 2^53 */
	assert_true(td_jsonc_as_double(td_jsonc_get(v, "/f"), 0) == 1.5);
	assert_true(td_jsonc_as_double(td_jsonc_get(v, "/n"), 0) == 5);
	/* No conversions from strings or booleans, unlike json-c's own getters. */
	assert_true(td_jsonc_as_u64(td_jsonc_get(v, "/s"), 9) == 9);
	assert_true(td_jsonc_as_u64(td_jsonc_get(v, "/t"), 9) == 9);
	assert_true(td_jsonc_as_double(td_jsonc_get(v, "/s"), -1) == -1);
	assert_string_equal(td_jsonc_as_str(td_jsonc_get(v, "/s"), "-"), "5");
	assert_string_equal(td_jsonc_as_str(td_jsonc_get(v, "/n"), "-"), "-");
	assert_true(td_jsonc_as_bool(td_jsonc_get(v, "/t"), false));
	assert_true(td_jsonc_as_bool(td_jsonc_get(v, "/n"), true));
	/* Pointers into arrays and nested objects. */
	assert_true(td_jsonc_as_u64(td_jsonc_get(v, "/a/0"), 0) == 10);
	assert_string_equal(td_jsonc_as_str(td_jsonc_get(v, "/a/1/k"), "-"), "v");
	assert_true(td_jsonc_as_u64(td_jsonc_get(v, "/o/p/q"), 0) == 7);
	assert_ptr_equal(td_jsonc_get(v, ""), v);
	/* Missing and null both read as NULL; only td_jsonc_has() tells them apart. */
	assert_null(td_jsonc_get(v, "/z"));
	assert_null(td_jsonc_get(v, "/missing"));
	assert_null(td_jsonc_get(v, "/a/2"));
	assert_null(td_jsonc_get(v, "/n/x"));
	assert_null(td_jsonc_get(NULL, "/n"));
	assert_true(td_jsonc_has(v, "/z"));
	assert_false(td_jsonc_has(v, "/missing"));
	assert_false(td_jsonc_has(NULL, ""));
	json_object_put(v);
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_random_bytes_always_give_a_line_that_parses_back(void **state)
{
	uint64_t rng = 0x0123456789abcdef;
	char in[64];

	(void)state;
	for (int iter = 0; iter < 5000; iter++) {
		size_t len = rng_next(&rng) % sizeof(in);
		struct json_object *v, *back;
		const char *text;
		size_t text_len;

		for (size_t k = 0; k < len; k++) {
			uint64_t r = rng_next(&rng);

			/* Mostly text, some controls, some high bytes. */
			in[k] = (char)((r & 3) == 0 ? r >> 8 : (r & 3) == 1 ? 0x20 + (r >> 8) % 0x5f
								 : (r >> 8) % 0x20);
		}
		v = td_jsonc_new_string(in, len);
		text = td_jsonc_line(v, &text_len);
		assert_true(td_utf8_valid(text, text_len));
		back = parse_exact(text, text_len);
		assert_true(json_object_is_type(back, json_type_string));
		if (td_utf8_valid(in, len)) {
			assert_int_equal(json_object_get_string_len(back), len);
			assert_memory_equal(json_object_get_string(back), in, len);
		}
		json_object_put(back);
		json_object_put(v);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_line_is_compact_keeps_member_order_and_leaves_slashes),
		cmocka_unit_test(test_strings_escape_per_table_and_invalid_bytes_become_fffd),
		cmocka_unit_test(test_doubles_are_written_per_table),
		cmocka_unit_test(test_doubles_ignore_a_comma_decimal_locale),
		cmocka_unit_test(test_integers_are_exact_at_the_extremes_both_ways),
		cmocka_unit_test(test_add_helpers_fail_on_a_missing_container_or_value),
		cmocka_unit_test(test_parse_accepts_one_value_with_blanks_around),
		cmocka_unit_test(test_parse_rejects_anything_but_one_value_per_table),
		cmocka_unit_test(test_parse_rejects_every_truncation_of_a_document),
		cmocka_unit_test(test_parse_accepts_depth_64_and_rejects_depth_65),
		cmocka_unit_test(test_readers_follow_pointers_and_give_the_default_otherwise),
		cmocka_unit_test(test_random_bytes_always_give_a_line_that_parses_back),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
