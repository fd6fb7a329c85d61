// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * json.c - JSON writer and strict reader for the admin protocol.
 *
 * Writer. The text grows in one heap buffer that is kept NUL-terminated
 * after every append, so td_json_cstr() costs nothing. Comma placement needs
 * only two bits per open container: is it an object, and has it a member
 * yet. With TD_JSON_MAX_DEPTH = 32 they fit in two uint32_t masks, bit d
 * describing the container at depth d+1. Inside an object, have_key says a
 * key was written and its value is due; the key itself wrote the comma, so
 * the value writes none. Once a write fails (no memory, or past the limit)
 * every later append is dropped but the nesting state still advances, so
 * the misuse asserts keep firing exactly as they would have.
 *
 * Reader. Recursive descent over a byte range that need not be
 * NUL-terminated; recursion is bounded by TD_JSON_MAX_PARSE_DEPTH, so the
 * stack stays small whatever the input. Each parse function fills the value
 * it is given only on success and frees what it built on failure, so the
 * caller never sees a half-built node. Arrays and objects hold their
 * children by value in one array that doubles as it fills. A string is first
 * scanned for its closing quote (skipping escaped bytes) to size its buffer
 * once: decoding never makes text longer (an escape of 6 bytes yields at
 * most 3, a surrogate pair of 12 yields 4). Number literals are checked
 * against the grammar by hand, integers are accumulated exactly, and the
 * double comes from strtod in the "C" locale so a caller's setlocale() cannot
 * turn "1.5" into 1. The first error writes the message; every caller then
 * just returns false.
 */
#include <assert.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/json.h"

/* First allocation of a writer's buffer; most admin replies fit. */
#define JSON_INITIAL_CAP 256

/*
 * 2^53: up to here every integer is a double of its own. Past it a double
 * stands for several integers (an integer literal one past INT64_MIN rounds
 * to INT64_MIN), so converting it would invent digits the text did not have.
 */
#define JSON_MAX_EXACT_INT 9007199254740992.0

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/*
 * Return: the length (1 to 4) of the valid UTF-8 sequence starting at @s,
 * with @avail bytes readable, or 0 when none starts there. The ranges of the
 * second byte after E0, ED, F0 and F4 exclude overlong forms, surrogates and
 * code points past U+10FFFF.
 */
static size_t utf8_seq(const unsigned char *s, size_t avail)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80;
	unsigned char hi = 0xbf;
	size_t n;
	size_t i;

	if (c < 0x80)
		return 1;
	if (c < 0xc2)
		return 0; /* a continuation byte, or C0/C1: always overlong */
	if (c < 0xe0) {
		n = 2;
	} else if (c < 0xf0) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c < 0xf5) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (avail < n || s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

bool td_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		size_t n = utf8_seq(p + i, len - i);

		if (!n)
			return false;
		i += n;
	}
	return true;
}

/* ---------------------------------------------------------------- writer */

void td_json_init(struct td_json *j)
{
	memset(j, 0, sizeof(*j));
}

void td_json_free(struct td_json *j)
{
	free(j->buf);
	td_json_init(j);
}

void td_json_reset(struct td_json *j)
{
	size_t limit = j->limit;
	size_t cap = j->cap;
	char *buf = j->buf;

	td_json_init(j);
	j->buf = buf;
	j->cap = cap;
	j->limit = limit;
	if (buf)
		buf[0] = '\0';
}

void td_json_set_limit(struct td_json *j, size_t max_bytes)
{
	j->limit = max_bytes;
}

bool td_json_failed(const struct td_json *j)
{
	return j->failed;
}

const char *td_json_cstr(const struct td_json *j)
{
	if (j->failed)
		return NULL;
	return j->buf ? j->buf : "";
}

size_t td_json_text_len(const struct td_json *j)
{
	return j->failed ? 0 : j->len;
}

