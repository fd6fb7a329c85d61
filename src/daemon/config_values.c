// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * config_values.c - one parser per value type, and the one place a key's
 * value is parsed, stored, compared and formatted.
 *
 * The syntax of each type is in config.h. td_cfg_set_value() parses into
 * locals first and stores last, so a rejected value leaves the config as it
 * was; the INI loader, td_config_set() and the command line all call it and
 * differ only in the origin they pass, which the message names.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "config_int.h"
#include "tagdisk/backend.h"

/* Digits of @base at @s, at least one, up to the end; no sign, no space. */
static int parse_digits(const char *s, unsigned int base, uint64_t *out)
{
	uint64_t v = 0;
	bool overflow = false;
	const char *p;

	if (!s || !*s)
		return -EINVAL;
	for (p = s; *p; p++) {
		unsigned int d;

		if (*p >= '0' && *p <= '9')
			d = (unsigned int)(*p - '0');
		else if (base == 16 && *p >= 'a' && *p <= 'f')
			d = (unsigned int)(*p - 'a' + 10);
		else if (base == 16 && *p >= 'A' && *p <= 'F')
			d = (unsigned int)(*p - 'A' + 10);
		else
			return -EINVAL;
		if (d >= base)
			return -EINVAL;
		if (v > (UINT64_MAX - d) / base)
			overflow = true;
		else
			v = v * base + d;
	}
	if (overflow)
		return -ERANGE;
	*out = v;
	return 0;
}

int td_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;
	int ret = parse_digits(s, 10, &v);

	if (ret)
		return ret;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int td_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGT";
	const char *p = s;
	const char *u;
	char digits[32];
	unsigned int shift = 0;
	uint64_t v;
	size_t n;
	int ret;

	if (!s)
		return -EINVAL;
	while (*p >= '0' && *p <= '9')
		p++;
	n = (size_t)(p - s);
	if (n == 0)
		return -EINVAL;
	if (*p) {
		u = strchr(units, toupper((unsigned char)*p));
		if (!u)
			return -EINVAL;
		shift = 10 * (unsigned int)(u - units + 1);
		p++;
		if (*p && strcasecmp(p, "iB") != 0)
			return -EINVAL;
	}
	/* Leading zeros cannot overflow; skip them so the copy below stays small. */
	while (n > 1 && *s == '0') {
		s++;
		n--;
	}
	if (n >= sizeof(digits))
		return -ERANGE;
	memcpy(digits, s, n);
	digits[n] = '\0';
	ret = parse_digits(digits, 10, &v);
	if (ret)
		return ret;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

int td_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"true", "yes", "on", "1"};
	static const char *const no[] = {"false", "no", "off", "0"};

	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < TD_ARRAY_SIZE(yes); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

int td_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "TGMK";

	for (unsigned int i = 0; bytes && i < 4; i++) {
		unsigned int shift = 10 * (4 - i);

		if ((bytes & ((1ULL << shift) - 1)) == 0)
			return snprintf(buf, len, "%llu%c", (unsigned long long)(bytes >> shift),
					units[i]);
	}
	return snprintf(buf, len, "%llu", (unsigned long long)bytes);
}

/* Decimal, or hexadecimal after "0x"/"0X". */
static int parse_seed(const char *s, uint64_t *out)
{
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		return parse_digits(s + 2, 16, out);
	return parse_digits(s, 10, out);
}

/* Return: the index of @s (case-insensitive) in @names, or -1. */
static int find_name(const char *const *names, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(names[i], s) == 0)
			return (int)i;
	return -1;
}

