/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * json.h - the JSON of the admin protocol: a writer, a reader, UTF-8 checks.
 *
 * The admin socket answers each command with one compact JSON object on one
 * line; tagdiskctl reads those lines back to print tables. Both halves live
 * here and depend on nothing but libc.
 *
 * Writer: a struct td_json is a growable text buffer plus the nesting state
 * needed to place commas and colons. The caller owns the struct (usually on
 * its stack), calls td_json_init() once, writes one top-level value, reads
 * td_json_cstr(), and ends with td_json_free(); td_json_reset() starts the
 * next document in the same buffer. Writing out of order (a value where a
 * key is due, a key inside an array, an end that does not match its begin,
 * more than TD_JSON_MAX_DEPTH levels, a second top-level value) is a bug and
 * trips an assert(). Running out of memory is not a bug: the writer sets a
 * sticky failure flag, ignores further text, and td_json_cstr() returns NULL.
 *
 * Strings are written as UTF-8: valid sequences pass through, '"', '\\' and
 * control characters are escaped (\b \f \n \r \t, the rest as \u00xx, DEL
 * passes), and every byte that is not part of a valid UTF-8 sequence becomes
 * \ufffd, so the output is always valid JSON whatever the input bytes.
 *
 * Reader: td_json_parse() turns one strict RFC 8259 document (no comments,
 * no trailing commas, no leading zeros, no byte order mark, UTF-8 only, at
 * most TD_JSON_MAX_PARSE_DEPTH nested containers) into a tree of struct
 * td_json_value. It reads exactly @len bytes, needs no NUL terminator and is
 * safe on arbitrary input. The caller owns the tree and frees it with
 * td_json_value_free() on the root; every pointer inside (strings, child
 * values, keys) belongs to the tree and dies with it. The struct is public so
 * callers can walk it, but it is read-only: change nothing in a parsed tree.
 * The accessors accept NULL and the wrong type and then return their
 * default, so lookups chain without checks at each step.
 *
 * LOCKING: none inside. A struct td_json is used by one thread at a time. A
 * parsed tree is immutable, so any number of threads may read it at once.
 * td_json_parse() and td_utf8_valid() keep no state between calls and may
 * run concurrently.
 */
#ifndef TAGDISK_JSON_H
#define TAGDISK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/compiler.h"

/* Strict UTF-8: no overlong forms, no surrogates (U+D800..DFFF), nothing above U+10FFFF. */
bool td_utf8_valid(const char *s, size_t len);

/* ---------------------------------------------------------------- writer */

/* Deepest nesting of objects and arrays the writer tracks. */
#define TD_JSON_MAX_DEPTH 32

struct td_json {
	char *buf;	   /* the text, NUL-terminated once non-empty; NULL before the first byte */
	size_t len;	   /* bytes of text, without the NUL */
	size_t cap;	   /* bytes allocated at buf */
	size_t limit;	   /* most bytes of text allowed, 0 for no limit */
	uint32_t is_obj;   /* bit d: the container at depth d+1 is an object (else an array) */
	uint32_t nonempty; /* bit d: the container at depth d+1 has a member already */
	unsigned int depth; /* open containers */
	bool have_key;	    /* inside an object, a key waits for its value */
	bool done;	    /* the top-level value is complete */
	bool failed;	    /* sticky: allocation failed or the limit was hit */
};

/* Prepare @j for writing; allocates nothing until the first byte. */
void td_json_init(struct td_json *j) td_nonnull(1);
/* Release the text; @j may be td_json_init()ed again. */
void td_json_free(struct td_json *j) td_nonnull(1);
/* Forget the text and the failure flag and start a new document; keeps the buffer and the limit. */
void td_json_reset(struct td_json *j) td_nonnull(1);
/*
 * Cap the text at @max_bytes (0: no cap, the default). Writing past the cap
 * fails like an allocation failure, which bounds the memory one reply takes.
 */
void td_json_set_limit(struct td_json *j, size_t max_bytes) td_nonnull(1);

/* Return: true once an allocation failed or the limit was hit since init/reset. */
bool td_json_failed(const struct td_json *j) td_nonnull(1);
/*
 * Return: the NUL-terminated text written so far ("" when none), owned by @j
 * and valid until the next write, reset or free; NULL when td_json_failed().
 */
const char *td_json_cstr(const struct td_json *j) td_nonnull(1);
/* Return: bytes of text written so far (without the NUL); 0 when td_json_failed(). */
size_t td_json_text_len(const struct td_json *j) td_nonnull(1);

/* Open and close containers; each _end must match the innermost open _begin. */
void td_json_obj_begin(struct td_json *j) td_nonnull(1);
void td_json_obj_end(struct td_json *j) td_nonnull(1);
void td_json_arr_begin(struct td_json *j) td_nonnull(1);
void td_json_arr_end(struct td_json *j) td_nonnull(1);

/* Write the next member's key; only inside an object, and the value must follow. */
void td_json_key(struct td_json *j, const char *name) td_nonnull(1, 2);