/* Make room for @extra more bytes plus the NUL. Return: false (and fail @j) when impossible. */
static bool json_reserve(struct td_json *j, size_t extra)
{
	size_t need;
	size_t cap;
	char *buf;

	if (j->failed)
		return false;
	if (extra > SIZE_MAX - 1 - j->len)
		goto out_failed;
	need = j->len + extra;
	if (j->limit && need > j->limit)
		goto out_failed;
	need++;
	if (need <= j->cap)
		return true;
	cap = j->cap ? j->cap : JSON_INITIAL_CAP;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	buf = realloc(j->buf, cap);
	if (!buf)
		goto out_failed;
	j->buf = buf;
	j->cap = cap;
	return true;

out_failed:
	j->failed = true;
	return false;
}

static void json_put(struct td_json *j, const char *s, size_t n)
{
	if (!n || !json_reserve(j, n))
		return;
	memcpy(j->buf + j->len, s, n);
	j->len += n;
	j->buf[j->len] = '\0';
}

static void json_putc(struct td_json *j, char c)
{
	json_put(j, &c, 1);
}

static bool json_top_is_obj(const struct td_json *j)
{
	return j->depth > 0 && (j->is_obj >> (j->depth - 1) & 1);
}

/* Write @len bytes at @s as a quoted, escaped string; see json.h for the rules. */
static void json_put_string(struct td_json *j, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t start = 0; /* first byte not yet copied out */
	size_t i = 0;

	json_putc(j, '"');
	while (i < len) {
		unsigned char c = p[i];
		char esc[6] = { '\\' };
		size_t esc_len = 2;

		if (c >= 0x80) {
			size_t n = utf8_seq(p + i, len - i);

			if (n) {
				i += n;
				continue;
			}
			json_put(j, s + start, i - start);
			json_put(j, "\\ufffd", 6);
			start = ++i;
			continue;
		}
		if (c >= 0x20 && c != '"' && c != '\\') {
			i++;
			continue;
		}
		switch (c) {
		case '"':
		case '\\':
			esc[1] = (char)c;
			break;
		case '\b':
			esc[1] = 'b';
			break;
		case '\f':
			esc[1] = 'f';
			break;
		case '\n':
			esc[1] = 'n';
			break;
		case '\r':
			esc[1] = 'r';
			break;
		case '\t':
			esc[1] = 't';
			break;
		default:
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 0xf];
			esc_len = 6;
			break;
		}
		json_put(j, s + start, i - start);
		json_put(j, esc, esc_len);
		start = ++i;
	}
	json_put(j, s + start, len - start);
	json_putc(j, '"');
}

/* Account for a value about to be written: check it is allowed here and place its comma. */
static void json_before_value(struct td_json *j)
{
	uint32_t bit;

	if (j->depth == 0) {
		assert(!j->done && "json: a document holds one top-level value");
		return;
	}
	bit = UINT32_C(1) << (j->depth - 1);
	if (j->is_obj & bit) {
		assert(j->have_key && "json: object member written without td_json_key()");
		j->have_key = false;
		return;
	}
	if (j->nonempty & bit)
		json_putc(j, ',');
	j->nonempty |= bit;
}

static void json_after_value(struct td_json *j)
{
	if (j->depth == 0)
		j->done = true;
}

static void json_begin(struct td_json *j, bool obj)
{
	uint32_t bit;

	json_before_value(j);
	assert(j->depth < TD_JSON_MAX_DEPTH && "json: nesting deeper than TD_JSON_MAX_DEPTH");
	bit = UINT32_C(1) << j->depth;
	if (obj)
		j->is_obj |= bit;
	else
		j->is_obj &= ~bit;
	j->nonempty &= ~bit;
	j->depth++;
	json_putc(j, obj ? '{' : '[');
}

static void json_end(struct td_json *j, bool obj)
{
	assert(j->depth > 0 && "json: end without a begin");
	assert(json_top_is_obj(j) == obj && "json: end does not match its begin");
	assert(!j->have_key && "json: key without a value");
	j->depth--;
	json_putc(j, obj ? '}' : ']');
	json_after_value(j);
}

void td_json_obj_begin(struct td_json *j)
{
	json_begin(j, true);
}

