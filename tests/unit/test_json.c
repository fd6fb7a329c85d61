// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_json.c - the admin protocol's JSON writer, reader and UTF-8 check.
 *
 * Every parse goes through parse_exact(), which copies the input into a heap
 * block of exactly its length with no NUL after it, so a sanitizer build
 * catches any read past the end. Writer misuse must abort: those cases run
 * in a forked child and the parent checks for SIGABRT.
 */
#include <float.h>
#include <locale.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "common/json.h"

#define S(lit) lit, sizeof(lit) - 1 /* a literal and its length, NULs included */

static struct td_json_value *parse_exact(const char *text, size_t len, char *err, size_t errlen)
{
	char *copy = malloc(len ? len : 1);
	struct td_json_value *v;

	assert_non_null(copy);
	memcpy(copy, text, len);
	v = td_json_parse(copy, len, err, errlen);
	free(copy);
	return v;
}

static struct td_json_value *parse_ok(const char *text, size_t len)
{
	char err[128];
	struct td_json_value *v = parse_exact(text, len, err, sizeof(err));

	if (!v)
		fail_msg("parse of \"%.*s\" failed: %s", (int)len, text, err);
	return v;
}

/* Serialize a parsed tree with the writer: exact integers as integers. */
static void dump(struct td_json *j, const struct td_json_value *v)
{
	size_t i;

	switch (v->type) {
	case TD_JSON_NULL:
		td_json_null(j);
		break;
	case TD_JSON_BOOL:
		td_json_bool(j, v->u.boolean);
		break;
	case TD_JSON_NUMBER:
		if (v->u.num.has_u64)
			td_json_u64(j, v->u.num.u64);
		else if (v->u.num.has_i64)
			td_json_i64(j, v->u.num.i64);
		else
			td_json_double(j, v->u.num.d);
		break;
	case TD_JSON_STRING:
		td_json_strn(j, v->u.str.ptr, v->u.str.len);
		break;
	case TD_JSON_ARRAY:
		td_json_arr_begin(j);
		for (i = 0; i < v->u.arr.len; i++)
			dump(j, &v->u.arr.items[i]);
		td_json_arr_end(j);
		break;
	case TD_JSON_OBJECT:
		td_json_obj_begin(j);
		for (i = 0; i < v->u.obj.len; i++) {
			/* td_json_key() takes a C string: no key dumped here holds a NUL. */
			assert_int_equal(strlen(v->u.obj.members[i].key),
					 v->u.obj.members[i].key_len);
			td_json_key(j, v->u.obj.members[i].key);
			dump(j, &v->u.obj.members[i].value);
		}
		td_json_obj_end(j);
		break;
	}
}

/* ---------------------------------------------------------------- writer */

static void test_builder_writes_nested_objects_and_arrays_exactly(void **state)
{
	struct td_json j;

	(void)state;
	td_json_init(&j);
	td_json_obj_begin(&j);
	td_json_kv_bool(&j, "ok", true);
	td_json_key(&j, "disk");
	td_json_obj_begin(&j);
	td_json_kv_str(&j, "name", "disk");
	td_json_kv_u64(&j, "size", 1073741824);
	td_json_key(&j, "tags");
	td_json_arr_begin(&j);
	td_json_obj_begin(&j);
	td_json_kv_u64(&j, "tag", 0);
	td_json_kv_u64(&j, "sectors", 8);
	td_json_obj_end(&j);
	td_json_obj_begin(&j);
	td_json_kv_u64(&j, "tag", 3);
	td_json_kv_u64(&j, "sectors", 16);
	td_json_obj_end(&j);
	td_json_arr_end(&j);
	td_json_key(&j, "empty");
	td_json_obj_begin(&j);
	td_json_obj_end(&j);
	td_json_key(&j, "none");
	td_json_arr_begin(&j);
	td_json_arr_end(&j);
	td_json_obj_end(&j);
	td_json_key(&j, "list");
	td_json_arr_begin(&j);
	td_json_arr_begin(&j);
	td_json_u64(&j, 1);
	td_json_arr_begin(&j);
	td_json_u64(&j, 2);
	td_json_arr_end(&j);
	td_json_arr_end(&j);
	td_json_obj_begin(&j);
	td_json_obj_end(&j);
	td_json_arr_end(&j);
	td_json_obj_end(&j);

	assert_false(td_json_failed(&j));
	assert_string_equal(td_json_cstr(&j),
			    "{\"ok\":true,\"disk\":{\"name\":\"disk\",\"size\":1073741824,"
			    "\"tags\":[{\"tag\":0,\"sectors\":8},{\"tag\":3,\"sectors\":16}],"
			    "\"empty\":{},\"none\":[]},\"list\":[[1,[2]],{}]}");
	assert_int_equal(td_json_text_len(&j), strlen(td_json_cstr(&j)));
	td_json_free(&j);
}

static void test_builder_writes_every_value_type_exactly(void **state)
{
	struct td_json j;

	(void)state;
	td_json_init(&j);
	td_json_arr_begin(&j);
	td_json_str(&j, "s");
	td_json_strn(&j, S("a\0b"));
	td_json_strn(&j, "cut here", 3);
	td_json_str(&j, "");
	td_json_u64(&j, UINT64_MAX);
	td_json_u64(&j, 0);
	td_json_i64(&j, INT64_MIN);
	td_json_i64(&j, -1);
	td_json_i64(&j, 0);
	td_json_i64(&j, INT64_MAX);
	td_json_double(&j, 1.5);
	td_json_bool(&j, true);
	td_json_bool(&j, false);
	td_json_null(&j);
	td_json_str(&j, NULL);
	td_json_strn(&j, NULL, 5);
	td_json_arr_end(&j);
	assert_string_equal(td_json_cstr(&j),
			    "[\"s\",\"a\\u0000b\",\"cut\",\"\",18446744073709551615,0,"
			    "-9223372036854775808,-1,0,9223372036854775807,1.5,true,false,null,"
			    "null,null]");
	td_json_free(&j);
}