static int check_name(enum td_cfg_key id, const struct td_cfg_where *w, const char *value,
		      char *err, size_t errlen)
{
	size_t len = strlen(value);

	if (len == 0)
		return td_cfg_bad_value(id, w, value, err, errlen, "must not be empty");
	if (len > TD_CONFIG_NAME_MAX)
		return td_cfg_bad_value(id, w, value, err, errlen, "longer than %d bytes",
					TD_CONFIG_NAME_MAX);
	if (strchr(value, '/'))
		return td_cfg_bad_value(id, w, value, err, errlen, "must not contain '/'");
	/*
	 * The name goes into the mount's fsname option, and FUSE splits options at
	 * commas and reads a backslash as an escape: "d,allow_other" would add a
	 * mount option.
	 */
	if (strpbrk(value, ",\\"))
		return td_cfg_bad_value(id, w, value, err, errlen,
					"must not contain ',' or '\\' (a mount option would"
					" read them)");
	if (strcmp(value, ".") == 0 || strcmp(value, "..") == 0)
		return td_cfg_bad_value(id, w, value, err, errlen, "must not be \".\" or \"..\"");
	for (const char *p = value; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return td_cfg_bad_value(id, w, value, err, errlen,
						"must not contain control characters");
	return 0;
}

/* A Ceph pool, image or client name: what fits in "pool/image@snap" unambiguously. */
static int check_rbd_name(enum td_cfg_key id, const struct td_cfg_where *w, const char *value,
			  char *err, size_t errlen)
{
	size_t len = strlen(value);

	if (len == 0)
		return td_cfg_bad_value(id, w, value, err, errlen, "must not be empty");
	if (len > TD_CONFIG_RBD_NAME_MAX)
		return td_cfg_bad_value(id, w, value, err, errlen, "longer than %d bytes",
					TD_CONFIG_RBD_NAME_MAX);
	for (const char *p = value; *p; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return td_cfg_bad_value(id, w, value, err, errlen,
						"must not contain control characters");
		if (*p == '/' || *p == '@')
			return td_cfg_bad_value(id, w, value, err, errlen,
						"must not contain '/' or '@'");
	}
	return 0;
}

/* The URI schemes libnbd connects to; the unix ones name their socket in the query. */
static const struct {
	const char *prefix;
	bool unix_socket;
} nbd_schemes[] = {
    {"nbd://", false},
    {"nbd+unix://", true},
};

/* Return: whether the query of @uri (after its '?') has a non-empty socket= parameter. */
static bool nbd_uri_has_socket(const char *uri)
{
	const char *q = strchr(uri, '?');

	while (q) {
		q++;
		if (strncmp(q, "socket=", 7) == 0 && q[7] && q[7] != '&')
			return true;
		q = strchr(q, '&');
	}
	return false;
}

/*
 * An NBD URI as libnbd takes it (nbd_connect_uri): a known scheme, a host
 * for the TCP ones, a socket= parameter for the unix ones. The rest (port,
 * export) is libnbd's to judge when the daemon connects. TLS (nbds) is not
 * supported: the backend refuses it too.
 */
static int check_nbd_uri(enum td_cfg_key id, const struct td_cfg_where *w, const char *value,
			 char *err, size_t errlen)
{
	const char *rest = NULL;
	bool unix_socket = false;

	if (!*value)
		return td_cfg_bad_value(id, w, value, err, errlen, "must not be empty");
	if (strncmp(value, "nbds://", 7) == 0 || strncmp(value, "nbds+unix://", 12) == 0)
		return td_cfg_bad_value(id, w, value, err, errlen,
					"NBD over TLS is not supported (use nbd:// or nbd+unix://)");
	for (const char *p = value; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			return td_cfg_bad_value(id, w, value, err, errlen,
						"must not contain spaces or control characters");
	for (size_t i = 0; i < TD_ARRAY_SIZE(nbd_schemes); i++) {
		size_t n = strlen(nbd_schemes[i].prefix);

		if (strncmp(value, nbd_schemes[i].prefix, n) == 0) {
			rest = value + n;
			unix_socket = nbd_schemes[i].unix_socket;
			break;
		}
	}
	if (!rest)
		return td_cfg_bad_value(id, w, value, err, errlen,
					"not an NBD URI (nbd://HOST[:PORT]/EXPORT or"
					" nbd+unix:///EXPORT?socket=PATH)");
	if (unix_socket && !nbd_uri_has_socket(rest))
		return td_cfg_bad_value(id, w, value, err, errlen,
					"a unix NBD URI needs ?socket=PATH");
	if (!unix_socket && (!*rest || *rest == '/' || *rest == '?' || *rest == ':'))
		return td_cfg_bad_value(id, w, value, err, errlen, "no host after the scheme");
	return 0;
}

static int parse_octal_mode(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '7')
			return -EINVAL;
		v = v * 8 + (uint64_t)(*p - '0');
		if (v > 0777)
			return -ERANGE;
	}
	*out = v;
	return 0;
}