void td_json_obj_end(struct td_json *j)
{
	json_end(j, true);
}

void td_json_arr_begin(struct td_json *j)
{
	json_begin(j, false);
}

void td_json_arr_end(struct td_json *j)
{
	json_end(j, false);
}

void td_json_key(struct td_json *j, const char *name)
{
	uint32_t bit;

	assert(json_top_is_obj(j) && "json: key outside an object");
	assert(!j->have_key && "json: two keys in a row");
	bit = UINT32_C(1) << (j->depth - 1);
	if (j->nonempty & bit)
		json_putc(j, ',');
	j->nonempty |= bit;
	json_put_string(j, name, strlen(name));
	json_putc(j, ':');
	j->have_key = true;
}

/* Write an already formatted scalar token. */
static void json_token(struct td_json *j, const char *tok, size_t len)
{
	json_before_value(j);
	json_put(j, tok, len);
	json_after_value(j);
}

void td_json_strn(struct td_json *j, const char *s, size_t len)
{
	if (!s) {
		td_json_null(j);
		return;
	}
	json_before_value(j);
	json_put_string(j, s, len);
	json_after_value(j);
}

void td_json_str(struct td_json *j, const char *s)
{
	td_json_strn(j, s, s ? strlen(s) : 0);
}

/* Write @v in decimal ending just before @end. Return: where the digits start. */
static char *format_u64(uint64_t v, char *end)
{
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return end;
}

void td_json_u64(struct td_json *j, uint64_t v)
{
	char buf[24];
	char *end = buf + sizeof(buf);
	char *p = format_u64(v, end);

	json_token(j, p, (size_t)(end - p));
}

void td_json_i64(struct td_json *j, int64_t v)
{
	char buf[24];
	char *end = buf + sizeof(buf);
	/* Negate in unsigned arithmetic: -INT64_MIN does not fit an int64_t. */
	char *p = format_u64(v < 0 ? 0 - (uint64_t)v : (uint64_t)v, end);

	if (v < 0)
		*--p = '-';
	json_token(j, p, (size_t)(end - p));
}

/*
 * Format a finite @v into @out (at least 32 bytes). printf does the decimal
 * rounding; its output is then rewritten so that whatever the locale uses as
 * a decimal point becomes '.', trailing fraction zeros go, and the exponent
 * loses its '+' and leading zeros. Return: the length written.
 */
static size_t format_double(double v, char *out)
{
	double mag = v < 0 ? -v : v;
	bool fixed = mag >= 1e-6 && mag < 1e15;
	char tmp[64];
	const char *p = tmp;
	size_t o = 0;

	if (v == 0) { /* also -0.0, which would print as "-0" */
		out[0] = '0';
		return 1;
	}
	if (fixed)
		snprintf(tmp, sizeof(tmp), "%.6f", v);
	else
		snprintf(tmp, sizeof(tmp), "%.6g", v);
	if (*p == '-')
		out[o++] = *p++;
	while (is_digit((unsigned char)*p))
		out[o++] = *p++;
	if (*p && *p != 'e') {
		size_t point = o;

		out[o++] = '.';
		while (*p && *p != 'e' && !is_digit((unsigned char)*p))
			p++;
		while (is_digit((unsigned char)*p))
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
		while (p[0] == '0' && is_digit((unsigned char)p[1]))
			p++;
		while (is_digit((unsigned char)*p))
			out[o++] = *p++;
	}
	return o;
}

void td_json_double(struct td_json *j, double v)
{
	char buf[64];

	if (!isfinite(v)) {
		td_json_null(j);
		return;
	}
	json_token(j, buf, format_double(v, buf));
}

void td_json_bool(struct td_json *j, bool v)
{
	if (v)
		json_token(j, "true", 4);
	else
		json_token(j, "false", 5);
}

void td_json_null(struct td_json *j)
{
	json_token(j, "null", 4);
}

void td_json_kv_str(struct td_json *j, const char *key, const char *s)
{
	td_json_key(j, key);
	td_json_str(j, s);
}

