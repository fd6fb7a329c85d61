// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * config_msg.c - how a configuration error is worded.
 *
 * Every message is one line: where the value is, the key, the value, why.
 *
 *   FILE:LINE: [section] key = "value": why      from the INI file
 *   --option "value": why                        from the command line
 *   [section] key = "value": why                 a default, or td_config_set()
 *
 * The value is quoted and escaped (td_cfg_escape), so an empty value is
 * visible and a value cannot break the line; the file name is escaped the
 * same way but not quoted, as compilers write "file:line:". A message that
 * does not fit the caller's buffer is cut, never overrun.
 */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "config_int.h"

/* Room for the "why" part of a message. */
#define WHY_MAX 512

const char *td_cfg_escape(const char *s, char *buf, size_t len)
{
	size_t n = 0;

	assert(len > 8);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		char tmp[5];
		size_t tlen;

		if (ch == '"' || ch == '\\') {
			tmp[0] = '\\';
			tmp[1] = (char)ch;
			tlen = 2;
		} else if (ch < 0x20 || ch == 0x7f) {
			snprintf(tmp, sizeof(tmp), "\\x%02x", ch);
			tlen = 4;
		} else {
			tmp[0] = (char)ch;
			tlen = 1;
		}
		if (n + tlen + 4 > len) {
			memcpy(buf + n, "...", 3);
			n += 3;
			break;
		}
		memcpy(buf + n, tmp, tlen);
		n += tlen;
	}
	buf[n] = '\0';
	return buf;
}

int td_cfg_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

int td_cfg_nomem(char *err, size_t errlen)
{
	td_cfg_fail(err, errlen, "out of memory");
	return -ENOMEM;
}

/* Write "FILE:LINE: " (or "FILE: ") for @w into @buf; "" when @w names no file. */
static const char *file_prefix(const struct td_cfg_where *w, char *buf, size_t len)
{
	char file[TD_CFG_QUOTE_MAX];

	buf[0] = '\0';
	if (!w || !w->file)
		return buf;
	td_cfg_escape(w->file, file, sizeof(file));
	if (w->line)
		snprintf(buf, len, "%s:%u: ", file, w->line);
	else
		snprintf(buf, len, "%s: ", file);
	return buf;
}

/* The common tail: PREFIX SUBJECT[ = "VALUE"]: WHY. */
static int emit(const struct td_cfg_where *w, const char *subject, const char *value, char *err,
		size_t errlen, const char *why)
{
	char prefix[TD_CFG_QUOTE_MAX + 32];
	char quoted[TD_CFG_QUOTE_MAX];

	file_prefix(w, prefix, sizeof(prefix));
	if (!value)
		return td_cfg_fail(err, errlen, "%s%s: %s", prefix, subject, why);
	td_cfg_escape(value, quoted, sizeof(quoted));
	return td_cfg_fail(err, errlen, "%s%s = \"%s\": %s", prefix, subject, quoted, why);
}

int td_cfg_bad_value(enum td_cfg_key id, const struct td_cfg_where *w, const char *value, char *err,
		     size_t errlen, const char *fmt, ...)
{
	const struct td_config_key *k = &td_config_keys[id];
	char quoted[TD_CFG_QUOTE_MAX];
	char subject[64];
	char why[WHY_MAX];
	va_list ap;

	assert(id < NR_KEYS);
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (w && w->option) {
		if (!value)
			return td_cfg_fail(err, errlen, "%s: %s", w->option, why);
		td_cfg_escape(value, quoted, sizeof(quoted));
		return td_cfg_fail(err, errlen, "%s \"%s\": %s", w->option, quoted, why);
	}
	snprintf(subject, sizeof(subject), "[%s] %s", k->section, k->key);
	return emit(w, subject, value, err, errlen, why);
}

int td_cfg_bad_entry(const struct td_cfg_where *w, const char *subject, const char *value,
		     char *err, size_t errlen, const char *fmt, ...)
{
	char why[WHY_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return emit(w, subject, value, err, errlen, why);
}

void td_cfg_where_of(const struct td_config *c, enum td_cfg_key id, struct td_cfg_where *w)
{
	const struct td_config_origin *o = &c->origin[id];

	assert(id < NR_KEYS);
	*w = (struct td_cfg_where){.option = o->option};
	if (!o->option && o->line && c->origin_file) {
		w->file = c->origin_file;
		w->line = o->line;
	}
}