static int set_string(char **field, const char *value, char *err, size_t errlen)
{
	char *copy = NULL;

	if (value) {
		copy = strdup(value);
		if (!copy)
			return td_cfg_nomem(err, errlen);
	}
	free(*field);
	*field = copy;
	return 0;
}

/* Parse and store; td_cfg_set_value() records the origin once this succeeded. */
static int store_value(struct td_config *c, enum td_cfg_key id, const char *value,
		       const struct td_cfg_where *w, char *err, size_t errlen)
{
	const struct td_cfg_rule *r;
	void *field;
	char lo[32], hi[32], names[256];
	uint64_t v;
	bool b;
	int idx;
	int ret;

	assert(id < NR_KEYS);
	r = &td_cfg_rules[id];
	field = (char *)c + r->offset;
	switch (r->kind) {
	case KIND_PATH:
		if (!*value)
			return td_cfg_bad_value(id, w, value, err, errlen, "must not be empty");
		return set_string(field, value, err, errlen);
	case KIND_OPT_PATH:
	case KIND_GROUP:
		return set_string(field, *value ? value : NULL, err, errlen);
	case KIND_RBD_NAME:
		ret = check_rbd_name(id, w, value, err, errlen);
		if (ret)
			return ret;
		return set_string(field, value, err, errlen);
	case KIND_NBD_URI:
		ret = check_nbd_uri(id, w, value, err, errlen);
		if (ret)
			return ret;
		return set_string(field, value, err, errlen);
	case KIND_BACKEND:
		idx = find_name(td_cfg_backend_names, TD_ARRAY_SIZE(td_cfg_backend_names), value);
		if (idx < 0)
			return td_cfg_bad_value(id, w, value, err, errlen,
						"must be file, rbd or nbd");
		if ((idx == TD_CONFIG_BACKEND_RBD && !TD_WITH_RBD) ||
		    (idx == TD_CONFIG_BACKEND_NBD && !TD_WITH_NBD))
			return td_cfg_bad_value(id, w, value, err, errlen,
						"this tagdiskd was built without it (make WITH_%s=0);"
						" install %s and build again",
						idx == TD_CONFIG_BACKEND_RBD ? "RBD" : "NBD",
						idx == TD_CONFIG_BACKEND_RBD ? "librbd-dev"
									     : "libnbd-dev");
		c->backend = (enum td_config_backend)idx;
		return 0;
	case KIND_NAME:
		ret = check_name(id, w, value, err, errlen);
		if (ret)
			return ret;
		snprintf(c->name, sizeof(c->name), "%s", value);
		return 0;
	case KIND_ELEVATOR:
		if (strlen(value) >= sizeof(c->elevator) || !td_elv_find(value)) {
			td_elv_names(names, sizeof(names));
			return td_cfg_bad_value(id, w, value, err, errlen,
						"unknown elevator (known: %s)", names);
		}
		snprintf(c->elevator, sizeof(c->elevator), "%s", value);
		return 0;
	case KIND_SIZE:
		ret = td_parse_size(value, &v);
		if (ret == -EINVAL)
			return td_cfg_bad_value(
			    id, w, value, err, errlen,
			    "not a size (a whole number of bytes, or with a K, M, G"
			    " or T suffix)");
		if (ret || v < r->min || v > r->max) {
			td_format_size(r->min, lo, sizeof(lo));
			td_format_size(r->max, hi, sizeof(hi));
			return td_cfg_bad_value(id, w, value, err, errlen,
						"must be between %s and %s", lo, hi);
		}
		*(uint64_t *)field = v;
		return 0;
	case KIND_U32:
		ret = td_parse_u64(value, r->min, r->max, &v);
		if (ret == -EINVAL)
			return td_cfg_bad_value(id, w, value, err, errlen, "not a number");
		if (ret)
			return td_cfg_bad_value(
			    id, w, value, err, errlen, "must be between %llu and %llu",
			    (unsigned long long)r->min, (unsigned long long)r->max);
		*(uint32_t *)field = (uint32_t)v;
		return 0;
	case KIND_SEED:
		ret = parse_seed(value, &v);
		if (ret == -EINVAL)
			return td_cfg_bad_value(id, w, value, err, errlen,
						"not a number (decimal, or hexadecimal after 0x)");
		if (ret)
			return td_cfg_bad_value(id, w, value, err, errlen,
						"must be between 0 and %llu",
						(unsigned long long)UINT64_MAX);
		*(uint64_t *)field = v;
		return 0;
	case KIND_BOOL:
		if (td_parse_bool(value, &b))
			return td_cfg_bad_value(id, w, value, err, errlen,
						"not a boolean (true/false, yes/no, on/off, 1/0)");
		*(bool *)field = b;
		return 0;
	case KIND_BLOCK_SIZE:
		ret = td_parse_u64(value, 0, UINT64_MAX, &v);
		if (ret == -EINVAL)
			return td_cfg_bad_value(id, w, value, err, errlen, "not a number");
		if (ret || (v != 512 && v != 4096))
			return td_cfg_bad_value(id, w, value, err, errlen, "must be 512 or 4096");
		c->logical_block_size = (uint32_t)v;
		return 0;
	case KIND_QUEUE_MODE:
		idx = find_name(td_cfg_queue_mode_names, TD_ARRAY_SIZE(td_cfg_queue_mode_names),
				value);
		if (idx < 0)
			return td_cfg_bad_value(id, w, value, err, errlen, "must be rq, bio or mq");
		c->mode = (enum td_queue_mode)idx;
		return 0;
	case KIND_TRANSPORT:
		idx = find_name(td_cfg_transport_names, TD_ARRAY_SIZE(td_cfg_transport_names),
				value);
		if (idx < 0)
			return td_cfg_bad_value(id, w, value, err, errlen,
						"must be auto, uring or classic");
		c->transport = (enum td_fuse_transport)idx;
		return 0;
	case KIND_MODEL:
		idx = find_name(td_cfg_model_names, TD_ARRAY_SIZE(td_cfg_model_names), value);
		if (idx < 0)
			return td_cfg_bad_value(id, w, value, err, errlen,
						"must be none, hdd or ssd");
		c->model = (enum td_drive_model)idx;
		return 0;
	case KIND_WRITE_CACHE:
		idx = find_name(td_cfg_write_cache_names, TD_ARRAY_SIZE(td_cfg_write_cache_names),
				value);
		if (idx < 0)
			return td_cfg_bad_value(id, w, value, err, errlen,
						"must be writeback, writethrough or volatile");
		c->write_cache = (enum td_write_cache)idx;
		return 0;
	case KIND_OCTAL:
		ret = parse_octal_mode(value, &v);
		if (ret == -EINVAL)
			return td_cfg_bad_value(id, w, value, err, errlen, "not an octal number");
		if (ret)
			return td_cfg_bad_value(id, w, value, err, errlen,
						"must be between 0 and 0777");
		c->socket_mode = (mode_t)v;
		return 0;
	case KIND_INVALID:
		break;
	}
	assert(!"key without a rule");
	return td_cfg_fail(err, errlen, "internal error: key without a rule");
}