static void test_builder_kv_helpers_write_key_then_value(void **state)
{
	struct td_json j;

	(void)state;
	td_json_init(&j);
	td_json_obj_begin(&j);
	td_json_kv_str(&j, "s", "v");
	td_json_kv_u64(&j, "u", 42);
	td_json_kv_i64(&j, "i", -42);
	td_json_kv_bool(&j, "b", false);
	td_json_kv_double(&j, "d", 0.25);
	td_json_kv_double(&j, "nan", NAN);
	td_json_kv_str(&j, "n", NULL);
	td_json_kv_str(&j, "k\"\n", "x");
	td_json_obj_end(&j);
	assert_string_equal(td_json_cstr(&j),
			    "{\"s\":\"v\",\"u\":42,\"i\":-42,\"b\":false,\"d\":0.25,\"nan\":null,"
			    "\"n\":null,\"k\\\"\\n\":\"x\"}");
	td_json_free(&j);
}

static void test_builder_starts_empty_and_writes_top_level_scalars(void **state)
{
	struct td_json j;

	(void)state;
	td_json_init(&j);
	assert_string_equal(td_json_cstr(&j), "");
	assert_int_equal(td_json_text_len(&j), 0);
	assert_false(td_json_failed(&j));
	td_json_i64(&j, -7);
	assert_string_equal(td_json_cstr(&j), "-7");
	assert_int_equal(td_json_text_len(&j), 2);
	td_json_reset(&j);
	td_json_str(&j, "x");
	assert_string_equal(td_json_cstr(&j), "\"x\"");
	td_json_free(&j);
	/* free leaves an initialised, empty writer */
	assert_string_equal(td_json_cstr(&j), "");
	td_json_free(&j);
}

struct escape_case {
	const char *in;
	size_t len;
	const char *out;
};

static void test_builder_escapes_strings_per_table(void **state)
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
		{ S("\xe2\x82" "b"), "\"\\ufffd\\ufffdb\"" },
		{ S("\xf0\x9f\x98"), "\"\\ufffd\\ufffd\\ufffd\"" },
		{ S("x\"\xffy\n\xc3\xa9"), "\"x\\\"\\ufffdy\\n\xc3\xa9\"" },
	};
	struct td_json j;
	size_t i;

	(void)state;
	td_json_init(&j);
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		td_json_reset(&j);
		td_json_strn(&j, cases[i].in, cases[i].len);
		if (strcmp(td_json_cstr(&j), cases[i].out) != 0)
			fail_msg("case %zu: got %s, want %s", i, td_json_cstr(&j), cases[i].out);
		assert_true(td_utf8_valid(td_json_cstr(&j), td_json_text_len(&j)));
	}
	td_json_free(&j);
}

struct double_case {
	double v;
	const char *out;
};

static void test_builder_formats_doubles_per_table(void **state)
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
	struct td_json j;
	size_t i;

	(void)state;
	td_json_init(&j);
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		td_json_reset(&j);
		td_json_double(&j, cases[i].v);
		if (strcmp(td_json_cstr(&j), cases[i].out) != 0)
			fail_msg("case %zu (%g): got %s, want %s", i, cases[i].v, td_json_cstr(&j),
				 cases[i].out);
	}
	td_json_free(&j);
}

/*
 * Switch LC_NUMERIC to an installed locale whose decimal point is not '.'.
 * Return: false when the machine has none (minimal images ship only C and
 * C.UTF-8; LOCPATH may point at one made with localedef).
 */
static bool use_comma_locale(void)
{
	static const char *const names[] = { "de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8",
					     "fr_FR.utf8", "de_DE", "fr_FR" };
	size_t i;

	for (i = 0; i < TD_ARRAY_SIZE(names); i++) {
		if (setlocale(LC_NUMERIC, names[i]) &&
		    strcmp(localeconv()->decimal_point, ".") != 0)
			return true;
	}
	setlocale(LC_NUMERIC, "C");
	return false;
}

static void test_numbers_ignore_a_comma_decimal_locale_when_installed(void **state)
{
	struct td_json_value *v;
	struct td_json j;

	(void)state;
	if (!use_comma_locale()) {
		/* cmocka's skip() reads as "not ok # SKIP", which the runner counts as failed */
		print_message("# no locale with a comma decimal point installed: nothing to check\n");
		return;
	}
	td_json_init(&j);
	td_json_arr_begin(&j);
	td_json_double(&j, 12345.678);
	td_json_double(&j, -2.5e-7);
	td_json_arr_end(&j);
	v = parse_exact(S("[1.5,2.5e-3]"), NULL, 0);
	setlocale(LC_NUMERIC, "C");

	assert_string_equal(td_json_cstr(&j), "[12345.678,-2.5e-7]");
	assert_non_null(v);
	assert_true(td_json_as_double(td_json_index(v, 0), 0) == 1.5);
	assert_true(td_json_as_double(td_json_index(v, 1), 0) == 2.5e-3);
	td_json_value_free(v);
	td_json_free(&j);
}

static void test_builder_limit_failure_is_sticky_and_hides_the_text(void **state)
{
	struct td_json j;

	(void)state;
	td_json_init(&j);
	td_json_set_limit(&j, 10);
	/* {"a":1234} is exactly 10 bytes: allowed */
	td_json_obj_begin(&j);
	td_json_kv_u64(&j, "a", 1234);
	td_json_obj_end(&j);
	assert_false(td_json_failed(&j));
	assert_string_equal(td_json_cstr(&j), "{\"a\":1234}");

	/* one byte more fails at the byte that crosses the limit, and stays failed */
	td_json_reset(&j);
	td_json_obj_begin(&j);
	td_json_kv_u64(&j, "a", 12345);
	assert_false(td_json_failed(&j));
	assert_string_equal(td_json_cstr(&j), "{\"a\":12345");
	td_json_obj_end(&j);
	assert_true(td_json_failed(&j));
	assert_null(td_json_cstr(&j));
	assert_int_equal(td_json_text_len(&j), 0);

	/* reset clears the failure but keeps the limit */
	td_json_reset(&j);
	assert_false(td_json_failed(&j));
	assert_string_equal(td_json_cstr(&j), "");
	td_json_str(&j, "0123456789");
	assert_true(td_json_failed(&j));
	td_json_reset(&j);
	td_json_str(&j, "01234567");
	assert_false(td_json_failed(&j));
	assert_string_equal(td_json_cstr(&j), "\"01234567\"");

	/* a later failure hides what was already written */
	td_json_reset(&j);
	td_json_arr_begin(&j);
	td_json_u64(&j, 1);
	assert_string_equal(td_json_cstr(&j), "[1");
	td_json_str(&j, "long enough to fail");
	td_json_arr_end(&j);
	assert_null(td_json_cstr(&j));
	td_json_free(&j);
}

