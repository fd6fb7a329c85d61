// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_json.c - td_json_parse() on arbitrary bytes, then the tree it built.
 *
 * The input is one document, in an exact-size heap copy without a NUL after
 * it, so a read past @len is an ASan report. A rejected document leaves a
 * message that names an offset within the input. An accepted one is walked:
 * strings and keys are NUL-terminated at their length and valid UTF-8,
 * numbers are finite and their exact integer forms agree with the double,
 * nesting stays within TD_JSON_MAX_PARSE_DEPTH, and the accessors (len,
 * index, key_at, get, path, the typed reads) agree with the tree.
 *
 * Then the tree goes back out through the writer (when it nests no deeper
 * than the writer allows) and is parsed again: the second tree must equal
 * the first, exactly for strings, keys (up to a NUL inside, which td_json_key
 * cannot write) and integers, and within the writer's six decimals for other
 * numbers. That is what tagdiskctl relies on when it reads what tagdiskd
 * wrote.
 */
#include <math.h>
#include <string.h>
#include "common/json.h"
#include "fuzz.h"

static void check_value(const struct td_json_value *v, unsigned int depth, unsigned int *max_depth);

static void check_string(const char *s, size_t len)
{
	FUZZ_CHECK(s);
	FUZZ_CHECK(s[len] == '\0');
	FUZZ_CHECK(td_utf8_valid(s, len));
}

static void check_number(const struct td_json_value *v)
{
	FUZZ_CHECK(isfinite(v->u.num.d));
	if (v->u.num.has_u64)
		FUZZ_CHECK((double)v->u.num.u64 == v->u.num.d);
	if (v->u.num.has_i64)
		FUZZ_CHECK((double)v->u.num.i64 == v->u.num.d);
	if (v->u.num.has_u64 && v->u.num.has_i64)
		FUZZ_CHECK(v->u.num.u64 == (uint64_t)v->u.num.i64);
	if (v->u.num.has_u64) {
		FUZZ_CHECK(td_json_as_u64(v, 7) == v->u.num.u64);
	} else {
		/* Converted only from an integral double within 2^53; else the default. */
		uint64_t a = td_json_as_u64(v, 7);
		uint64_t b = td_json_as_u64(v, 8);

		if (a == b)
			FUZZ_CHECK((double)a == v->u.num.d && a <= 1ULL << 53);
		else
			FUZZ_CHECK(a == 7 && b == 8);
	}
	if (v->u.num.has_i64) {
		FUZZ_CHECK(td_json_as_i64(v, 7) == v->u.num.i64);
	} else {
		int64_t a = td_json_as_i64(v, 7);
		int64_t b = td_json_as_i64(v, 8);

		if (a == b)
			FUZZ_CHECK((double)a == v->u.num.d && a <= 1LL << 53 && a >= -(1LL << 53));
		else
			FUZZ_CHECK(a == 7 && b == 8);
	}
	FUZZ_CHECK(td_json_as_double(v, 7.5) == v->u.num.d);
}

/* Typed reads of another type give their default. */
static void check_defaults(const struct td_json_value *v)
{
	static const char def[] = "default";

	if (v->type != TD_JSON_NUMBER) {
		FUZZ_CHECK(td_json_as_u64(v, 7) == 7 && td_json_as_i64(v, -7) == -7);
		FUZZ_CHECK(td_json_as_double(v, 7.5) == 7.5);
	}
	if (v->type != TD_JSON_STRING)
		FUZZ_CHECK(td_json_as_str(v, def) == def);
	if (v->type != TD_JSON_BOOL)
		FUZZ_CHECK(td_json_as_bool(v, true) && !td_json_as_bool(v, false));
	if (v->type != TD_JSON_OBJECT) {
		FUZZ_CHECK(td_json_get(v, "ok") == NULL && td_json_key_at(v, 0) == NULL);
		if (v->type != TD_JSON_ARRAY)
			FUZZ_CHECK(td_json_index(v, 0) == NULL);
	}
}