/* Values. A NULL @s writes null; td_json_strn() may hold NUL bytes (written as \u0000). */
void td_json_str(struct td_json *j, const char *s) td_nonnull(1);
void td_json_strn(struct td_json *j, const char *s, size_t len) td_nonnull(1);
void td_json_u64(struct td_json *j, uint64_t v) td_nonnull(1);
void td_json_i64(struct td_json *j, int64_t v) td_nonnull(1);
/*
 * Plain decimal with at most 6 digits after the point and no trailing zeros
 * (0, 1.5, -3, 12345.678, 0.3 for 0.1 + 0.2) when 1e-6 <= |v| < 1e15; outside
 * that range, 6 significant digits with an exponent (1e-7, 1.5e20). NaN and
 * infinities have no JSON form and are written as null. Independent of the
 * C locale.
 */
void td_json_double(struct td_json *j, double v) td_nonnull(1);
void td_json_bool(struct td_json *j, bool v) td_nonnull(1);
void td_json_null(struct td_json *j) td_nonnull(1);

/* td_json_key() followed by the value. */
void td_json_kv_str(struct td_json *j, const char *key, const char *s) td_nonnull(1, 2);
void td_json_kv_u64(struct td_json *j, const char *key, uint64_t v) td_nonnull(1, 2);
void td_json_kv_i64(struct td_json *j, const char *key, int64_t v) td_nonnull(1, 2);
void td_json_kv_bool(struct td_json *j, const char *key, bool v) td_nonnull(1, 2);
void td_json_kv_double(struct td_json *j, const char *key, double v) td_nonnull(1, 2);

/* ---------------------------------------------------------------- reader */

/* Deepest nesting of objects and arrays td_json_parse() accepts. */
#define TD_JSON_MAX_PARSE_DEPTH 64

enum td_json_type {
	TD_JSON_NULL,
	TD_JSON_BOOL,
	TD_JSON_NUMBER,
	TD_JSON_STRING,
	TD_JSON_ARRAY,
	TD_JSON_OBJECT,
};

struct td_json_member;

struct td_json_value {
	enum td_json_type type;
	union {
		bool boolean;
		struct {
			double d;     /* nearest double to the literal, always set */
			int64_t i64;  /* exact value when has_i64 */
			uint64_t u64; /* exact value when has_u64 */
			bool has_i64; /* the literal is an integer within int64_t */
			bool has_u64; /* the literal is an integer within uint64_t */
		} num;
		struct {
			char *ptr;  /* decoded UTF-8, NUL-terminated; may hold NULs (\u0000) */
			size_t len; /* bytes at ptr, without the terminating NUL */
		} str;
		struct {
			struct td_json_value *items;
			size_t len;
		} arr;
		struct {
			struct td_json_member *members; /* in document order */
			size_t len;
		} obj;
	} u;
};

struct td_json_member {
	char *key; /* decoded like a string value: NUL-terminated, may hold NULs */
	size_t key_len;
	struct td_json_value value;
};

/*
 * Parse @len bytes at @text as one JSON value with optional surrounding
 * whitespace. On failure, when @errlen > 0, writes a NUL-terminated message
 * naming the byte offset into @err ("offset 7: expected ':' after key"),
 * truncated to @errlen bytes. Numbers that overflow a double are rejected.
 * Return: the root of a new tree (free it with td_json_value_free()), or NULL
 * on a syntax error or when memory runs out.
 */
struct td_json_value *td_json_parse(const char *text, size_t len, char *err, size_t errlen)
	td_warn_unused;
/* Free a tree; pass only a root returned by td_json_parse(). NULL is allowed. */
void td_json_value_free(struct td_json_value *root);

/* Return: the value of the first member named @key (no NUL inside), or NULL. */
const struct td_json_value *td_json_get(const struct td_json_value *obj, const char *key)
	td_nonnull(2);
/* Return: the @i-th item of an array, or the @i-th member's value of an object, or NULL. */
const struct td_json_value *td_json_index(const struct td_json_value *v, size_t i);
/* Return: the @i-th member's key of an object, or NULL. */
const char *td_json_key_at(const struct td_json_value *obj, size_t i);
/* Return: items of an array, members of an object, bytes of a string; 0 for anything else. */
size_t td_json_len(const struct td_json_value *v);

/*
 * Follow a dot-separated @path from @root: each segment names an object
 * member (the first of that name) or, as decimal digits, an array index;
 * "stats.latency.read.p99", "tags.0.sector". Keys holding '.' cannot be
 * reached this way. Return: the value, or NULL when any step is missing or
 * @path is empty or has an empty segment.
 */
const struct td_json_value *td_json_path(const struct td_json_value *root, const char *path)
	td_nonnull(2);

/*
 * Typed reads, each returning @def when @v is NULL or of another type.
 * Integers: an integer literal that fits the type gives its exact value;
 * any other number converts when its double is integral and at most 2^53 in
 * magnitude (1e3, 5.0), where doubles are exact; fractions, negatives for
 * u64 and anything else give @def. as_double gives the nearest double of any
 * number. as_str gives the decoded string (owned by the tree).
 */
uint64_t td_json_as_u64(const struct td_json_value *v, uint64_t def);
int64_t td_json_as_i64(const struct td_json_value *v, int64_t def);
double td_json_as_double(const struct td_json_value *v, double def);
const char *td_json_as_str(const struct td_json_value *v, const char *def);
bool td_json_as_bool(const struct td_json_value *v, bool def);

#endif /* TAGDISK_JSON_H */