static void test_builder_grows_for_long_strings(void **state)
{
	const size_t n = 100000;
	char *big = malloc(n);
	const char *out;
	struct td_json j;

	(void)state;
	assert_non_null(big);
	memset(big, 'x', n);
	big[n / 2] = '\n';
	td_json_init(&j);
	td_json_strn(&j, big, n);
	out = td_json_cstr(&j);
	assert_non_null(out);
	assert_int_equal(td_json_text_len(&j), n + 3);
	assert_int_equal(strlen(out), n + 3);
	assert_int_equal(out[0], '"');
	assert_memory_equal(out + 1, big, n / 2);
	assert_memory_equal(out + 1 + n / 2, "\\n", 2);
	assert_memory_equal(out + 3 + n / 2, big + n / 2 + 1, n - n / 2 - 1);
	assert_int_equal(out[n + 2], '"');
	td_json_free(&j);
	free(big);
}

static void test_builder_accepts_32_levels_of_nesting(void **state)
{
	char want[2 * TD_JSON_MAX_DEPTH + 1];
	struct td_json j;
	int i;

	(void)state;
	td_json_init(&j);
	for (i = 0; i < TD_JSON_MAX_DEPTH; i++) {
		td_json_arr_begin(&j);
		want[i] = '[';
		want[2 * TD_JSON_MAX_DEPTH - 1 - i] = ']';
	}
	want[2 * TD_JSON_MAX_DEPTH] = '\0';
	for (i = 0; i < TD_JSON_MAX_DEPTH; i++)
		td_json_arr_end(&j);
	assert_string_equal(td_json_cstr(&j), want);
	td_json_free(&j);
}

static void misuse_value_without_key(struct td_json *j)
{
	td_json_obj_begin(j);
	td_json_u64(j, 1);
}

static void misuse_key_in_array(struct td_json *j)
{
	td_json_arr_begin(j);
	td_json_key(j, "a");
}

static void misuse_key_at_top_level(struct td_json *j)
{
	td_json_key(j, "a");
}

static void misuse_two_keys_in_a_row(struct td_json *j)
{
	td_json_obj_begin(j);
	td_json_key(j, "a");
	td_json_key(j, "b");
}

static void misuse_end_after_dangling_key(struct td_json *j)
{
	td_json_obj_begin(j);
	td_json_key(j, "a");
	td_json_obj_end(j);
}

static void misuse_obj_end_closes_array(struct td_json *j)
{
	td_json_arr_begin(j);
	td_json_obj_end(j);
}

static void misuse_end_without_begin(struct td_json *j)
{
	td_json_arr_end(j);
}

static void misuse_33_levels(struct td_json *j)
{
	int i;

	for (i = 0; i <= TD_JSON_MAX_DEPTH; i++)
		td_json_arr_begin(j);
}

static void misuse_two_top_level_values(struct td_json *j)
{
	td_json_obj_begin(j);
	td_json_obj_end(j);
	td_json_u64(j, 1);
}

/* Return: true when @fn, run on a fresh writer in a child process, dies of SIGABRT. */
static bool aborts(void (*fn)(struct td_json *))
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct td_json j;
		int fd = open("/dev/null", O_WRONLY);

		if (fd >= 0)
			dup2(fd, STDERR_FILENO); /* the assert message is expected */
		td_json_init(&j);
		fn(&j);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static void test_builder_misuse_aborts(void **state)
{
	static void (*const cases[])(struct td_json *) = {
		misuse_value_without_key,
		misuse_key_in_array,
		misuse_key_at_top_level,
		misuse_two_keys_in_a_row,
		misuse_end_after_dangling_key,
		misuse_obj_end_closes_array,
		misuse_end_without_begin,
		misuse_33_levels,
		misuse_two_top_level_values,
	};
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++)
		if (!aborts(cases[i]))
			fail_msg("misuse case %zu did not abort", i);
}

/* ---------------------------------------------------------------- reader */

struct valid_case {
	const char *in;
	size_t len;
	const char *canon; /* the tree written back by dump() */
};

static void test_parse_accepts_valid_documents_per_table(void **state)
{
	static const struct valid_case cases[] = {
		{ S("null"), "null" },
		{ S(" true "), "true" },
		{ S("\t\r\n false\n"), "false" },
		{ S("0"), "0" },
		{ S("-0"), "0" },
		{ S("-0.0"), "0" },
		{ S("123"), "123" },
		{ S("-123"), "-123" },
		{ S("1.5"), "1.5" },
		{ S("-1.25e2"), "-125" },
		{ S("1E3"), "1000" },
		{ S("1e+2"), "100" },
		{ S("2.5e-3"), "0.0025" },
		{ S("0.5E-0"), "0.5" },
		{ S("\"\""), "\"\"" },
		{ S("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\""), "\"a\\\"b\\\\c/d\\b\\f\\n\\r\\t\"" },
		{ S("\"\\u0041\\u00e9\\u20AC\\ud83d\\ude00\""),
		  "\"A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"" },
		{ S("\"\\u0000\""), "\"\\u0000\"" },
		{ S("\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f\""),
		  "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f\"" },
		{ S("[]"), "[]" },
		{ S("{}"), "{}" },
		{ S("[ ]"), "[]" },
		{ S("{ \n}"), "{}" },
		{ S(" [ 1 , 2 ] "), "[1,2]" },
		{ S("[1,[2,[3]],{\"a\":[]}]"), "[1,[2,[3]],{\"a\":[]}]" },
		{ S("{\"a\":1,\"b\":{\"c\":[true,false,null]},\"a\":2}"),
		  "{\"a\":1,\"b\":{\"c\":[true,false,null]},\"a\":2}" },
		{ S("{\"\":0}"), "{\"\":0}" },
		{ S("{ \"k\" : \"v\" , \"n\" : -1 }"), "{\"k\":\"v\",\"n\":-1}" },
	};
	struct td_json j;
	size_t i;

	(void)state;
	td_json_init(&j);
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		struct td_json_value *v = parse_ok(cases[i].in, cases[i].len);

		td_json_reset(&j);
		dump(&j, v);
		if (strcmp(td_json_cstr(&j), cases[i].canon) != 0)
			fail_msg("case %zu: got %s, want %s", i, td_json_cstr(&j), cases[i].canon);
		td_json_value_free(v);
	}
	td_json_free(&j);
}

struct invalid_case {
	const char *in;
	size_t len;
	const char *err; /* the whole message, or its start when it ends in '*' */
};