static void check_object(const struct td_json_value *v, unsigned int depth, unsigned int *max_depth)
{
	for (size_t i = 0; i < v->u.obj.len; i++) {
		const struct td_json_member *m = &v->u.obj.members[i];

		check_string(m->key, m->key_len);
		FUZZ_CHECK(td_json_key_at(v, i) == m->key);
		FUZZ_CHECK(td_json_index(v, i) == &m->value);
		/* td_json_get() finds the first member of that name. */
		if (strlen(m->key) == m->key_len) {
			size_t first = 0;

			while (strcmp(v->u.obj.members[first].key, m->key) != 0 ||
			       v->u.obj.members[first].key_len != m->key_len)
				first++;
			FUZZ_CHECK(td_json_get(v, m->key) == &v->u.obj.members[first].value);
		}
		check_value(&m->value, depth + 1, max_depth);
	}
	FUZZ_CHECK(td_json_key_at(v, v->u.obj.len) == NULL);
	FUZZ_CHECK(td_json_index(v, v->u.obj.len) == NULL);
}

static void check_value(const struct td_json_value *v, unsigned int depth, unsigned int *max_depth)
{
	check_defaults(v);
	switch (v->type) {
	case TD_JSON_NULL:
		FUZZ_CHECK(td_json_len(v) == 0);
		break;
	case TD_JSON_BOOL:
		FUZZ_CHECK(td_json_as_bool(v, !v->u.boolean) == v->u.boolean);
		break;
	case TD_JSON_NUMBER:
		check_number(v);
		break;
	case TD_JSON_STRING:
		check_string(v->u.str.ptr, v->u.str.len);
		FUZZ_CHECK(td_json_as_str(v, NULL) == v->u.str.ptr);
		FUZZ_CHECK(td_json_len(v) == v->u.str.len);
		break;
	case TD_JSON_ARRAY:
		FUZZ_CHECK(depth < TD_JSON_MAX_PARSE_DEPTH);
		*max_depth = TD_MAX(*max_depth, depth + 1);
		FUZZ_CHECK(td_json_len(v) == v->u.arr.len);
		for (size_t i = 0; i < v->u.arr.len; i++) {
			FUZZ_CHECK(td_json_index(v, i) == &v->u.arr.items[i]);
			check_value(&v->u.arr.items[i], depth + 1, max_depth);
		}
		FUZZ_CHECK(td_json_index(v, v->u.arr.len) == NULL);
		break;
	case TD_JSON_OBJECT:
		FUZZ_CHECK(depth < TD_JSON_MAX_PARSE_DEPTH);
		*max_depth = TD_MAX(*max_depth, depth + 1);
		FUZZ_CHECK(td_json_len(v) == v->u.obj.len);
		check_object(v, depth, max_depth);
		break;
	default:
		FUZZ_CHECK(!"unknown value type");
	}
}

static void write_value(struct td_json *j, const struct td_json_value *v)
{
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
		for (size_t i = 0; i < v->u.arr.len; i++)
			write_value(j, &v->u.arr.items[i]);
		td_json_arr_end(j);
		break;
	case TD_JSON_OBJECT:
		td_json_obj_begin(j);
		for (size_t i = 0; i < v->u.obj.len; i++) {
			td_json_key(j, v->u.obj.members[i].key);
			write_value(j, &v->u.obj.members[i].value);
		}
		td_json_obj_end(j);
		break;
	}
}

static bool same_number(const struct td_json_value *a, const struct td_json_value *b)
{
	double da = a->u.num.d;
	double db = b->u.num.d;

	if (a->u.num.has_u64)
		return b->u.num.has_u64 && a->u.num.u64 == b->u.num.u64;
	if (a->u.num.has_i64)
		return b->u.num.has_i64 && a->u.num.i64 == b->u.num.i64;
	/* Six decimals in fixed notation, six significant digits otherwise. */
	return fabs(da - db) <= 1e-6 + 1e-5 * fabs(da);
}

