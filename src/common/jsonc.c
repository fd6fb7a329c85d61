// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * jsonc.c - the admin protocol's JSON on top of json-c (jsonc.h).
 *
 * Two things json-c does not do the protocol's way are done here, both
 * through json-c's own hooks:
 *
 * Doubles. json-c writes "%.17g" (0.30000000000000004, 0.0). A double made
 * by json_object_new_double_s() is written as the text it was given, so
 * td_jsonc_new_double() formats it first: printf does the decimal rounding
 * and its output is rewritten so that whatever the locale uses as a decimal
 * point becomes '.', trailing fraction zeros go, and the exponent loses its
 * '+' and leading zeros.
 *
 * Invalid UTF-8. json-c copies bytes of 0x80 and above as they are, which
 * leaves a line that is not UTF-8 when a string is not. A string holding an
 * invalid sequence gets its own serializer: each maximal valid run is
 * escaped by json-c itself (through a temporary string), each invalid byte
 * becomes \ufffd. Valid strings, nearly all of them, keep json-c's
 * serializer and cost nothing extra.
 *
 * Reading. The text is checked for strict UTF-8 first (json-c's own check
 * lets overlong forms through). json_tokener_parse_ex() needs to see where
 * the text ends to finish a number at the very end ("123"), so a parse that
 * asks for more is given a NUL byte as the end; a NUL inside the text stops
 * the tokenizer early, which the check on how far it got turns into an
 * error. json-c's strict mode still takes a few things RFC 8259 does not
 * (single-quoted strings, NaN): harmless for reading what tagdiskd wrote.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <json-c/json_pointer.h>
#include <json-c/json_tokener.h>
#include <json-c/printbuf.h>
#include "common/jsonc.h"
#include "common/utf8.h"

/*
 * 2^53: up to here every integer is a double of its own. Past it a double
 * stands for several integers, so converting one would invent digits.
 */
#define JSONC_MAX_EXACT_INT 9007199254740992.0

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* ---- writing ---------------------------------------------------------------------------- */

size_t td_jsonc_format_double(double v, char *out)
{
	double mag = fabs(v);
	bool fixed = mag >= 1e-6 && mag < 1e15;
	char tmp[64];
	const char *p = tmp;
	size_t o = 0;

	if (!isfinite(v)) {
		memcpy(out, "null", 5);
		return 4;
	}
	if (v == 0) { /* also -0.0, which would print as "-0" */
		memcpy(out, "0", 2);
		return 1;
	}
	snprintf(tmp, sizeof(tmp), fixed ? "%.6f" : "%.6g", v);
	if (*p == '-')
		out[o++] = *p++;
	while (is_digit(*p))
		out[o++] = *p++;
	if (*p && *p != 'e') {
		size_t point = o;

		out[o++] = '.';
		while (*p && *p != 'e' && !is_digit(*p))
			p++;
		while (is_digit(*p))
			out[o++] = *p++;
		while (o > point + 1 && out[o - 1] == '0')
			o--;
		if (o == point + 1)
			o = point;
	}
	if (*p == 'e') {
		out[o++] = 'e';
		p++;
		if (*p == '-')
			out[o++] = *p++;
		else if (*p == '+')
			p++;
		while (p[0] == '0' && is_digit(p[1]))
			p++;
		while (is_digit(*p))
			out[o++] = *p++;
	}
	out[o] = '\0';
	return o;
}

struct json_object *td_jsonc_new_double(double v)
{
	char text[TD_JSONC_DOUBLE_LEN];

	if (!isfinite(v))
		return NULL;
	td_jsonc_format_double(v, text);
	return json_object_new_double_s(v, text);
}

/* Append @len valid UTF-8 bytes at @s to @pb as the inside of a JSON string, escaped by json-c. */
static int append_escaped(struct printbuf *pb, const char *s, size_t len, int flags)
{
	struct json_object *part = json_object_new_string_len(s, (int)len);
	const char *text;
	size_t n;
	int ret = -1;

	if (!part)
		return -1;
	text = json_object_to_json_string_length(part, flags, &n);
	/* Without its quotes. */
	if (text && n >= 2 && printbuf_memappend(pb, text + 1, (int)(n - 2)) >= 0)
		ret = 0;
	json_object_put(part);
	return ret;
}

/* json-c's serializer for a string that holds invalid UTF-8. */
static int string_fffd_to_json(struct json_object *jso, struct printbuf *pb, int level, int flags)
{
	const char *s = json_object_get_string(jso);
	size_t len = (size_t)json_object_get_string_len(jso);
	size_t i = 0;

	(void)level;
	if (printbuf_strappend(pb, "\"") < 0)
		return -1;
	while (i < len) {
		size_t run = 0;
		size_t n;

		while (i + run < len && (n = td_utf8_seq(s + i + run, len - i - run)))
			run += n;
		if (run && append_escaped(pb, s + i, run, flags) < 0)
			return -1;
		i += run;
		if (i < len) {
			if (printbuf_strappend(pb, "\\ufffd") < 0)
				return -1;
			i++;
		}
	}
	return printbuf_strappend(pb, "\"") < 0 ? -1 : 0;
}

struct json_object *td_jsonc_new_string(const char *s, size_t len)
{
	struct json_object *v;

	if (len > INT_MAX)
		return NULL;
	v = json_object_new_string_len(s, (int)len);
	if (v && !td_utf8_valid(s, len))
		json_object_set_serializer(v, string_fffd_to_json, NULL, NULL);
	return v;
}