static void test_parse_rejects_invalid_documents_per_table(void **state)
{
	static const struct invalid_case cases[] = {
		{ S(""), "offset 0: expected a value, found end of input" },
		{ S("   "), "offset 3: expected a value, found end of input" },
		{ S("[1,]"), "offset 3: expected a value, found ']'" },
		{ S("{\"a\":1,}"), "offset 7: expected a string key, found '}'" },
		{ S("[1 2]"), "offset 3: expected ',' or ']', found '2'" },
		{ S("01"), "offset 0: leading zero in number" },
		{ S("-01"), "offset 1: leading zero in number" },
		{ S("[00]"), "offset 1: leading zero in number" },
		{ S("1."), "offset 2: expected a digit after '.', found end of input" },
		{ S("1.e5"), "offset 2: expected a digit after '.', found 'e'" },
		{ S(".5"), "offset 0: expected a value, found '.'" },
		{ S("+1"), "offset 0: expected a value, found '+'" },
		{ S("1e"), "offset 2: expected a digit in the exponent, found end of input" },
		{ S("1e+"), "offset 3: expected a digit in the exponent, found end of input" },
		{ S("-"), "offset 1: expected a digit, found end of input" },
		{ S("-a"), "offset 1: expected a digit, found 'a'" },
		{ S("0x10"), "offset 1: expected end of input after the value, found 'x'" },
		{ S("1e999"), "offset 0: number out of range" },
		{ S("-1e999"), "offset 0: number out of range" },
		{ S("\"abc"), "offset 0: unterminated string" },
		{ S("[\"abc\\\"]"), "offset 1: unterminated string" },
		{ S("\"\\"), "offset 0: unterminated string" },
		{ S("\"\\x\""), "offset 1: invalid escape" },
		{ S("\"\\'\""), "offset 1: invalid escape" },
		{ S("\"\\u12G4\""), "offset 1: invalid \\u escape" },
		{ S("\"\\u123\""), "offset 1: invalid \\u escape" },
		{ S("\"ab\\ud800\""), "offset 3: lone high surrogate \\ud800" },
		{ S("\"\\udc00\""), "offset 1: lone low surrogate \\udc00" },
		{ S("\"\\ud800\\u0041\""), "offset 1: lone high surrogate \\ud800" },
		{ S("\"\\ud800\\ud800\""), "offset 1: lone high surrogate \\ud800" },
		{ S("\"\\ud800x\""), "offset 1: lone high surrogate \\ud800" },
		{ S("\"a\nb\""), "offset 2: control character 0x0a in string" },
		{ S("\"\t\""), "offset 1: control character 0x09 in string" },
		{ S("\"\0\""), "offset 1: control character 0x00 in string" },
		{ S("\"\xff\""), "offset 1: invalid UTF-8 in string" },
		{ S("\"\xc0\xaf\""), "offset 1: invalid UTF-8 in string" },
		{ S("\"ok\xed\xa0\x80\""), "offset 3: invalid UTF-8 in string" },
		{ S("\"\xe2\x82\""), "offset 1: invalid UTF-8 in string" },
		{ S("{\"\xff\":1}"), "offset 2: invalid UTF-8 in string" },
		{ S("[1] x"), "offset 4: expected end of input after the value, found 'x'" },
		{ S("{}}"), "offset 2: expected end of input after the value, found '}'" },
		{ S("1 2"), "offset 2: expected end of input after the value, found '2'" },
		{ S("[1]\0"), "offset 3: expected end of input after the value, found byte 0x00" },
		{ S("nul"), "offset 0: invalid literal, expected 'null'" },
		{ S("truth"), "offset 0: invalid literal, expected 'true'" },
		{ S("falsE"), "offset 0: invalid literal, expected 'false'" },
		{ S("truex"), "offset 4: expected end of input after the value, found 'x'" },
		{ S("NaN"), "offset 0: expected a value, found 'N'" },
		{ S("Infinity"), "offset 0: expected a value, found 'I'" },
		{ S("{\"a\" 1}"), "offset 5: expected ':' after key, found '1'" },
		{ S("{\"a\":}"), "offset 5: expected a value, found '}'" },
		{ S("{1:2}"), "offset 1: expected a string key, found '1'" },
		{ S("{'a':1}"), "offset 1: expected a string key, found '''" },
		{ S("["), "offset 1: expected a value, found end of input" },
		{ S("{\"a\":1"), "offset 6: expected ',' or '}', found end of input" },
		{ S("[1,2"), "offset 4: expected ',' or ']', found end of input" },
		{ S("/* c */ 1"), "offset 0: expected a value, found '/'" },
		{ S("\xef\xbb\xbf{}"), "offset 0: expected a value, found byte 0xef" },
		{ S("\x0c" "1"), "offset 0: expected a value, found byte 0x0c" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		char err[128];
		struct td_json_value *v = parse_exact(cases[i].in, cases[i].len, err, sizeof(err));

		if (v)
			fail_msg("case %zu: \"%.*s\" was accepted", i, (int)cases[i].len,
				 cases[i].in);
		if (strcmp(err, cases[i].err) != 0)
			fail_msg("case %zu: got \"%s\", want \"%s\"", i, err, cases[i].err);
	}
}

/* Build @n nested arrays (or objects, each {"a":...}) around 1. */
static char *nested(int n, bool objects, size_t *len)
{
	size_t cap = (size_t)n * 6 + 2;
	char *s = malloc(cap);
	size_t o = 0;
	int i;

	assert_non_null(s);
	for (i = 0; i < n; i++) {
		memcpy(s + o, objects ? "{\"a\":" : "[", objects ? 5 : 1);
		o += objects ? 5 : 1;
	}
	s[o++] = '1';
	for (i = 0; i < n; i++)
		s[o++] = objects ? '}' : ']';
	*len = o;
	return s;
}

static void test_parse_accepts_depth_64_and_rejects_depth_65(void **state)
{
	struct td_json_value *v;
	const struct td_json_value *inner;
	char err[128];
	size_t len;
	char *s;
	int i;

	(void)state;
	s = nested(64, false, &len);
	v = parse_ok(s, len);
	for (inner = v, i = 0; i < 64; i++)
		inner = td_json_index(inner, 0);
	assert_int_equal(td_json_as_u64(inner, 0), 1);
	td_json_value_free(v);
	free(s);

	s = nested(65, false, &len);
	assert_null(parse_exact(s, len, err, sizeof(err)));
	assert_string_equal(err, "offset 64: nesting deeper than 64");
	free(s);

	s = nested(64, true, &len);
	v = parse_ok(s, len);
	td_json_value_free(v);
	free(s);

	s = nested(65, true, &len);
	assert_null(parse_exact(s, len, err, sizeof(err)));
	assert_string_equal(err, "offset 320: nesting deeper than 64");
	free(s);
}

static void test_parse_keeps_extreme_integers_exact(void **state)
{
	struct td_json_value *v;

	(void)state;
	v = parse_ok(S("18446744073709551615"));
	assert_int_equal(v->type, TD_JSON_NUMBER);
	assert_true(v->u.num.has_u64);
	assert_false(v->u.num.has_i64);
	assert_true(v->u.num.u64 == UINT64_MAX);
	assert_true(td_json_as_u64(v, 0) == UINT64_MAX);
	assert_true(td_json_as_i64(v, 5) == 5);
	assert_true(v->u.num.d == 18446744073709551615.0);
	td_json_value_free(v);

	v = parse_ok(S("-9223372036854775808"));
	assert_true(v->u.num.has_i64);
	assert_false(v->u.num.has_u64);
	assert_true(v->u.num.i64 == INT64_MIN);
	assert_true(td_json_as_i64(v, 0) == INT64_MIN);
	assert_true(td_json_as_u64(v, 5) == 5);
	td_json_value_free(v);

	v = parse_ok(S("9223372036854775807"));
	assert_true(v->u.num.has_i64 && v->u.num.has_u64);
	assert_true(v->u.num.i64 == INT64_MAX);
	assert_true(v->u.num.u64 == (uint64_t)INT64_MAX);
	td_json_value_free(v);

	v = parse_ok(S("9223372036854775808"));
	assert_true(v->u.num.has_u64);
	assert_false(v->u.num.has_i64);
	assert_true(v->u.num.u64 == (uint64_t)INT64_MAX + 1);
	td_json_value_free(v);

	/* one past each end: only the double remains */
	v = parse_ok(S("18446744073709551616"));
	assert_false(v->u.num.has_u64 || v->u.num.has_i64);
	assert_true(v->u.num.d == 18446744073709551616.0);
	assert_true(td_json_as_u64(v, 7) == 7);
	td_json_value_free(v);

	v = parse_ok(S("-9223372036854775809"));
	assert_false(v->u.num.has_u64 || v->u.num.has_i64);
	assert_true(td_json_as_i64(v, 7) == 7);
	td_json_value_free(v);

	v = parse_ok(S("123456789012345678901234567890"));
	assert_false(v->u.num.has_u64 || v->u.num.has_i64);
	assert_true(v->u.num.d == 1.2345678901234568e29);
	td_json_value_free(v);
}

static void test_parse_converts_integral_doubles_only_when_exact(void **state)
{
	struct td_json_value *v;

	(void)state;
	v = parse_ok(S("[1.0,1e3,1.5,-1,1e19,1e20,-0,-2e0,0.1,1.7976931348623157e308,5e-324,1e-400,"
		       "9007199254740992.0,-9007199254740992e0,9007199254740994.0,-1.0]"));
	assert_false(td_json_index(v, 0)->u.num.has_u64);
	assert_true(td_json_as_u64(td_json_index(v, 0), 9) == 1);
	assert_true(td_json_as_u64(td_json_index(v, 1), 9) == 1000);
	assert_true(td_json_as_i64(td_json_index(v, 1), 9) == 1000);
	assert_true(td_json_as_u64(td_json_index(v, 2), 9) == 9);
	assert_true(td_json_as_i64(td_json_index(v, 2), 9) == 9);
	assert_true(td_json_as_double(td_json_index(v, 2), 9) == 1.5);
	assert_true(td_json_as_u64(td_json_index(v, 3), 9) == 9);
	assert_true(td_json_as_i64(td_json_index(v, 3), 9) == -1);
	/* past 2^53 a double cannot tell neighbouring integers apart: no conversion */
	assert_true(td_json_as_u64(td_json_index(v, 4), 9) == 9);
	assert_true(td_json_as_i64(td_json_index(v, 4), 9) == 9);
	assert_true(td_json_as_u64(td_json_index(v, 5), 9) == 9);
	assert_true(td_json_index(v, 6)->u.num.has_u64);
	assert_true(td_json_as_u64(td_json_index(v, 6), 9) == 0);
	assert_true(td_json_as_i64(td_json_index(v, 7), 9) == -2);
	assert_true(td_json_as_double(td_json_index(v, 8), 9) == 0.1);
	assert_true(td_json_as_double(td_json_index(v, 9), 0) == DBL_MAX);
	assert_true(td_json_as_double(td_json_index(v, 10), 0) == 5e-324);
	assert_true(td_json_as_double(td_json_index(v, 11), 9) == 0);
	assert_true(td_json_as_u64(td_json_index(v, 12), 9) == UINT64_C(9007199254740992));
	assert_true(td_json_as_i64(td_json_index(v, 13), 9) == -INT64_C(9007199254740992));
	assert_true(td_json_as_u64(td_json_index(v, 14), 9) == 9);
	assert_true(td_json_as_i64(td_json_index(v, 14), 9) == 9);
	assert_true(td_json_as_u64(td_json_index(v, 15), 9) == 9);
	assert_true(td_json_as_i64(td_json_index(v, 15), 9) == -1);
	td_json_value_free(v);
}

struct string_case {
	const char *in;
	size_t in_len;
	const char *want;
	size_t want_len;
};

static void test_parse_decodes_string_escapes_to_utf8(void **state)
{
	static const struct string_case cases[] = {
		{ S("\"a\\u0000b\""), S("a\0b") },
		{ S("\"\\u007f\\u0080\""), S("\x7f\xc2\x80") },
		{ S("\"\\u07ff\\u0800\""), S("\xdf\xbf\xe0\xa0\x80") },
		{ S("\"\\uD7FF\\uE000\\uFFFF\""), S("\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf") },
		{ S("\"\\ud83d\\ude00\""), S("\xf0\x9f\x98\x80") },
		{ S("\"\\uD800\\uDC00\""), S("\xf0\x90\x80\x80") },
		{ S("\"\\udbff\\udfff\""), S("\xf4\x8f\xbf\xbf") },
		{ S("\"\\\\u0041\""), S("\\u0041") },
	};
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		struct td_json_value *v = parse_ok(cases[i].in, cases[i].in_len);

		assert_int_equal(v->type, TD_JSON_STRING);
		assert_int_equal(td_json_len(v), cases[i].want_len);
		assert_memory_equal(v->u.str.ptr, cases[i].want, cases[i].want_len);
		assert_int_equal(v->u.str.ptr[cases[i].want_len], '\0');
		td_json_value_free(v);
	}
}