int td_cfg_set_value(struct td_config *c, enum td_cfg_key id, const char *value,
		     const struct td_cfg_where *w, char *err, size_t errlen)
{
	int ret = store_value(c, id, value, w, err, errlen);

	if (ret == 0)
		c->origin[id] = (struct td_config_origin){
		    .option = w ? w->option : NULL,
		    .line = w && !w->option ? w->line : 0,
		};
	return ret;
}

static bool str_equal(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* Return: the string field @f of key @id, or the key's default text when unset (or NULL). */
static const char *str_value(enum td_cfg_key id, const void *f)
{
	const char *s = *(char *const *)f;

	return s ? s : td_config_keys[id].default_value;
}

bool td_cfg_value_equal(const struct td_config *a, const struct td_config *b, enum td_cfg_key id)
{
	const struct td_cfg_rule *r = &td_cfg_rules[id];
	const void *fa = (const char *)a + r->offset;
	const void *fb = (const char *)b + r->offset;

	assert(id < NR_KEYS);
	switch (r->kind) {
	case KIND_PATH:
	case KIND_OPT_PATH:
	case KIND_GROUP:
	case KIND_RBD_NAME:
	case KIND_NBD_URI:
		return str_equal(str_value(id, fa), str_value(id, fb));
	case KIND_NAME:
	case KIND_ELEVATOR:
		return strcmp(fa, fb) == 0;
	case KIND_SIZE:
	case KIND_SEED:
		return *(const uint64_t *)fa == *(const uint64_t *)fb;
	case KIND_U32:
	case KIND_BLOCK_SIZE:
		return *(const uint32_t *)fa == *(const uint32_t *)fb;
	case KIND_BOOL:
		return *(const bool *)fa == *(const bool *)fb;
	case KIND_QUEUE_MODE:
		return a->mode == b->mode;
	case KIND_TRANSPORT:
		return a->transport == b->transport;
	case KIND_BACKEND:
		return a->backend == b->backend;
	case KIND_MODEL:
		return a->model == b->model;
	case KIND_WRITE_CACHE:
		return a->write_cache == b->write_cache;
	case KIND_OCTAL:
		return a->socket_mode == b->socket_mode;
	case KIND_INVALID:
		break;
	}
	assert(!"key without a rule");
	return false;
}

/* Return: @names[@i], or "?" for a value outside the enum. */
static const char *name_of(const char *const *names, size_t n, unsigned int i)
{
	return i < n ? names[i] : "?";
}

int td_config_format_value(const struct td_config *c, const struct td_config_key *k, char *buf,
			   size_t len)
{
	enum td_cfg_key id = td_cfg_key_id(k);
	const struct td_cfg_rule *r = &td_cfg_rules[id];
	const void *f = (const char *)c + r->offset;
	const char *s;

	switch (r->kind) {
	case KIND_PATH:
	case KIND_OPT_PATH:
	case KIND_GROUP:
	case KIND_RBD_NAME:
	case KIND_NBD_URI:
		s = str_value(id, f);
		return snprintf(buf, len, "%s", s ? s : "");
	case KIND_NAME:
	case KIND_ELEVATOR:
		return snprintf(buf, len, "%s", (const char *)f);
	case KIND_SIZE:
		return td_format_size(*(const uint64_t *)f, buf, len);
	case KIND_SEED:
		return snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)f);
	case KIND_U32:
	case KIND_BLOCK_SIZE:
		return snprintf(buf, len, "%u", *(const uint32_t *)f);
	case KIND_BOOL:
		return snprintf(buf, len, "%s", *(const bool *)f ? "true" : "false");
	case KIND_QUEUE_MODE:
		return snprintf(buf, len, "%s",
				name_of(td_cfg_queue_mode_names,
					TD_ARRAY_SIZE(td_cfg_queue_mode_names), c->mode));
	case KIND_TRANSPORT:
		return snprintf(buf, len, "%s",
				name_of(td_cfg_transport_names,
					TD_ARRAY_SIZE(td_cfg_transport_names), c->transport));
	case KIND_BACKEND:
		return snprintf(
		    buf, len, "%s",
		    name_of(td_cfg_backend_names, TD_ARRAY_SIZE(td_cfg_backend_names), c->backend));
	case KIND_MODEL:
		return snprintf(
		    buf, len, "%s",
		    name_of(td_cfg_model_names, TD_ARRAY_SIZE(td_cfg_model_names), c->model));
	case KIND_WRITE_CACHE:
		return snprintf(buf, len, "%s",
				name_of(td_cfg_write_cache_names,
					TD_ARRAY_SIZE(td_cfg_write_cache_names), c->write_cache));
	case KIND_OCTAL:
		return snprintf(buf, len, "%04o", (unsigned int)c->socket_mode);
	case KIND_INVALID:
		break;
	}
	assert(!"key without a rule");
	return snprintf(buf, len, "?");
}