void td_json_kv_u64(struct td_json *j, const char *key, uint64_t v)
{
	td_json_key(j, key);
	td_json_u64(j, v);
}

void td_json_kv_i64(struct td_json *j, const char *key, int64_t v)
{
	td_json_key(j, key);
	td_json_i64(j, v);
}

void td_json_kv_bool(struct td_json *j, const char *key, bool v)
{
	td_json_key(j, key);
	td_json_bool(j, v);
}

void td_json_kv_double(struct td_json *j, const char *key, double v)
{
	td_json_key(j, key);
	td_json_double(j, v);
}

/* ---------------------------------------------------------------- reader */

struct parser {
	const unsigned char *s;
	size_t len;
	size_t pos;	    /* next byte to read */
	unsigned int depth; /* containers open around pos */
	char *err;	    /* NULL when the caller wants no message */
	size_t errlen;
};

static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale; /* (locale_t)0 if newlocale failed: fall back to strtod */

static void c_locale_init(void)
{
	c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

static bool parse_fail(struct parser *p, size_t off, const char *fmt, ...) td_printf(3, 4);

/* Record the error at byte @off. Return: false, for "return parse_fail(...)". */
static bool parse_fail(struct parser *p, size_t off, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!p->err)
		return false;
	n = snprintf(p->err, p->errlen, "offset %zu: ", off);
	if (n >= 0 && (size_t)n < p->errlen) {
		va_start(ap, fmt);
		vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return false;
}

/* Report what was wanted at the current position and what was there instead. */
static bool parse_expected(struct parser *p, const char *what)
{
	unsigned char c;

	if (p->pos >= p->len)
		return parse_fail(p, p->pos, "expected %s, found end of input", what);
	c = p->s[p->pos];
	if (c > 0x20 && c < 0x7f)
		return parse_fail(p, p->pos, "expected %s, found '%c'", what, c);
	return parse_fail(p, p->pos, "expected %s, found byte 0x%02x", what, c);
}

static void parse_skip_ws(struct parser *p)
{
	while (p->pos < p->len) {
		unsigned char c = p->s[p->pos];

		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		p->pos++;
	}
}

/* Release what @v owns (not @v itself). */
static void value_clear(struct td_json_value *v)
{
	size_t i;

	switch (v->type) {
	case TD_JSON_STRING:
		free(v->u.str.ptr);
		break;
	case TD_JSON_ARRAY:
		for (i = 0; i < v->u.arr.len; i++)
			value_clear(&v->u.arr.items[i]);
		free(v->u.arr.items);
		break;
	case TD_JSON_OBJECT:
		for (i = 0; i < v->u.obj.len; i++) {
			free(v->u.obj.members[i].key);
			value_clear(&v->u.obj.members[i].value);
		}
		free(v->u.obj.members);
		break;
	case TD_JSON_NULL:
	case TD_JSON_BOOL:
	case TD_JSON_NUMBER:
		break;
	}
	v->type = TD_JSON_NULL;
}

static bool parse_value(struct parser *p, struct td_json_value *out);

/* Read 4 hex digits at @at (before @end) into @cp. */
static bool parse_hex4(const struct parser *p, size_t at, size_t end, uint32_t *cp)
{
	uint32_t v = 0;
	size_t i;

	if (end - at < 4)
		return false;
	for (i = at; i < at + 4; i++) {
		unsigned char c = p->s[i];

		v <<= 4;
		if (is_digit(c))
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return false;
	}
	*cp = v;
	return true;
}

/* Append code point @cp (a scalar value, not a surrogate) to @buf as UTF-8. Return: bytes. */
static size_t utf8_put(char *buf, uint32_t cp)
{
	if (cp < 0x80) {
		buf[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		buf[0] = (char)(0xc0 | cp >> 6);
		buf[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		buf[0] = (char)(0xe0 | cp >> 12);
		buf[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		buf[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	buf[0] = (char)(0xf0 | cp >> 18);
	buf[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	buf[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	buf[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * Decode the \u escape at @at (the backslash), which may be the first half
 * of a surrogate pair. Return: the bytes of input consumed, or 0 on error.
 */
static size_t parse_unicode_escape(struct parser *p, size_t at, size_t end, uint32_t *cp)
{
	uint32_t lo;

	if (!parse_hex4(p, at + 2, end, cp)) {
		parse_fail(p, at, "invalid \\u escape");
		return 0;
	}
	if (*cp >= 0xdc00 && *cp <= 0xdfff) {
		parse_fail(p, at, "lone low surrogate \\u%04x", *cp);
		return 0;
	}
	if (*cp < 0xd800 || *cp > 0xdbff)
		return 6;
	if (end - at < 12 || p->s[at + 6] != '\\' || p->s[at + 7] != 'u' ||
	    !parse_hex4(p, at + 8, end, &lo) || lo < 0xdc00 || lo > 0xdfff) {
		parse_fail(p, at, "lone high surrogate \\u%04x", *cp);
		return 0;
	}
	*cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
	return 12;
}

/* Parse the string whose opening quote is at p->pos into a new buffer @*out of @*out_len bytes. */
static bool parse_string(struct parser *p, char **out, size_t *out_len)
{
	size_t open = p->pos;
	size_t end;
	size_t i;
	size_t o = 0;
	char *buf;

	for (end = open + 1; end < p->len; end++) {
		if (p->s[end] == '\\')
			end++;
		else if (p->s[end] == '"')
			break;
	}
	if (end >= p->len)
		return parse_fail(p, open, "unterminated string");
	buf = malloc(end - open);
	if (!buf)
		return parse_fail(p, open, "out of memory");

	i = open + 1;
	while (i < end) {
		unsigned char c = p->s[i];
		uint32_t cp;
		size_t n;

		if (c == '\\') {
			/* i + 1 < end: the scan above skipped the escaped byte. */
			switch (p->s[i + 1]) {
			case '"':
			case '\\':
			case '/':
				buf[o++] = (char)p->s[i + 1];
				break;
			case 'b':
				buf[o++] = '\b';
				break;
			case 'f':
				buf[o++] = '\f';
				break;
			case 'n':
				buf[o++] = '\n';
				break;
			case 'r':
				buf[o++] = '\r';
				break;
			case 't':
				buf[o++] = '\t';
				break;
			case 'u':
				n = parse_unicode_escape(p, i, end, &cp);
				if (!n)
					goto out_free_buf;
				o += utf8_put(buf + o, cp);
				i += n;
				continue;
			default:
				parse_fail(p, i, "invalid escape");
				goto out_free_buf;
			}
			i += 2;
		} else if (c < 0x20) {
			parse_fail(p, i, "control character 0x%02x in string", c);
			goto out_free_buf;
		} else {
			/* '"' is never a continuation byte, so no sequence spans @end. */
			n = utf8_seq(p->s + i, end - i);
			if (!n) {
				parse_fail(p, i, "invalid UTF-8 in string");
				goto out_free_buf;
			}
			memcpy(buf + o, p->s + i, n);
			o += n;
			i += n;
		}
	}
	buf[o] = '\0';
	*out = buf;
	*out_len = o;
	p->pos = end + 1;
	return true;

out_free_buf:
	free(buf);
	return false;
}

/* Convert the validated literal of @n bytes at @s, in the "C" locale whatever the caller's. */
static bool number_to_double(const char *s, size_t n, double *d)
{
	char small[64];
	char *buf = small;
	char *end;

	if (n >= sizeof(small)) {
		buf = malloc(n + 1);
		if (!buf)
			return false;
	}
	memcpy(buf, s, n);
	buf[n] = '\0';
	pthread_once(&c_locale_once, c_locale_init);
	if (c_locale)
		*d = strtod_l(buf, &end, c_locale);
	else
		*d = strtod(buf, &end);
	assert(end == buf + n);
	if (buf != small)
		free(buf);
	return true;
}

static bool parse_number(struct parser *p, struct td_json_value *out)
{
	const unsigned char *s = p->s;
	size_t start = p->pos;
	size_t i = start;
	bool neg = false;
	bool integral = true;
	bool overflow = false;
	uint64_t mag = 0;
	double d;

	if (s[i] == '-') {
		neg = true;
		i++;
	}
	if (i >= p->len || !is_digit(s[i])) {
		p->pos = i;
		return parse_expected(p, "a digit");
	}
	if (s[i] == '0') {
		i++;
		if (i < p->len && is_digit(s[i]))
			return parse_fail(p, i - 1, "leading zero in number");
	} else {
		for (; i < p->len && is_digit(s[i]); i++) {
			unsigned int digit = s[i] - '0';

			if (mag > (UINT64_MAX - digit) / 10)
				overflow = true;
			else
				mag = mag * 10 + digit;
		}
	}
	if (i < p->len && s[i] == '.') {
		integral = false;
		i++;
		if (i >= p->len || !is_digit(s[i])) {
			p->pos = i;
			return parse_expected(p, "a digit after '.'");
		}
		while (i < p->len && is_digit(s[i]))
			i++;
	}
	if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
		integral = false;
		i++;
		if (i < p->len && (s[i] == '+' || s[i] == '-'))
			i++;
		if (i >= p->len || !is_digit(s[i])) {
			p->pos = i;
			return parse_expected(p, "a digit in the exponent");
		}
		while (i < p->len && is_digit(s[i]))
			i++;
	}
	if (!number_to_double((const char *)s + start, i - start, &d))
		return parse_fail(p, start, "out of memory");
	if (!isfinite(d))
		return parse_fail(p, start, "number out of range");

	out->type = TD_JSON_NUMBER;
	out->u.num.d = d;
	if (integral && !overflow) {
		if (!neg) {
			out->u.num.u64 = mag;
			out->u.num.has_u64 = true;
			if (mag <= INT64_MAX) {
				out->u.num.i64 = (int64_t)mag;
				out->u.num.has_i64 = true;
			}
		} else if (mag <= (uint64_t)INT64_MAX + 1) {
			out->u.num.i64 = mag ? -(int64_t)(mag - 1) - 1 : 0;
			out->u.num.has_i64 = true;
			out->u.num.has_u64 = mag == 0;
		}
	}
	p->pos = i;
	return true;
}

static bool parse_literal(struct parser *p, const char *word, size_t n)
{
	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
		return parse_fail(p, p->pos, "invalid literal, expected '%s'", word);
	p->pos += n;
	return true;
}

static bool parse_enter(struct parser *p)
{
	if (p->depth >= TD_JSON_MAX_PARSE_DEPTH)
		return parse_fail(p, p->pos, "nesting deeper than %d", TD_JSON_MAX_PARSE_DEPTH);
	p->depth++;
	p->pos++; /* the '[' or '{' */
	parse_skip_ws(p);
	return true;
}

static bool parse_array(struct parser *p, struct td_json_value *out)
{
	struct td_json_value *items = NULL;
	size_t n = 0;
	size_t cap = 0;

	if (!parse_enter(p))
		return false;
	if (p->pos < p->len && p->s[p->pos] == ']') {
		p->pos++;
		goto done;
	}
	for (;;) {
		struct td_json_value item;

		if (!parse_value(p, &item))
			goto out_free_items;
		if (n == cap) {
			size_t new_cap = cap ? cap * 2 : 4;
			struct td_json_value *grown = reallocarray(items, new_cap, sizeof(*items));

			if (!grown) {
				value_clear(&item);
				parse_fail(p, p->pos, "out of memory");
				goto out_free_items;
			}
			items = grown;
			cap = new_cap;
		}
		items[n++] = item;
		parse_skip_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == ']') {
			p->pos++;
			break;
		}
		parse_expected(p, "',' or ']'");
		goto out_free_items;
	}
done:
	p->depth--;
	out->type = TD_JSON_ARRAY;
	out->u.arr.items = items;
	out->u.arr.len = n;
	return true;

out_free_items:
	while (n)
		value_clear(&items[--n]);
	free(items);
	return false;
}

static bool parse_object(struct parser *p, struct td_json_value *out)
{
	struct td_json_member *members = NULL;
	size_t n = 0;
	size_t cap = 0;

	if (!parse_enter(p))
		return false;
	if (p->pos < p->len && p->s[p->pos] == '}') {
		p->pos++;
		goto done;
	}
	for (;;) {
		struct td_json_member m;

		parse_skip_ws(p);
		if (p->pos >= p->len || p->s[p->pos] != '"') {
			parse_expected(p, "a string key");
			goto out_free_members;
		}
		if (!parse_string(p, &m.key, &m.key_len))
			goto out_free_members;
		parse_skip_ws(p);
		if (p->pos >= p->len || p->s[p->pos] != ':') {
			parse_expected(p, "':' after key");
			free(m.key);
			goto out_free_members;
		}
		p->pos++;
		if (!parse_value(p, &m.value)) {
			free(m.key);
			goto out_free_members;
		}
		if (n == cap) {
			size_t new_cap = cap ? cap * 2 : 4;
			struct td_json_member *grown =
				reallocarray(members, new_cap, sizeof(*members));

			if (!grown) {
				free(m.key);
				value_clear(&m.value);
				parse_fail(p, p->pos, "out of memory");
				goto out_free_members;
			}
			members = grown;
			cap = new_cap;
		}
		members[n++] = m;
		parse_skip_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == '}') {
			p->pos++;
			break;
		}
		parse_expected(p, "',' or '}'");
		goto out_free_members;
	}
done:
	p->depth--;
	out->type = TD_JSON_OBJECT;
	out->u.obj.members = members;
	out->u.obj.len = n;
	return true;

out_free_members:
	while (n) {
		n--;
		free(members[n].key);
		value_clear(&members[n].value);
	}
	free(members);
	return false;
}

/* Parse one value after optional whitespace into @out, which owns nothing on failure. */
static bool parse_value(struct parser *p, struct td_json_value *out)
{
	memset(out, 0, sizeof(*out));
	parse_skip_ws(p);
	if (p->pos >= p->len)
		return parse_expected(p, "a value");
	switch (p->s[p->pos]) {
	case '{':
		return parse_object(p, out);
	case '[':
		return parse_array(p, out);
	case '"':
		if (!parse_string(p, &out->u.str.ptr, &out->u.str.len))
			return false;
		out->type = TD_JSON_STRING;
		return true;
	case 't':
		out->type = TD_JSON_BOOL;
		out->u.boolean = true;
		return parse_literal(p, "true", 4);
	case 'f':
		out->type = TD_JSON_BOOL;
		return parse_literal(p, "false", 5);
	case 'n':
		return parse_literal(p, "null", 4);
	case '-':
	case '0' ... '9':
		return parse_number(p, out);
	default:
		return parse_expected(p, "a value");
	}
}

struct td_json_value *td_json_parse(const char *text, size_t len, char *err, size_t errlen)
{
	struct parser p = {
		.s = (const unsigned char *)text,
		.len = text ? len : 0,
		.err = errlen ? err : NULL,
		.errlen = err ? errlen : 0,
	};
	struct td_json_value *root;

	if (p.err)
		p.err[0] = '\0';
	root = malloc(sizeof(*root));
	if (!root) {
		parse_fail(&p, 0, "out of memory");
		return NULL;
	}
	if (!parse_value(&p, root))
		goto out_free_root;
	parse_skip_ws(&p);
	if (p.pos != p.len) {
		parse_expected(&p, "end of input after the value");
		value_clear(root);
		goto out_free_root;
	}
	return root;

out_free_root:
	free(root);
	return NULL;
}

void td_json_value_free(struct td_json_value *root)
{
	if (!root)
		return;
	value_clear(root);
	free(root);
}

/* ---------------------------------------------------------------- access */

static const struct td_json_value *json_get_n(const struct td_json_value *obj, const char *key,
					      size_t key_len)
{
	size_t i;

	if (!obj || obj->type != TD_JSON_OBJECT)
		return NULL;
	for (i = 0; i < obj->u.obj.len; i++) {
		const struct td_json_member *m = &obj->u.obj.members[i];

		if (m->key_len == key_len && memcmp(m->key, key, key_len) == 0)
			return &m->value;
	}
	return NULL;
}

const struct td_json_value *td_json_get(const struct td_json_value *obj, const char *key)
{
	return json_get_n(obj, key, strlen(key));
}

const struct td_json_value *td_json_index(const struct td_json_value *v, size_t i)
{
	if (!v)
		return NULL;
	if (v->type == TD_JSON_ARRAY && i < v->u.arr.len)
		return &v->u.arr.items[i];
	if (v->type == TD_JSON_OBJECT && i < v->u.obj.len)
		return &v->u.obj.members[i].value;
	return NULL;
}

const char *td_json_key_at(const struct td_json_value *obj, size_t i)
{
	if (!obj || obj->type != TD_JSON_OBJECT || i >= obj->u.obj.len)
		return NULL;
	return obj->u.obj.members[i].key;
}

size_t td_json_len(const struct td_json_value *v)
{
	if (!v)
		return 0;
	switch (v->type) {
	case TD_JSON_ARRAY:
		return v->u.arr.len;
	case TD_JSON_OBJECT:
		return v->u.obj.len;
	case TD_JSON_STRING:
		return v->u.str.len;
	default:
		return 0;
	}
}

/* One step of td_json_path(): the segment of @n bytes at @seg. */
static const struct td_json_value *json_path_step(const struct td_json_value *v, const char *seg,
						  size_t n)
{
	size_t idx = 0;
	size_t i;

	if (v->type == TD_JSON_OBJECT)
		return json_get_n(v, seg, n);
	if (v->type != TD_JSON_ARRAY)
		return NULL;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)seg[i];

		if (!is_digit(c) || idx > (SIZE_MAX - (c - '0')) / 10)
			return NULL;
		idx = idx * 10 + (c - '0');
	}
	return td_json_index(v, idx);
}

const struct td_json_value *td_json_path(const struct td_json_value *root, const char *path)
{
	const struct td_json_value *v = root;
	const char *seg = path;

	for (;;) {
		const char *dot = strchr(seg, '.');
		size_t n = dot ? (size_t)(dot - seg) : strlen(seg);

		if (!v || n == 0)
			return NULL;
		v = json_path_step(v, seg, n);
		if (!dot)
			return v;
		seg = dot + 1;
	}
}

uint64_t td_json_as_u64(const struct td_json_value *v, uint64_t def)
{
	double d;

	if (!v || v->type != TD_JSON_NUMBER)
		return def;
	if (v->u.num.has_u64)
		return v->u.num.u64;
	d = v->u.num.d;
	if (d >= 0 && d <= JSON_MAX_EXACT_INT && (double)(uint64_t)d == d)
		return (uint64_t)d;
	return def;
}

int64_t td_json_as_i64(const struct td_json_value *v, int64_t def)
{
	double d;

	if (!v || v->type != TD_JSON_NUMBER)
		return def;
	if (v->u.num.has_i64)
		return v->u.num.i64;
	d = v->u.num.d;
	if (d >= -JSON_MAX_EXACT_INT && d <= JSON_MAX_EXACT_INT && (double)(int64_t)d == d)
		return (int64_t)d;
	return def;
}

double td_json_as_double(const struct td_json_value *v, double def)
{
	if (!v || v->type != TD_JSON_NUMBER)
		return def;
	return v->u.num.d;
}

const char *td_json_as_str(const struct td_json_value *v, const char *def)
{
	if (!v || v->type != TD_JSON_STRING)
		return def;
	return v->u.str.ptr;
}

bool td_json_as_bool(const struct td_json_value *v, bool def)
{
	if (!v || v->type != TD_JSON_BOOL)
		return def;
	return v->u.boolean;
}