static void test_parse_decodes_keys_and_get_returns_first_duplicate(void **state)
{
	struct td_json_value *v;

	(void)state;
	v = parse_ok(S("{\"k\\u00e9y\":1,\"dup\":\"first\",\"x\":null,\"dup\":\"second\"}"));
	assert_int_equal(td_json_len(v), 4);
	assert_int_equal(td_json_as_u64(td_json_get(v, "k\xc3\xa9y"), 0), 1);
	assert_string_equal(td_json_as_str(td_json_get(v, "dup"), ""), "first");
	assert_string_equal(td_json_key_at(v, 3), "dup");
	assert_string_equal(td_json_as_str(td_json_index(v, 3), ""), "second");
	assert_int_equal(td_json_get(v, "x")->type, TD_JSON_NULL);
	assert_null(td_json_get(v, "missing"));
	assert_null(td_json_get(v, "du"));
	td_json_value_free(v);

	/* a key with a NUL inside is not found by its prefix */
	v = parse_ok(S("{\"a\\u0000b\":1}"));
	assert_int_equal(v->u.obj.members[0].key_len, 3);
	assert_null(td_json_get(v, "a"));
	td_json_value_free(v);
}

static void test_accessors_return_default_on_missing_or_mismatched_type(void **state)
{
	struct td_json_value *v;
	const struct td_json_value *arr;
	const struct td_json_value *num;
	const struct td_json_value *str;

	(void)state;
	v = parse_ok(S("{\"arr\":[10,\"s\",true],\"num\":3,\"str\":\"hi\",\"nul\":null}"));
	arr = td_json_get(v, "arr");
	num = td_json_get(v, "num");
	str = td_json_get(v, "str");

	assert_int_equal(td_json_len(arr), 3);
	assert_int_equal(td_json_len(v), 4);
	assert_int_equal(td_json_len(str), 2);
	assert_int_equal(td_json_len(num), 0);
	assert_int_equal(td_json_len(NULL), 0);

	assert_null(td_json_get(arr, "0"));
	assert_null(td_json_get(NULL, "arr"));
	assert_null(td_json_index(arr, 3));
	assert_null(td_json_index(num, 0));
	assert_null(td_json_index(NULL, 0));
	assert_ptr_equal(td_json_index(v, 1), num);
	assert_string_equal(td_json_key_at(v, 2), "str");
	assert_null(td_json_key_at(v, 4));
	assert_null(td_json_key_at(arr, 0));
	assert_null(td_json_key_at(NULL, 0));

	assert_int_equal(td_json_as_u64(td_json_index(arr, 0), 0), 10);
	assert_int_equal(td_json_as_u64(td_json_index(arr, 1), 77), 77);
	assert_int_equal(td_json_as_i64(str, -5), -5);
	assert_true(td_json_as_double(str, 2.5) == 2.5);
	assert_true(td_json_as_double(NULL, 2.5) == 2.5);
	assert_string_equal(td_json_as_str(num, "def"), "def");
	assert_null(td_json_as_str(NULL, NULL));
	assert_string_equal(td_json_as_str(str, NULL), "hi");
	assert_true(td_json_as_bool(td_json_index(arr, 2), false));
	assert_true(td_json_as_bool(td_json_get(v, "nul"), true));
	assert_false(td_json_as_bool(num, false));
	assert_int_equal(td_json_as_u64(td_json_get(v, "missing"), 123), 123);
	td_json_value_free(v);
	td_json_value_free(NULL);
}