static bool same_value(const struct td_json_value *a, const struct td_json_value *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case TD_JSON_NULL:
		return true;
	case TD_JSON_BOOL:
		return a->u.boolean == b->u.boolean;
	case TD_JSON_NUMBER:
		return same_number(a, b);
	case TD_JSON_STRING:
		return a->u.str.len == b->u.str.len &&
		       memcmp(a->u.str.ptr, b->u.str.ptr, a->u.str.len) == 0;
	case TD_JSON_ARRAY:
		if (a->u.arr.len != b->u.arr.len)
			return false;
		for (size_t i = 0; i < a->u.arr.len; i++)
			if (!same_value(&a->u.arr.items[i], &b->u.arr.items[i]))
				return false;
		return true;
	case TD_JSON_OBJECT:
		if (a->u.obj.len != b->u.obj.len)
			return false;
		for (size_t i = 0; i < a->u.obj.len; i++) {
			const struct td_json_member *ma = &a->u.obj.members[i];
			const struct td_json_member *mb = &b->u.obj.members[i];

			/* The writer takes keys as C strings: a NUL inside ends them. */
			if (strlen(ma->key) != mb->key_len || strcmp(ma->key, mb->key) != 0)
				return false;
			if (!same_value(&ma->value, &mb->value))
				return false;
		}
		return true;
	}
	return false;
}

static void check_round_trip(const struct td_json_value *root)
{
	struct td_json_value *again;
	struct td_json j;
	char err[128];
	const char *text;

	td_json_init(&j);
	write_value(&j, root);
	text = td_json_cstr(&j);
	FUZZ_CHECK(text);
	again = td_json_parse(text, td_json_text_len(&j), err, sizeof(err));
	if (!again)
		fprintf(stderr, "the writer's text does not parse: %s\n%s\n", err, text);
	FUZZ_CHECK(again);
	FUZZ_CHECK(same_value(root, again));
	td_json_value_free(again);
	td_json_free(&j);
}

static void check_paths(const struct td_json_value *root)
{
	static const char *const paths[] = {
	    "ok", "error", "stats.latency.read.p99", "tags.0.sector", "0", "0.0", "1.a", "a..b",
	    "a.", ".a"};

	for (size_t i = 0; i < TD_ARRAY_SIZE(paths); i++)
		(void)td_json_as_u64(td_json_path(root, paths[i]), 0);
	FUZZ_CHECK(td_json_path(root, "") == NULL);
	FUZZ_CHECK(td_json_path(root, "a..b") == NULL);
	FUZZ_CHECK(td_json_path(root, ".a") == NULL);
	FUZZ_CHECK(td_json_path(root, "a.") == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct td_json_value *root;
	unsigned int max_depth = 0; /* most containers open at once */
	char err[96];
	char *copy;

	copy = malloc(size ? size : 1);
	FUZZ_CHECK(copy);
	memcpy(copy, data, size);
	memset(err, 0x5a, sizeof(err));
	root = td_json_parse(copy, size, err, sizeof(err));
	if (!root) {
		char *end;

		FUZZ_CHECK(fuzz_terminated(err, sizeof(err)));
		FUZZ_CHECK(strncmp(err, "offset ", 7) == 0);
		FUZZ_CHECK(strtoull(err + 7, &end, 10) <= size && end > err + 7 && *end == ':');
		free(copy);
		return 0;
	}
	FUZZ_CHECK(err[0] == '\0');
	check_value(root, 0, &max_depth);
	check_paths(root);
	/* The writer asserts past TD_JSON_MAX_DEPTH open containers. */
	if (max_depth <= TD_JSON_MAX_DEPTH)
		check_round_trip(root);
	td_json_value_free(root);
	free(copy);
	return 0;
}
