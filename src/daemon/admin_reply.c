// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * admin_reply.c - building one admin reply (admin_int.h, struct td_admin_reply).
 *
 * A reply is a json-c object; the members are added in the order the
 * protocol lists them, which json-c keeps. Every helper tolerates the
 * failures before it (a NULL container) and records its own in out->failed,
 * so a handler builds its whole reply and the failure is judged once, when
 * td_admin_reply_line() writes it. The out-of-memory line is a constant, so
 * even then the client gets its one line.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "common/jsonc.h"
#include "daemon/admin_int.h"

static const char oom_line[] = "{\"ok\":false,\"error\":\"out of memory\"}";

static void reply_start(struct td_admin_reply *out)
{
	td_admin_reply_free(out);
	out->root = json_object_new_object();
	out->failed = !out->root;
}

struct json_object *td_admin_ok(struct td_admin_reply *out)
{
	reply_start(out);
	td_admin_put_bool(out, out->root, "ok", true);
	return out->root;
}

void td_admin_error(struct td_admin_reply *out, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	reply_start(out);
	td_admin_put_bool(out, out->root, "ok", false);
	td_admin_put_str(out, out->root, "error", msg);
}

static void note(struct td_admin_reply *out, bool ok)
{
	if (!ok)
		out->failed = true;
}

void td_admin_put_u64(struct td_admin_reply *out, struct json_object *obj, const char *key,
		      uint64_t v)
{
	note(out, td_jsonc_add_u64(obj, key, v));
}

void td_admin_put_i64(struct td_admin_reply *out, struct json_object *obj, const char *key,
		      int64_t v)
{
	note(out, td_jsonc_add_i64(obj, key, v));
}

void td_admin_put_bool(struct td_admin_reply *out, struct json_object *obj, const char *key,
		       bool v)
{
	note(out, td_jsonc_add_bool(obj, key, v));
}

void td_admin_put_str(struct td_admin_reply *out, struct json_object *obj, const char *key,
		      const char *s)
{
	note(out, td_jsonc_add_str(obj, key, s));
}

void td_admin_put_double(struct td_admin_reply *out, struct json_object *obj, const char *key,
			 double v)
{
	note(out, td_jsonc_add_double(obj, key, v));
}

void td_admin_put_null(struct td_admin_reply *out, struct json_object *obj, const char *key)
{
	note(out, td_jsonc_add_null(obj, key));
}

struct json_object *td_admin_put_object(struct td_admin_reply *out, struct json_object *obj,
					const char *key)
{
	struct json_object *child = td_jsonc_add_object(obj, key);

	note(out, child != NULL);
	return child;
}

struct json_object *td_admin_put_array(struct td_admin_reply *out, struct json_object *obj,
				       const char *key)
{
	struct json_object *child = td_jsonc_add_array(obj, key);

	note(out, child != NULL);
	return child;
}

void td_admin_append_u64(struct td_admin_reply *out, struct json_object *arr, uint64_t v)
{
	note(out, td_jsonc_append(arr, json_object_new_uint64(v)));
}

void td_admin_append_str(struct td_admin_reply *out, struct json_object *arr, const char *s)
{
	note(out, td_jsonc_append(arr, td_jsonc_new_string(s, strlen(s))));
}

struct json_object *td_admin_append_object(struct td_admin_reply *out, struct json_object *arr)
{
	struct json_object *child = json_object_new_object();

	if (!td_jsonc_append(arr, child))
		child = NULL;
	note(out, child != NULL);
	return child;
}

const char *td_admin_reply_line(struct td_admin_reply *out, size_t *len)
{
	const char *text = NULL;

	if (out->root && !out->failed)
		text = td_jsonc_line(out->root, len);
	if (!text) {
		text = oom_line;
		*len = sizeof(oom_line) - 1;
	}
	return text;
}

void td_admin_reply_free(struct td_admin_reply *out)
{
	json_object_put(out->root);
	out->root = NULL;
	out->failed = false;
}