static void test_path_follows_members_and_array_indexes(void **state)
{
	struct td_json_value *v;

	(void)state;
	v = parse_ok(S("{\"stats\":{\"latency\":{\"read\":{\"p50\":80,\"p99\":1234}}},"
		       "\"tags\":[{\"sector\":8},{\"sector\":16}],\"a.b\":1,\"0\":{\"x\":true}}"));
	assert_int_equal(td_json_as_u64(td_json_path(v, "stats.latency.read.p99"), 0), 1234);
	assert_int_equal(td_json_as_u64(td_json_path(v, "stats.latency.read.p50"), 0), 80);
	assert_int_equal(td_json_as_u64(td_json_path(v, "tags.1.sector"), 0), 16);
	assert_int_equal(td_json_as_u64(td_json_path(v, "tags.0.sector"), 0), 8);
	assert_ptr_equal(td_json_path(v, "stats"), td_json_get(v, "stats"));
	assert_true(td_json_as_bool(td_json_path(v, "0.x"), false));
	assert_null(td_json_path(v, "tags.2"));
	assert_null(td_json_path(v, "tags.x"));
	assert_null(td_json_path(v, "tags.-1"));
	assert_null(td_json_path(v, "tags.99999999999999999999999999"));
	assert_null(td_json_path(v, "stats..latency"));
	assert_null(td_json_path(v, ""));
	assert_null(td_json_path(v, "stats."));
	assert_null(td_json_path(v, ".stats"));
	assert_null(td_json_path(v, "a.b"));
	assert_null(td_json_path(v, "stats.latency.read.p99.x"));
	assert_null(td_json_path(v, "nope.x"));
	assert_null(td_json_path(NULL, "stats"));
	td_json_value_free(v);
}