bool td_jsonc_add(struct json_object *obj, const char *key, struct json_object *val)
{
	if (!obj || !val || json_object_object_add(obj, key, val) < 0) {
		json_object_put(val);
		return false;
	}
	return true;
}

bool td_jsonc_add_null(struct json_object *obj, const char *key)
{
	return obj && json_object_object_add(obj, key, NULL) == 0;
}

bool td_jsonc_add_u64(struct json_object *obj, const char *key, uint64_t v)
{
	return td_jsonc_add(obj, key, json_object_new_uint64(v));
}

bool td_jsonc_add_i64(struct json_object *obj, const char *key, int64_t v)
{
	return td_jsonc_add(obj, key, json_object_new_int64(v));
}

bool td_jsonc_add_bool(struct json_object *obj, const char *key, bool v)
{
	return td_jsonc_add(obj, key, json_object_new_boolean(v));
}

bool td_jsonc_add_str(struct json_object *obj, const char *key, const char *s)
{
	if (!s)
		return td_jsonc_add_null(obj, key);
	return td_jsonc_add(obj, key, td_jsonc_new_string(s, strlen(s)));
}

bool td_jsonc_add_double(struct json_object *obj, const char *key, double v)
{
	if (!isfinite(v))
		return td_jsonc_add_null(obj, key);
	return td_jsonc_add(obj, key, td_jsonc_new_double(v));
}

struct json_object *td_jsonc_add_object(struct json_object *obj, const char *key)
{
	struct json_object *child = json_object_new_object();

	return td_jsonc_add(obj, key, child) ? child : NULL;
}

struct json_object *td_jsonc_add_array(struct json_object *obj, const char *key)
{
	struct json_object *child = json_object_new_array();

	return td_jsonc_add(obj, key, child) ? child : NULL;
}

bool td_jsonc_append(struct json_object *arr, struct json_object *val)
{
	if (!arr || !val || json_object_array_add(arr, val) < 0) {
		json_object_put(val);
		return false;
	}
	return true;
}

const char *td_jsonc_line(struct json_object *v, size_t *len)
{
	const char *text = json_object_to_json_string_length(v, TD_JSONC_LINE_FLAGS, len);

	if (!text)
		*len = 0;
	return text;
}

/* ---- reading ---------------------------------------------------------------------------- */

struct json_object *td_jsonc_parse(const char *text, size_t len)
{
	struct json_tokener *tok;
	struct json_object *v;
	size_t want = len; /* where the tokenizer must stop: the end of what it was given */

	/* JSON_TOKENER_VALIDATE_UTF8 lets overlong forms pass: check the text ourselves. */
	if (len > INT_MAX - 1 || !td_utf8_valid(text, len))
		return NULL;
	tok = json_tokener_new_ex(TD_JSONC_MAX_DEPTH);
	if (!tok)
		return NULL;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	v = json_tokener_parse_ex(tok, text, (int)len);
	if (!v && json_tokener_get_error(tok) == json_tokener_continue) {
		v = json_tokener_parse_ex(tok, "", 1);
		want = 0;
	}
	if (json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) != want) {
		json_object_put(v);
		v = NULL;
	}
	json_tokener_free(tok);
	return v;
}

struct json_object *td_jsonc_get(struct json_object *root, const char *pointer)
{
	struct json_object *v = NULL;

	if (!root || json_pointer_get(root, pointer, &v) < 0)
		return NULL;
	return v;
}

bool td_jsonc_has(struct json_object *root, const char *pointer)
{
	struct json_object *v;

	return root && json_pointer_get(root, pointer, &v) == 0;
}

/* Return: true when @v is a double that is integral and exact, its value in *@d. */
static bool exact_integral(const struct json_object *v, double *d)
{
	if (!json_object_is_type(v, json_type_double))
		return false;
	*d = json_object_get_double(v);
	return fabs(*d) <= JSONC_MAX_EXACT_INT && floor(*d) == *d;
}

uint64_t td_jsonc_as_u64(const struct json_object *v, uint64_t def)
{
	double d;

	if (json_object_is_type(v, json_type_int))
		return json_object_get_int64(v) < 0 ? def : json_object_get_uint64(v);
	if (exact_integral(v, &d) && d >= 0)
		return (uint64_t)d;
	return def;
}

int64_t td_jsonc_as_i64(const struct json_object *v, int64_t def)
{
	double d;

	if (json_object_is_type(v, json_type_int)) {
		/* json-c clamps an integer above INT64_MAX to INT64_MAX here. */
		if (json_object_get_int64(v) == INT64_MAX && json_object_get_uint64(v) > INT64_MAX)
			return def;
		return json_object_get_int64(v);
	}
	if (exact_integral(v, &d))
		return (int64_t)d;
	return def;
}

double td_jsonc_as_double(const struct json_object *v, double def)
{
	if (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double))
		return json_object_get_double(v);
	return def;
}

const char *td_jsonc_as_str(const struct json_object *v, const char *def)
{
	if (!json_object_is_type(v, json_type_string))
		return def;
	/* json-c's getter is not const-qualified but does not change the object. */
	return json_object_get_string((struct json_object *)v);
}

bool td_jsonc_as_bool(const struct json_object *v, bool def)
{
	return json_object_is_type(v, json_type_boolean) ? json_object_get_boolean(v) : def;
}
