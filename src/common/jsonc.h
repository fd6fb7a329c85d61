/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * jsonc.h - the admin protocol's JSON on top of json-c: values written the
 * way the protocol writes them, one object per line, and lines read back.
 *
 * tagdiskd builds each reply and each trace event as a json-c tree and
 * writes it with td_jsonc_line(); tagdiskctl parses what it reads with
 * td_jsonc_parse() and looks inside with td_jsonc_get() and the typed
 * readers. json-c does the work (objects, escaping, the tokenizer); this
 * module holds what the protocol promises beyond plain JSON
 * (docs/protocol.md, "Encoding"):
 *
 *  - compact text: no blanks, '/' not escaped, members in the order added;
 *  - strings: '"', '\\' and the control characters escaped (\b \f \n \r \t,
 *    the others as \u00xx; DEL passes), valid UTF-8 as it is, and each byte
 *    that is not part of a valid UTF-8 sequence written as \ufffd, so a line
 *    is valid JSON in UTF-8 whatever bytes a path or a cut message holds;
 *  - integers exact over the whole of int64_t and uint64_t;
 *  - doubles in plain decimal with at most 6 digits after the point and no
 *    trailing zeros (0, 1.5, 0.3 for 0.1 + 0.2) when 1e-6 <= |v| < 1e15,
 *    else 6 significant digits and an exponent (1e-7, 1.5e20); NaN and the
 *    infinities as null; whatever the C locale.
 *
 * Ownership is json-c's reference counting. Constructors return a new
 * reference, or NULL when memory runs out. The td_jsonc_add*() helpers and
 * td_jsonc_append() take over the value they are given, also when they fail
 * (they free it then); they accept a NULL container, and then fail, so a
 * tree can be built without a check after each step and judged once. A
 * parsed tree belongs to the caller, who frees it with json_object_put().
 * Strings and objects returned by the readers, and the text of
 * td_jsonc_line(), belong to the tree and live until it changes or dies.
 *
 * LOCKING: none inside. A tree is used by one thread at a time.
 */
#ifndef TAGDISK_JSONC_H
#define TAGDISK_JSONC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json_object.h>
#include "common/compiler.h"

/* How every line is written: compact, '/' as it is. */
#define TD_JSONC_LINE_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
/* Deepest nesting of objects and arrays td_jsonc_parse() accepts. */
#define TD_JSONC_MAX_DEPTH 64
/* Room td_jsonc_format_double() needs, NUL included. */
#define TD_JSONC_DOUBLE_LEN 32

/* ---- writing ---------------------------------------------------------------------------- */

/* Return: a new string of the @len bytes at @s (NULs allowed), written as above; or NULL. */
struct json_object *td_jsonc_new_string(const char *s, size_t len);
/* Return: a new double written in the protocol's form; NULL when @v is not finite, or no memory. */
struct json_object *td_jsonc_new_double(double v);
/*
 * Write @v in the protocol's form into @out (TD_JSONC_DOUBLE_LEN bytes),
 * NUL-terminated; "null" when @v is NaN or infinite. Return: the length.
 */
size_t td_jsonc_format_double(double v, char *out) td_nonnull(2);

/*
 * Add member @key with value @val to object @obj; a member of that name is
 * replaced in place. Takes over @val. Return: true; false when @obj or @val
 * is NULL or memory runs out (@val is freed).
 */
bool td_jsonc_add(struct json_object *obj, const char *key, struct json_object *val)
	td_nonnull(2);
/* The same with a new value; NULL @s, and a non-finite @v, add null. */
bool td_jsonc_add_null(struct json_object *obj, const char *key) td_nonnull(2);
bool td_jsonc_add_u64(struct json_object *obj, const char *key, uint64_t v) td_nonnull(2);
bool td_jsonc_add_i64(struct json_object *obj, const char *key, int64_t v) td_nonnull(2);
bool td_jsonc_add_bool(struct json_object *obj, const char *key, bool v) td_nonnull(2);
bool td_jsonc_add_str(struct json_object *obj, const char *key, const char *s) td_nonnull(2);
bool td_jsonc_add_double(struct json_object *obj, const char *key, double v) td_nonnull(2);
/* Add an empty object or array as @key. Return: it (owned by @obj), or NULL. */
struct json_object *td_jsonc_add_object(struct json_object *obj, const char *key) td_nonnull(2);
struct json_object *td_jsonc_add_array(struct json_object *obj, const char *key) td_nonnull(2);
/* Append @val to array @arr, taking it over. Return: true; false as td_jsonc_add(). */
bool td_jsonc_append(struct json_object *arr, struct json_object *val);

/*
 * Return: @v as one line of text in the protocol's form, without a newline,
 * its length in *@len; owned by @v, valid until @v changes or is freed. NULL
 * when memory runs out.
 */
const char *td_jsonc_line(struct json_object *v, size_t *len) td_nonnull(1, 2);

/* ---- reading ---------------------------------------------------------------------------- */

/*
 * Parse the @len bytes at @text as one JSON value with optional blanks
 * around it: strict UTF-8, json-c's strict mode, at most TD_JSONC_MAX_DEPTH
 * levels; a NUL byte or anything after the value is an error. Return: a
 * new tree (json_object_put() it), or NULL when @text is not one JSON value
 * or memory runs out. A JSON null parses to NULL too, so callers expecting an
 * object need not tell the two apart.
 */
struct json_object *td_jsonc_parse(const char *text, size_t len) td_warn_unused;

/*
 * Return: the value at JSON pointer @pointer (RFC 6901: "/rate/iops",
 * "/tags/0/sector", "" for @root itself) below @root, or NULL when it is
 * missing, null, or @root is NULL.
 */
struct json_object *td_jsonc_get(struct json_object *root, const char *pointer) td_nonnull(2);
/* Return: true when @pointer names a member or item below @root, null included. */
bool td_jsonc_has(struct json_object *root, const char *pointer) td_nonnull(2);

/*
 * Typed reads of @v, each giving @def when @v is NULL or of another type.
 * Integers: an integer that fits gives its exact value; a double converts
 * when it is integral and at most 2^53 in magnitude (where doubles are
 * exact); anything else gives @def. td_jsonc_as_double() takes any number.
 * json-c's own getters convert strings and booleans; these do not.
 */
uint64_t td_jsonc_as_u64(const struct json_object *v, uint64_t def);
int64_t td_jsonc_as_i64(const struct json_object *v, int64_t def);
double td_jsonc_as_double(const struct json_object *v, double def);
const char *td_jsonc_as_str(const struct json_object *v, const char *def);
bool td_jsonc_as_bool(const struct json_object *v, bool def);

#endif /* TAGDISK_JSONC_H */