static void test_round_trip_builder_output_parses_back_to_the_same_values(void **state)
{
	static const char odd[] = "tab\there \"q\" back\\ nul\0 \xc3\xa9 \xf0\x9f\x98\x80 \x01";
	struct td_json_value *v;
	struct td_json again;
	struct td_json j;
	const char *text;
	char *copy;
	char *esc;

	(void)state;
	td_json_init(&j);
	td_json_obj_begin(&j);
	td_json_kv_bool(&j, "ok", true);
	td_json_key(&j, "odd");
	td_json_strn(&j, odd, sizeof(odd) - 1);
	td_json_kv_u64(&j, "max", UINT64_MAX);
	td_json_kv_i64(&j, "min", INT64_MIN);
	td_json_kv_double(&j, "ratio", 12345.678);
	td_json_kv_double(&j, "tiny", 1e-7);
	td_json_key(&j, "stats");
	td_json_obj_begin(&j);
	td_json_key(&j, "latency");
	td_json_obj_begin(&j);
	td_json_key(&j, "read");
	td_json_obj_begin(&j);
	td_json_kv_u64(&j, "p99", 99);
	td_json_obj_end(&j);
	td_json_obj_end(&j);
	td_json_obj_end(&j);
	td_json_key(&j, "list");
	td_json_arr_begin(&j);
	td_json_null(&j);
	td_json_bool(&j, false);
	td_json_str(&j, "\xff");
	td_json_arr_end(&j);
	td_json_obj_end(&j);

	text = td_json_cstr(&j);
	assert_non_null(text);
	assert_null(strchr(text, '\n'));
	copy = strdup(text);
	assert_non_null(copy);
	v = parse_ok(copy, strlen(copy));

	assert_true(td_json_as_bool(td_json_get(v, "ok"), false));
	assert_int_equal(td_json_len(td_json_get(v, "odd")), sizeof(odd) - 1);
	assert_memory_equal(td_json_as_str(td_json_get(v, "odd"), ""), odd, sizeof(odd) - 1);
	assert_true(td_json_as_u64(td_json_get(v, "max"), 0) == UINT64_MAX);
	assert_true(td_json_as_i64(td_json_get(v, "min"), 0) == INT64_MIN);
	assert_true(td_json_as_double(td_json_get(v, "ratio"), 0) == 12345.678);
	assert_true(td_json_as_double(td_json_get(v, "tiny"), 0) == 1e-7);
	assert_int_equal(td_json_as_u64(td_json_path(v, "stats.latency.read.p99"), 0), 99);
	assert_int_equal(td_json_path(v, "list.0")->type, TD_JSON_NULL);
	assert_false(td_json_as_bool(td_json_path(v, "list.1"), true));
	assert_string_equal(td_json_as_str(td_json_path(v, "list.2"), ""), "\xef\xbf\xbd");

	/* Written back, the tree gives the same text, except that the replacement
	 * character, now valid UTF-8, is no longer escaped. */
	td_json_init(&again);
	dump(&again, v);
	esc = strstr(copy, "\\ufffd");
	assert_non_null(esc);
	memcpy(esc, "\xef\xbf\xbd", 3);
	memmove(esc + 3, esc + 6, strlen(esc + 6) + 1);
	assert_string_equal(td_json_cstr(&again), copy);

	td_json_free(&again);
	td_json_value_free(v);
	free(copy);
	td_json_free(&j);
}

/* xorshift64: a fixed seed makes every run see the same inputs. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Append a random Unicode scalar value, biased toward the edges of each UTF-8 length. */
static size_t put_random_scalar(uint64_t *rng, char *out)
{
	static const uint32_t edges[] = {
		0x0, 0x1f, 0x22, 0x5c, 0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xfffd, 0xffff,
		0x10000, 0x10ffff,
	};
	uint64_t r = rng_next(rng);
	uint32_t cp;
	size_t n;

	if (r % 4 == 0)
		cp = edges[(r >> 8) % TD_ARRAY_SIZE(edges)];
	else if (r % 4 == 1)
		cp = (uint32_t)(r >> 8) % 0x80;
	else
		cp = (uint32_t)(r >> 8) % 0x110000;
	if (cp >= 0xd800 && cp <= 0xdfff)
		cp = 0xfffd;
	if (cp < 0x80) {
		out[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		out[0] = (char)(0xf0 | cp >> 18);
		out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
		out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return n;
}

static void test_round_trip_random_strings_survive_unchanged(void **state)
{
	uint64_t rng = 0x9e3779b97f4a7c15;
	struct td_json j;
	char in[256];
	int iter;

	(void)state;
	td_json_init(&j);
	for (iter = 0; iter < 2000; iter++) {
		size_t nchars = rng_next(&rng) % 40;
		struct td_json_value *v;
		size_t len = 0;
		size_t k;

		for (k = 0; k < nchars; k++)
			len += put_random_scalar(&rng, in + len);
		assert_true(td_utf8_valid(in, len));
		td_json_reset(&j);
		td_json_strn(&j, in, len);
		assert_true(td_utf8_valid(td_json_cstr(&j), td_json_text_len(&j)));
		v = parse_ok(td_json_cstr(&j), td_json_text_len(&j));
		assert_int_equal(td_json_len(v), len);
		assert_memory_equal(v->u.str.ptr, in, len);
		td_json_value_free(v);
	}
	td_json_free(&j);
}

static void test_random_bytes_always_give_valid_json(void **state)
{
	uint64_t rng = 0x0123456789abcdef;
	struct td_json j;
	char in[64];
	int iter;

	(void)state;
	td_json_init(&j);
	for (iter = 0; iter < 2000; iter++) {
		size_t len = rng_next(&rng) % sizeof(in);
		struct td_json_value *v;
		size_t k;

		for (k = 0; k < len; k++)
			in[k] = (char)rng_next(&rng);
		td_json_reset(&j);
		td_json_strn(&j, in, len);
		assert_true(td_utf8_valid(td_json_cstr(&j), td_json_text_len(&j)));
		v = parse_ok(td_json_cstr(&j), td_json_text_len(&j));
		assert_int_equal(v->type, TD_JSON_STRING);
		if (td_utf8_valid(in, len)) {
			assert_int_equal(td_json_len(v), len);
			assert_memory_equal(v->u.str.ptr, in, len);
		}
		td_json_value_free(v);
	}
	td_json_free(&j);
}

static void test_parse_rejects_every_truncation_of_a_document(void **state)
{
	static const char doc[] = " {\"a\":[1,-2.5e3,\"x\\u00e9\\ud83d\\ude00\"],"
				  "\"b\":{\"c\":null},\"d\":true,\"e\":false} ";
	size_t len = sizeof(doc) - 1;
	struct td_json_value *v;
	char err[128];
	size_t cut;

	(void)state;
	v = parse_ok(doc, len);
	td_json_value_free(v);
	/* Every prefix that ends before the closing brace leaves something open. */
	for (cut = 0; cut < len - 1; cut++) {
		v = parse_exact(doc, cut, err, sizeof(err));
		if (v)
			fail_msg("prefix of %zu bytes was accepted", cut);
		assert_memory_equal(err, "offset ", 7);
	}
	v = parse_ok(doc, len - 1);
	td_json_value_free(v);
}

static void test_parse_survives_random_and_mutated_input(void **state)
{
	static const char alphabet[] = "{}[]:,\"\\/0123456789-+.eEtrufalsn \t\r\nu\xc3\xa9\xff\x01";
	static const char seed_doc[] = "{\"ok\":true,\"tags\":[{\"tag\":1,\"sector\":2048,"
				       "\"op\":\"read\"}],\"p\":1.5e-3,\"s\":\"\\u00e9\\n\"}";
	uint64_t rng = 42;
	char buf[96];
	int accepted = 0;
	int iter;

	(void)state;
	for (iter = 0; iter < 20000; iter++) {
		struct td_json_value *v;
		char err[64];
		size_t len;
		size_t k;

		if (iter % 2) {
			len = rng_next(&rng) % sizeof(buf);
			for (k = 0; k < len; k++)
				buf[k] = alphabet[rng_next(&rng) % (sizeof(alphabet) - 1)];
		} else {
			len = sizeof(seed_doc) - 1;
			memcpy(buf, seed_doc, len);
			for (k = rng_next(&rng) % 3 + 1; k > 0; k--)
				buf[rng_next(&rng) % len] = (char)rng_next(&rng);
		}
		v = parse_exact(buf, len, err, sizeof(err));
		if (v) {
			accepted++;
			td_json_value_free(v);
		} else {
			assert_memory_equal(err, "offset ", 7);
		}
	}
	/* some mutations (a digit for a digit, a letter in a string) stay valid */
	assert_true(accepted > 0);
}

static void test_parse_reads_only_len_bytes(void **state)
{
	struct td_json_value *v;

	(void)state;
	v = parse_ok("123456", 3);
	assert_int_equal(td_json_as_u64(v, 0), 123);
	td_json_value_free(v);
	v = parse_ok("[1]xyz", 3);
	assert_int_equal(td_json_len(v), 1);
	td_json_value_free(v);
	v = parse_ok("\"ab\"cd", 4);
	assert_string_equal(td_json_as_str(v, ""), "ab");
	td_json_value_free(v);
	assert_null(td_json_parse(NULL, 0, NULL, 0));
}

static void test_parse_error_message_fits_errlen_and_clears_on_success(void **state)
{
	struct td_json_value *v;
	char err[32];

	(void)state;
	memset(err, 'z', sizeof(err));
	assert_null(parse_exact(S("[1,]"), err, 8));
	assert_string_equal(err, "offset ");
	assert_int_equal(err[8], 'z');

	memset(err, 'z', sizeof(err));
	assert_null(parse_exact(S("[1,]"), err, 1));
	assert_int_equal(err[0], '\0');
	assert_int_equal(err[1], 'z');

	memset(err, 'z', sizeof(err));
	assert_null(parse_exact(S("[1,]"), err, 12));
	assert_string_equal(err, "offset 3: e");

	assert_null(parse_exact(S("[1,]"), NULL, 0));
	assert_null(parse_exact(S("[1,]"), err, 0));
	assert_int_equal(err[0], 'o');

	strcpy(err, "stale");
	v = parse_exact(S("[]"), err, sizeof(err));
	assert_non_null(v);
	assert_string_equal(err, "");
	td_json_value_free(v);
}

/* ---------------------------------------------------------------- UTF-8 */

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
		{ S("\x80"), false },		  /* lone continuation */
		{ S("\xbf"), false },
		{ S("\xc2"), false },		  /* truncated 2-byte */
		{ S("\xe2\x82"), false },	  /* truncated 3-byte */
		{ S("\xf0\x9f\x98"), false },	  /* truncated 4-byte */
		{ S("abc\xe2\x82"), false },
		{ S("\xe2\x82" "A"), false },	  /* bad continuation */
		{ S("\xf0\x9f\x98" "A"), false },
		{ S("\xc2\xc2\x80"), false },
		{ "\xc2\x80", 1, false },	  /* len cuts the sequence */
		{ "ab\xff", 2, true },		  /* len stops before the bad byte */
	};
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++)
		if (td_utf8_valid(cases[i].s, cases[i].len) != cases[i].valid)
			fail_msg("case %zu: expected %s", i, cases[i].valid ? "valid" : "invalid");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_builder_writes_nested_objects_and_arrays_exactly),
		cmocka_unit_test(test_builder_writes_every_value_type_exactly),
		cmocka_unit_test(test_builder_kv_helpers_write_key_then_value),
		cmocka_unit_test(test_builder_starts_empty_and_writes_top_level_scalars),
		cmocka_unit_test(test_builder_escapes_strings_per_table),
		cmocka_unit_test(test_builder_formats_doubles_per_table),
		cmocka_unit_test(test_numbers_ignore_a_comma_decimal_locale_when_installed),
		cmocka_unit_test(test_builder_limit_failure_is_sticky_and_hides_the_text),
		cmocka_unit_test(test_builder_grows_for_long_strings),
		cmocka_unit_test(test_builder_accepts_32_levels_of_nesting),
		cmocka_unit_test(test_builder_misuse_aborts),
		cmocka_unit_test(test_parse_accepts_valid_documents_per_table),
		cmocka_unit_test(test_parse_rejects_invalid_documents_per_table),
		cmocka_unit_test(test_parse_accepts_depth_64_and_rejects_depth_65),
		cmocka_unit_test(test_parse_keeps_extreme_integers_exact),
		cmocka_unit_test(test_parse_converts_integral_doubles_only_when_exact),
		cmocka_unit_test(test_parse_decodes_string_escapes_to_utf8),
		cmocka_unit_test(test_parse_decodes_keys_and_get_returns_first_duplicate),
		cmocka_unit_test(test_accessors_return_default_on_missing_or_mismatched_type),
		cmocka_unit_test(test_path_follows_members_and_array_indexes),
		cmocka_unit_test(test_round_trip_builder_output_parses_back_to_the_same_values),
		cmocka_unit_test(test_round_trip_random_strings_survive_unchanged),
		cmocka_unit_test(test_random_bytes_always_give_valid_json),
		cmocka_unit_test(test_parse_rejects_every_truncation_of_a_document),
		cmocka_unit_test(test_parse_survives_random_and_mutated_input),
		cmocka_unit_test(test_parse_reads_only_len_bytes),
		cmocka_unit_test(test_parse_error_message_fits_errlen_and_clears_on_success),
		cmocka_unit_test(test_utf8_valid_per_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
