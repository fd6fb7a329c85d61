// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * config.c - tagdiskd's settings: defaults, INI file, command line, checks.
 *
 * Keys
 *
 *   Two tables indexed by enum key_id describe every key: td_config_keys[]
 *   (public: section, name, type, default, help, reloadable) and rules[]
 *   (private: how to parse the value, its range, where it goes in struct
 *   td_config). Both use designated initializers on the same enum, so a key
 *   cannot be in one and not the other; rule kinds start at 1 so a missing
 *   rule is caught by an assert rather than silently writing field 0.
 *
 *   set_value() is the only place a value is parsed. The INI loader, the
 *   public td_config_set() and the command line all call it; they differ in
 *   the subject the error message names: "[tags] depth = " or "--depth ".
 *   It parses into locals first and stores last, so a rejected value leaves
 *   the config as it was.
 *
 * The INI file
 *
 *   iniparser stores sections as entries without a colon (value NULL) and
 *   keys as "section:key" in insertion order; a key before any section gets
 *   an empty section (":key"). The loader walks the dictionary's entries in
 *   that order, so the first bad line of the file is the one reported.
 *   iniparser reports syntax errors through a process-wide callback; ours
 *   keeps the first message in a thread-local buffer.
 *
 * The command line
 *
 *   getopt_long() with "+" (never permute argv) and ":" (report missing
 *   values as ':'), opterr cleared so it prints nothing; our messages name
 *   the option. An option that sets a key is checked against a scratch
 *   config at once and stored as text, then applied again by
 *   td_config_build(), so a reload on SIGHUP re-reads the file and keeps the
 *   command line on top.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <iniparser.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "daemon/config.h"
#include "tagdisk/tag.h"

#ifndef TD_VERSION
#define TD_VERSION "unknown"
#endif

/* depth and workers are unsigned int in the engine; set_value stores them as uint32_t. */
_Static_assert(__builtin_types_compatible_p(unsigned int, uint32_t), "unsigned int is uint32_t");

/* Largest disk size: what off_t can address. */
#define DISK_SIZE_MAX ((uint64_t)INT64_MAX)
#define MIB	      (1ULL << 20)
#define GIB	      (1ULL << 30)

enum key_id {
	KEY_DISK_IMAGE,
	KEY_DISK_SIZE,
	KEY_DISK_MOUNTPOINT,
	KEY_DISK_NAME,
	KEY_DISK_READ_ONLY,
	KEY_DISK_LOGICAL_BLOCK_SIZE,
	KEY_DISK_ALLOW_OTHER,
	KEY_QUEUE_MODE,
	KEY_QUEUE_ELEVATOR,
	KEY_QUEUE_NR_REQUESTS,
	KEY_QUEUE_MAX_SECTORS,
	KEY_QUEUE_READ_EXPIRE_MS,
	KEY_QUEUE_WRITE_EXPIRE_MS,
	KEY_QUEUE_FIFO_BATCH,
	KEY_QUEUE_WRITES_STARVED,
	KEY_TAGS_DEPTH,
	KEY_DRIVE_WORKERS,
	KEY_DRIVE_MODEL,
	KEY_DRIVE_HDD_RPM,
	KEY_DRIVE_HDD_SEEK_TRACK_US,
	KEY_DRIVE_HDD_SEEK_FULL_US,
	KEY_DRIVE_HDD_TRANSFER_MB_S,
	KEY_DRIVE_HDD_OVERHEAD_US,
	KEY_DRIVE_HDD_SECTORS_PER_TRACK,
	KEY_DRIVE_SSD_LATENCY_US,
	KEY_DRIVE_SSD_TRANSFER_MB_S,
	KEY_DRIVE_WRITE_CACHE,
	KEY_DRIVE_CACHE_SIZE,
	KEY_DRIVE_COMMAND_TIMEOUT_MS,
	KEY_DRIVE_MAX_RETRIES,
	KEY_DRIVE_SEED,
	KEY_ADMIN_SOCKET,
	KEY_ADMIN_SOCKET_MODE,
	KEY_ADMIN_SOCKET_GROUP,
	NR_KEYS
};

#define K(sec, name, typ, def, reload, text)                                                       \
	{                                                                                          \
		.section = sec, .key = name, .type = typ, .default_value = def, .help = text,      \
		.reloadable = reload                                                               \
	}

const struct td_config_key td_config_keys[NR_KEYS] = {
    [KEY_DISK_IMAGE] =
	K("disk", "image", "path", NULL, false,
	  "disk image file (required); created sparse when missing, which needs size"),
    [KEY_DISK_SIZE] = K("disk", "size", "size", "0", false,
			"image size in bytes, K/M/G/T suffixes; 0 = the existing image's size"),
    [KEY_DISK_MOUNTPOINT] = K("disk", "mountpoint", "path", NULL, false,
			      "directory where the disk file appears (required)"),
    [KEY_DISK_NAME] = K("disk", "name", "string", "disk", false,
			"file name of the disk in the mountpoint: 1..255 bytes, no '/'"),
    [KEY_DISK_READ_ONLY] =
	K("disk", "read_only", "bool", "false", false, "serve the disk read-only"),
    [KEY_DISK_LOGICAL_BLOCK_SIZE] = K("disk", "logical_block_size", "number", "512", false,
				      "block size the disk reports, in bytes: 512 or 4096"),
    [KEY_DISK_ALLOW_OTHER] =
	K("disk", "allow_other", "bool", "false", false,
	  "let other users than the daemon's open the disk (FUSE allow_other)"),
    [KEY_QUEUE_MODE] = K("queue", "mode", "choice", "rq", false,
			 "rq: elevator, prep and tags; bio: straight to the drive"),
    [KEY_QUEUE_ELEVATOR] = K("queue", "elevator", "string", "deadline", true,
			     "I/O scheduler: a registered elevator (noop, deadline)"),
    [KEY_QUEUE_NR_REQUESTS] =
	K("queue", "nr_requests", "number", "128", false,
	  "requests in the pool; submitters wait when all are used: 4..65536"),
    [KEY_QUEUE_MAX_SECTORS] = K("queue", "max_sectors", "number", "2048", false,
				"largest request, in 512-byte sectors: 8..65536"),
    [KEY_QUEUE_READ_EXPIRE_MS] = K("queue", "read_expire_ms", "number", "500", true,
				   "deadline: a read's FIFO deadline, in ms: 1..3600000"),
    [KEY_QUEUE_WRITE_EXPIRE_MS] = K("queue", "write_expire_ms", "number", "5000", true,
				    "deadline: a write's FIFO deadline, in ms: 1..3600000"),
    [KEY_QUEUE_FIFO_BATCH] = K("queue", "fifo_batch", "number", "16", true,
			       "deadline: requests dispatched per sorted batch: 1..4096"),
    [KEY_QUEUE_WRITES_STARVED] = K("queue", "writes_starved", "number", "2", true,
				   "deadline: read batches before writes must go: 0..1024"),
    [KEY_TAGS_DEPTH] = K("tags", "depth", "number", "32", true,
			 "tagged commands outstanding at the drive at once: 1..4096"),
    [KEY_DRIVE_WORKERS] = K("drive", "workers", "number", "0", false,
			    "drive threads: 0..256; 0 runs commands in the dispatching thread"
			    " (hdd always uses one actuator, ssd at least one thread)"),
    [KEY_DRIVE_MODEL] =
	K("drive", "model", "choice", "none", false, "latency model: none, hdd or ssd"),
    [KEY_DRIVE_HDD_RPM] = K("drive", "hdd_rpm", "number", "7200", false,
			    "hdd: spindle speed, in revolutions per minute: 1000..30000"),
    [KEY_DRIVE_HDD_SEEK_TRACK_US] = K("drive", "hdd_seek_track_us", "number", "500", false,
				      "hdd: track-to-track seek, in us: 0..1000000"),
    [KEY_DRIVE_HDD_SEEK_FULL_US] = K("drive", "hdd_seek_full_us", "number", "12000", false,
				     "hdd: full-stroke seek, in us: 0..10000000,"
				     " at least hdd_seek_track_us"),
    [KEY_DRIVE_HDD_TRANSFER_MB_S] = K("drive", "hdd_transfer_mb_s", "number", "150", false,
				      "hdd: media transfer rate, in 10^6 bytes/s: 1..100000"),
    [KEY_DRIVE_HDD_OVERHEAD_US] = K("drive", "hdd_overhead_us", "number", "50", false,
				    "hdd: controller time per command, in us: 0..1000000"),
    [KEY_DRIVE_HDD_SECTORS_PER_TRACK] = K("drive", "hdd_sectors_per_track", "number", "2048", false,
					  "hdd: 512-byte sectors per track: 8..1048576"),
    [KEY_DRIVE_SSD_LATENCY_US] = K("drive", "ssd_latency_us", "number", "80", false,
				   "ssd: time per command, in us: 0..10000000"),
    [KEY_DRIVE_SSD_TRANSFER_MB_S] = K("drive", "ssd_transfer_mb_s", "number", "2000", false,
				      "ssd: transfer rate, in 10^6 bytes/s: 1..1000000"),
    [KEY_DRIVE_WRITE_CACHE] =
	K("drive", "write_cache", "choice", "writeback", false,
	  "writeback, writethrough or volatile (unflushed writes can be lost)"),
    [KEY_DRIVE_CACHE_SIZE] = K("drive", "cache_size", "size", "64M", false,
			       "volatile write cache, in bytes, K/M/G/T suffixes: 1M..16G"),
    [KEY_DRIVE_COMMAND_TIMEOUT_MS] = K("drive", "command_timeout_ms", "number", "30000", true,
				       "reset the drive when a command is older, in ms:"
				       " 0..3600000; 0 = never"),
    [KEY_DRIVE_MAX_RETRIES] = K("drive", "max_retries", "number", "5", true,
				"requeues after resets before a request fails with EIO: 0..100"),
    [KEY_DRIVE_SEED] = K("drive", "seed", "number", "1", false,
			 "seed of random fault injection, decimal or 0x hex: 0..2^64-1"),
    [KEY_ADMIN_SOCKET] = K("admin", "socket", "path", NULL, false,
			   "admin socket; default /run/tagdisk/<name>.sock as root,"
			   " else beside the mountpoint"),
    [KEY_ADMIN_SOCKET_MODE] = K("admin", "socket_mode", "octal", "0660", false,
				"admin socket permissions, octal: 0..0777"),
    [KEY_ADMIN_SOCKET_GROUP] = K("admin", "socket_group", "group", "", false,
				 "group of the admin socket, name or gid; empty = the daemon's"),
};
const size_t td_config_nr_keys = NR_KEYS;

#undef K

enum key_kind {
	KIND_INVALID = 0, /* a key without a rule */
	KIND_PATH,	  /* char *, non-empty */
	KIND_GROUP,	  /* char *, empty = NULL */
	KIND_NAME,	  /* the disk name */
	KIND_ELEVATOR,	  /* a registered elevator's name */
	KIND_SIZE,	  /* uint64_t bytes in [min, max] */
	KIND_U32,	  /* uint32_t in [min, max] */
	KIND_SEED,	  /* uint64_t, decimal or 0x hex */
	KIND_BOOL,	  /* bool */
	KIND_BLOCK_SIZE,  /* 512 or 4096 */
	KIND_QUEUE_MODE,  /* enum td_queue_mode */
	KIND_MODEL,	  /* enum td_drive_model */
	KIND_WRITE_CACHE, /* enum td_write_cache */
	KIND_OCTAL,	  /* mode_t, 0..0777 */
};

struct key_rule {
	enum key_kind kind;
	uint64_t min;
	uint64_t max;
	size_t offset; /* of the field in struct td_config */
};

#define R(k, lo, hi, field)                                                                        \
	{                                                                                          \
		.kind = k, .min = lo, .max = hi, .offset = offsetof(struct td_config, field)       \
	}

static const struct key_rule rules[NR_KEYS] = {
    [KEY_DISK_IMAGE] = R(KIND_PATH, 0, 0, image),
    [KEY_DISK_SIZE] = R(KIND_SIZE, 0, DISK_SIZE_MAX, size_bytes),
    [KEY_DISK_MOUNTPOINT] = R(KIND_PATH, 0, 0, mountpoint),
    [KEY_DISK_NAME] = R(KIND_NAME, 1, TD_CONFIG_NAME_MAX, name),
    [KEY_DISK_READ_ONLY] = R(KIND_BOOL, 0, 0, read_only),
    [KEY_DISK_LOGICAL_BLOCK_SIZE] = R(KIND_BLOCK_SIZE, 512, 4096, logical_block_size),
    [KEY_DISK_ALLOW_OTHER] = R(KIND_BOOL, 0, 0, allow_other),
    [KEY_QUEUE_MODE] = R(KIND_QUEUE_MODE, 0, 0, mode),
    [KEY_QUEUE_ELEVATOR] = R(KIND_ELEVATOR, 0, 0, elevator),
    [KEY_QUEUE_NR_REQUESTS] = R(KIND_U32, 4, 65536, nr_requests),
    [KEY_QUEUE_MAX_SECTORS] = R(KIND_U32, 8, 65536, max_sectors),
    [KEY_QUEUE_READ_EXPIRE_MS] = R(KIND_U32, 1, 3600000, tunables.read_expire_ms),
    [KEY_QUEUE_WRITE_EXPIRE_MS] = R(KIND_U32, 1, 3600000, tunables.write_expire_ms),
    [KEY_QUEUE_FIFO_BATCH] = R(KIND_U32, 1, 4096, tunables.fifo_batch),
    [KEY_QUEUE_WRITES_STARVED] = R(KIND_U32, 0, 1024, tunables.writes_starved),
    [KEY_TAGS_DEPTH] = R(KIND_U32, 1, TD_TAG_DEPTH_MAX, depth),
    [KEY_DRIVE_WORKERS] = R(KIND_U32, 0, 256, workers),
    [KEY_DRIVE_MODEL] = R(KIND_MODEL, 0, 0, model),
    [KEY_DRIVE_HDD_RPM] = R(KIND_U32, 1000, 30000, hdd.rpm),
    [KEY_DRIVE_HDD_SEEK_TRACK_US] = R(KIND_U32, 0, 1000000, hdd.seek_track_us),
    [KEY_DRIVE_HDD_SEEK_FULL_US] = R(KIND_U32, 0, 10000000, hdd.seek_full_us),
    [KEY_DRIVE_HDD_TRANSFER_MB_S] = R(KIND_U32, 1, 100000, hdd.transfer_mb_s),
    [KEY_DRIVE_HDD_OVERHEAD_US] = R(KIND_U32, 0, 1000000, hdd.overhead_us),
    [KEY_DRIVE_HDD_SECTORS_PER_TRACK] = R(KIND_U32, 8, 1048576, hdd.sectors_per_track),
    [KEY_DRIVE_SSD_LATENCY_US] = R(KIND_U32, 0, 10000000, ssd.latency_us),
    [KEY_DRIVE_SSD_TRANSFER_MB_S] = R(KIND_U32, 1, 1000000, ssd.transfer_mb_s),
    [KEY_DRIVE_WRITE_CACHE] = R(KIND_WRITE_CACHE, 0, 0, write_cache),
    [KEY_DRIVE_CACHE_SIZE] = R(KIND_SIZE, MIB, 16 * GIB, cache_size),
    [KEY_DRIVE_COMMAND_TIMEOUT_MS] = R(KIND_U32, 0, 3600000, command_timeout_ms),
    [KEY_DRIVE_MAX_RETRIES] = R(KIND_U32, 0, 100, max_retries),
    [KEY_DRIVE_SEED] = R(KIND_SEED, 0, UINT64_MAX, seed),
    [KEY_ADMIN_SOCKET] = R(KIND_PATH, 0, 0, socket),
    [KEY_ADMIN_SOCKET_MODE] = R(KIND_OCTAL, 0, 0777, socket_mode),
    [KEY_ADMIN_SOCKET_GROUP] = R(KIND_GROUP, 0, 0, socket_group),
};

#undef R

static const char *const sections[] = {"disk", "queue", "tags", "drive", "admin"};

static const char *const queue_mode_names[] = {[TD_MODE_RQ] = "rq", [TD_MODE_BIO] = "bio"};
static const char *const model_names[] = {
    [TD_MODEL_NONE] = "none", [TD_MODEL_HDD] = "hdd", [TD_MODEL_SSD] = "ssd"};
static const char *const write_cache_names[] = {
    [TD_WC_WRITEBACK] = "writeback",
    [TD_WC_WRITETHROUGH] = "writethrough",
    [TD_WC_VOLATILE] = "volatile",
};

/* Quoted values in messages are cut here: a message is one line, not a file. */
#define QUOTE_MAX 1024

/*
 * Copy @s into @buf for a message: quotes, backslashes and control bytes are
 * escaped so a value cannot break the line or fake the closing quote.
 */
static const char *escape(const char *s, char *buf, size_t len)
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

static int fail(char *err, size_t errlen, const char *fmt, ...) td_printf(3, 4);

/* Write one message into @err (if any). Return: -EINVAL. */
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int fail_nomem(char *err, size_t errlen)
{
	fail(err, errlen, "out of memory");
	return -ENOMEM;
}

static int bad_value(enum key_id id, const char *option, const char *value, char *err,
		     size_t errlen, const char *fmt, ...) td_printf(6, 7);

/*
 * One message about @value of key @id: `[sec] key = "value": why` or, when
 * it came from the command line, `--option "value": why`. Return: -EINVAL.
 */
static int bad_value(enum key_id id, const char *option, const char *value, char *err,
		     size_t errlen, const char *fmt, ...)
{
	const struct td_config_key *k = &td_config_keys[id];
	char quoted[QUOTE_MAX];
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	escape(value, quoted, sizeof(quoted));
	if (option)
		return fail(err, errlen, "%s \"%s\": %s", option, quoted, why);
	return fail(err, errlen, "[%s] %s = \"%s\": %s", k->section, k->key, quoted, why);
}

/* ---- value parsers ---------------------------------------------------- */

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

static int check_name(enum key_id id, const char *option, const char *value, char *err,
		      size_t errlen)
{
	size_t len = strlen(value);

	if (len == 0)
		return bad_value(id, option, value, err, errlen, "must not be empty");
	if (len > TD_CONFIG_NAME_MAX)
		return bad_value(id, option, value, err, errlen, "longer than %d bytes",
				 TD_CONFIG_NAME_MAX);
	if (strchr(value, '/'))
		return bad_value(id, option, value, err, errlen, "must not contain '/'");
	if (strcmp(value, ".") == 0 || strcmp(value, "..") == 0)
		return bad_value(id, option, value, err, errlen, "must not be \".\" or \"..\"");
	for (const char *p = value; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return bad_value(id, option, value, err, errlen,
					 "must not contain control characters");
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
			return fail_nomem(err, errlen);
	}
	free(*field);
	*field = copy;
	return 0;
}

/*
 * Parse @value for key @id and store it in @c. @option names the
 * command-line option the value came from, or NULL for a key.
 * Return: 0, -EINVAL or -ENOMEM with the message in @err; @c unchanged on error.
 */
static int set_value(struct td_config *c, enum key_id id, const char *value, const char *option,
		     char *err, size_t errlen)
{
	const struct key_rule *r;
	void *field;
	char lo[32], hi[32], names[256];
	uint64_t v;
	bool b;
	int idx;
	int ret;

	assert(id < NR_KEYS);
	r = &rules[id];
	field = (char *)c + r->offset;
	switch (r->kind) {
	case KIND_PATH:
		if (!*value)
			return bad_value(id, option, value, err, errlen, "must not be empty");
		return set_string(field, value, err, errlen);
	case KIND_GROUP:
		return set_string(field, *value ? value : NULL, err, errlen);
	case KIND_NAME:
		ret = check_name(id, option, value, err, errlen);
		if (ret)
			return ret;
		snprintf(c->name, sizeof(c->name), "%s", value);
		return 0;
	case KIND_ELEVATOR:
		if (strlen(value) >= sizeof(c->elevator) || !td_elv_find(value)) {
			td_elv_names(names, sizeof(names));
			return bad_value(id, option, value, err, errlen,
					 "unknown elevator (known: %s)", names);
		}
		snprintf(c->elevator, sizeof(c->elevator), "%s", value);
		return 0;
	case KIND_SIZE:
		ret = td_parse_size(value, &v);
		if (ret == -EINVAL)
			return bad_value(id, option, value, err, errlen,
					 "not a size (a whole number of bytes, or with a K, M, G"
					 " or T suffix)");
		if (ret || v < r->min || v > r->max) {
			td_format_size(r->min, lo, sizeof(lo));
			td_format_size(r->max, hi, sizeof(hi));
			return bad_value(id, option, value, err, errlen,
					 "must be between %s and %s", lo, hi);
		}
		*(uint64_t *)field = v;
		return 0;
	case KIND_U32:
		ret = td_parse_u64(value, r->min, r->max, &v);
		if (ret == -EINVAL)
			return bad_value(id, option, value, err, errlen, "not a number");
		if (ret)
			return bad_value(id, option, value, err, errlen,
					 "must be between %llu and %llu",
					 (unsigned long long)r->min, (unsigned long long)r->max);
		*(uint32_t *)field = (uint32_t)v;
		return 0;
	case KIND_SEED:
		ret = parse_seed(value, &v);
		if (ret == -EINVAL)
			return bad_value(id, option, value, err, errlen,
					 "not a number (decimal, or hexadecimal after 0x)");
		if (ret)
			return bad_value(id, option, value, err, errlen,
					 "must be between 0 and %llu",
					 (unsigned long long)UINT64_MAX);
		*(uint64_t *)field = v;
		return 0;
	case KIND_BOOL:
		if (td_parse_bool(value, &b))
			return bad_value(id, option, value, err, errlen,
					 "not a boolean (true/false, yes/no, on/off, 1/0)");
		*(bool *)field = b;
		return 0;
	case KIND_BLOCK_SIZE:
		ret = td_parse_u64(value, 0, UINT64_MAX, &v);
		if (ret == -EINVAL)
			return bad_value(id, option, value, err, errlen, "not a number");
		if (ret || (v != 512 && v != 4096))
			return bad_value(id, option, value, err, errlen, "must be 512 or 4096");
		c->logical_block_size = (uint32_t)v;
		return 0;
	case KIND_QUEUE_MODE:
		idx = find_name(queue_mode_names, TD_ARRAY_SIZE(queue_mode_names), value);
		if (idx < 0)
			return bad_value(id, option, value, err, errlen, "must be rq or bio");
		c->mode = (enum td_queue_mode)idx;
		return 0;
	case KIND_MODEL:
		idx = find_name(model_names, TD_ARRAY_SIZE(model_names), value);
		if (idx < 0)
			return bad_value(id, option, value, err, errlen,
					 "must be none, hdd or ssd");
		c->model = (enum td_drive_model)idx;
		return 0;
	case KIND_WRITE_CACHE:
		idx = find_name(write_cache_names, TD_ARRAY_SIZE(write_cache_names), value);
		if (idx < 0)
			return bad_value(id, option, value, err, errlen,
					 "must be writeback, writethrough or volatile");
		c->write_cache = (enum td_write_cache)idx;
		return 0;
	case KIND_OCTAL:
		ret = parse_octal_mode(value, &v);
		if (ret == -EINVAL)
			return bad_value(id, option, value, err, errlen, "not an octal number");
		if (ret)
			return bad_value(id, option, value, err, errlen,
					 "must be between 0 and 0777");
		c->socket_mode = (mode_t)v;
		return 0;
	case KIND_INVALID:
		break;
	}
	assert(!"key without a rule");
	return fail(err, errlen, "internal error: key without a rule");
}

/* ---- the table -------------------------------------------------------- */

/* Return: the known section spelled by the @len bytes at @s (any case), or NULL. */
static const char *find_section(const char *s, size_t len)
{
	for (size_t i = 0; i < TD_ARRAY_SIZE(sections); i++)
		if (strlen(sections[i]) == len && strncasecmp(sections[i], s, len) == 0)
			return sections[i];
	return NULL;
}

/* Return: the id of @key in the known @section, or NR_KEYS. */
static enum key_id find_key(const char *section, const char *key)
{
	for (unsigned int i = 0; i < NR_KEYS; i++)
		if (strcmp(td_config_keys[i].section, section) == 0 &&
		    strcasecmp(td_config_keys[i].key, key) == 0)
			return (enum key_id)i;
	return NR_KEYS;
}

const struct td_config_key *td_config_find_key(const char *section, const char *key)
{
	const char *sec = find_section(section, strlen(section));
	enum key_id id;

	if (!sec)
		return NULL;
	id = find_key(sec, key);
	return id < NR_KEYS ? &td_config_keys[id] : NULL;
}

void td_config_init(struct td_config *c)
{
	*c = (struct td_config){
	    .size_bytes = 0,
	    .name = "disk",
	    .read_only = false,
	    .logical_block_size = 512,
	    .allow_other = false,
	    .mode = TD_MODE_RQ,
	    .elevator = "deadline",
	    .nr_requests = 128,
	    .max_sectors = 2048,
	    .tunables = {.read_expire_ms = 500,
			 .write_expire_ms = 5000,
			 .fifo_batch = 16,
			 .writes_starved = 2},
	    .depth = 32,
	    .workers = 0,
	    .model = TD_MODEL_NONE,
	    .hdd = {.rpm = 7200,
		    .seek_track_us = 500,
		    .seek_full_us = 12000,
		    .transfer_mb_s = 150,
		    .overhead_us = 50,
		    .sectors_per_track = 2048},
	    .ssd = {.latency_us = 80, .transfer_mb_s = 2000},
	    .write_cache = TD_WC_WRITEBACK,
	    .cache_size = 64 * MIB,
	    .command_timeout_ms = 30000,
	    .max_retries = 5,
	    .seed = 1,
	    .socket_mode = 0660,
	    .socket_gid = (gid_t)-1,
	};
}

static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void td_config_free(struct td_config *c)
{
	free(c->image);
	free(c->mountpoint);
	free(c->socket);
	free(c->socket_group);
	free(c->config_file);
	free_strv(c->fuse_opts, c->nr_fuse_opts);
	memset(c, 0, sizeof(*c));
}

int td_config_set(struct td_config *c, const char *section, const char *key, const char *value,
		  char *err, size_t errlen)
{
	char qs[QUOTE_MAX], qk[QUOTE_MAX];
	const char *sec = find_section(section, strlen(section));
	enum key_id id;

	if (!sec)
		return fail(err, errlen, "unknown section [%s]", escape(section, qs, sizeof(qs)));
	id = find_key(sec, key);
	if (id == NR_KEYS)
		return fail(err, errlen, "unknown key [%s] %s", sec, escape(key, qk, sizeof(qk)));
	return set_value(c, id, value, NULL, err, errlen);
}

/* ---- the INI file ----------------------------------------------------- */

/* Return: the bit of @sec, as find_section() returned it, in a mask of sections. */
static unsigned int section_bit(const char *sec)
{
	for (unsigned int i = 0; i < TD_ARRAY_SIZE(sections); i++)
		if (sections[i] == sec)
			return 1U << i;
	return 0;
}

static __thread char ini_error[512];

static int ini_error_cb(const char *fmt, ...) td_printf(1, 2);

/* iniparser's error callback: keep the first message of a load. */
static int ini_error_cb(const char *fmt, ...)
{
	va_list ap;
	int ret = 0;

	if (ini_error[0])
		return 0;
	va_start(ap, fmt);
	ret = vsnprintf(ini_error, sizeof(ini_error), fmt, ap);
	va_end(ap);
	return ret;
}

/*
 * iniparser's messages read "iniparser: syntax error in F (N):\n-> LINE\n";
 * make them one line without the library's name.
 */
static void tidy_ini_error(char *msg)
{
	static const char prefix[] = "iniparser: ";
	char *w = msg;

	if (strncmp(msg, prefix, sizeof(prefix) - 1) == 0)
		memmove(msg, msg + sizeof(prefix) - 1, strlen(msg + sizeof(prefix) - 1) + 1);
	for (const char *r = msg; *r; r++) {
		if (*r == '\n') {
			if (strncmp(r + 1, "-> ", 3) == 0)
				r += 3;
			if (r[1] && w > msg && w[-1] != ' ')
				*w++ = ' ';
			continue;
		}
		*w++ = *r;
	}
	*w = '\0';
	while (w > msg && w[-1] == ' ')
		*--w = '\0';
}

int td_config_load_file(struct td_config *c, const char *path, char *err, size_t errlen)
{
	char qp[QUOTE_MAX], qs[QUOTE_MAX], qk[QUOTE_MAX];
	unsigned int seen = 0; /* section_bit()s of the sections whose entry came by */
	dictionary *d;
	struct stat st;
	int ret = 0;
	int fd;

	escape(path, qp, sizeof(qp));
	/* iniparser says only "cannot open" and reads a directory as an empty file. */
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(err, errlen, "config file \"%s\": %s", qp, strerror(errno));
	if (fstat(fd, &st) < 0) {
		ret = fail(err, errlen, "config file \"%s\": %s", qp, strerror(errno));
		close(fd);
		return ret;
	}
	close(fd);
	if (!S_ISREG(st.st_mode))
		return fail(err, errlen, "config file \"%s\": not a regular file", qp);

	ini_error[0] = '\0';
	iniparser_set_error_callback(ini_error_cb);
	d = iniparser_load(path);
	iniparser_set_error_callback(NULL);
	if (!d) {
		tidy_ini_error(ini_error);
		return fail(err, errlen, "config file \"%s\": %s", qp,
			    ini_error[0] ? ini_error : "cannot be read");
	}

	for (ssize_t i = 0; i < d->size && ret == 0; i++) {
		const char *entry = d->key[i];
		const char *value = d->val[i];
		const char *colon;
		const char *sec;
		enum key_id id;

		if (!entry)
			continue;
		colon = strchr(entry, ':');
		/* Sections have no value; a colon in one ("[a:b]") still makes it a section. */
		if (!colon || !value) {
			sec = find_section(entry, strlen(entry));
			if (!sec)
				ret = fail(err, errlen, "unknown section [%s]",
					   escape(entry, qs, sizeof(qs)));
			seen |= section_bit(sec);
			continue;
		}
		if (colon == entry) {
			ret = fail(err, errlen, "config file \"%s\": key %s is outside any section",
				   qp, escape(colon + 1, qk, sizeof(qk)));
			continue;
		}
		sec = find_section(entry, (size_t)(colon - entry));
		/*
		 * iniparser adds a section's entry before its keys, but a key b in [a]
		 * takes over the entry of an earlier line "[a:b]", which is then
		 * the first bad line of the file.
		 */
		if (!sec || !(seen & section_bit(sec))) {
			ret = fail(err, errlen, "unknown section [%s]",
				   escape(entry, qs, sizeof(qs)));
			continue;
		}
		id = find_key(sec, colon + 1);
		if (id == NR_KEYS) {
			ret = fail(err, errlen, "unknown key [%s] %s", sec,
				   escape(colon + 1, qk, sizeof(qk)));
			continue;
		}
		ret = set_value(c, id, value, NULL, err, errlen);
	}
	iniparser_freedict(d);
	return ret;
}

/* ---- the command line ------------------------------------------------- */

enum {
	OPT_IMAGE = 256,
	OPT_SIZE,
	OPT_MOUNT,
	OPT_NAME,
	OPT_SOCKET,
	OPT_MODE,
	OPT_ELEVATOR,
	OPT_DEPTH,
	OPT_WORKERS,
	OPT_READ_ONLY,
};

static const struct option long_options[] = {
    {"image", required_argument, NULL, OPT_IMAGE},
    {"size", required_argument, NULL, OPT_SIZE},
    {"mount", required_argument, NULL, OPT_MOUNT},
    {"name", required_argument, NULL, OPT_NAME},
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"mode", required_argument, NULL, OPT_MODE},
    {"elevator", required_argument, NULL, OPT_ELEVATOR},
    {"depth", required_argument, NULL, OPT_DEPTH},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"read-only", no_argument, NULL, OPT_READ_ONLY},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {"verbose", no_argument, NULL, 'v'},
    {NULL, 0, NULL, 0},
};

/* "+": stop at the first non-option, never permute argv; ":": report missing values. */
static const char short_options[] = "+:c:fo:hVv";

/* Options that set a key. */
struct option_key {
	int val;
	const char *option;
	enum key_id id;
	const char *fixed_value; /* for flags: the value they set */
	bool path;		 /* made absolute when parsed */
};

static const struct option_key option_keys[] = {
    {OPT_IMAGE, "--image", KEY_DISK_IMAGE, NULL, true},
    {OPT_SIZE, "--size", KEY_DISK_SIZE, NULL, false},
    {OPT_MOUNT, "--mount", KEY_DISK_MOUNTPOINT, NULL, true},
    {OPT_NAME, "--name", KEY_DISK_NAME, NULL, false},
    {OPT_SOCKET, "--socket", KEY_ADMIN_SOCKET, NULL, true},
    {OPT_MODE, "--mode", KEY_QUEUE_MODE, NULL, false},
    {OPT_ELEVATOR, "--elevator", KEY_QUEUE_ELEVATOR, NULL, false},
    {OPT_DEPTH, "--depth", KEY_TAGS_DEPTH, NULL, false},
    {OPT_WORKERS, "--workers", KEY_DRIVE_WORKERS, NULL, false},
    {OPT_READ_ONLY, "--read-only", KEY_DISK_READ_ONLY, "true", false},
};

static const struct option_key *find_option_key(int val)
{
	for (size_t i = 0; i < TD_ARRAY_SIZE(option_keys); i++)
		if (option_keys[i].val == val)
			return &option_keys[i];
	return NULL;
}

/* Return: how the user spells the option whose getopt value is @val. */
static const char *option_name(int val, char *buf, size_t len)
{
	for (const struct option *o = long_options; o->name; o++)
		if (o->val == val && val >= 256) {
			snprintf(buf, len, "--%s", o->name);
			return buf;
		}
	if (val > 0x20 && val < 0x7f)
		snprintf(buf, len, "-%c", val);
	else
		snprintf(buf, len, "-\\x%02x", (unsigned int)val & 0xff);
	return buf;
}

/*
 * Return: a malloc'ed absolute form of @path (relative to the current
 * directory, trailing slashes dropped), or NULL with errno set.
 */
static char *absolute_path(const char *path)
{
	char *cwd = NULL;
	char *abs;
	size_t len;

	if (path[0] == '/') {
		abs = strdup(path);
	} else {
		cwd = getcwd(NULL, 0);
		if (!cwd)
			return NULL;
		if (asprintf(&abs, "%s%s%s", cwd, strcmp(cwd, "/") == 0 ? "" : "/", path) < 0)
			abs = NULL;
		free(cwd);
	}
	if (!abs)
		return NULL;
	len = strlen(abs);
	while (len > 1 && abs[len - 1] == '/')
		abs[--len] = '\0';
	return abs;
}

static int strv_push(char ***v, size_t *n, const char *s, size_t len)
{
	char **grown = realloc(*v, (*n + 1) * sizeof(**v));

	if (!grown)
		return -ENOMEM;
	*v = grown;
	grown[*n] = strndup(s, len);
	if (!grown[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* Split a -o value at commas onto the list (FUSE's own syntax, without escapes). */
static int add_fuse_opts(struct td_cmdline *cl, const char *arg, char *err, size_t errlen)
{
	char quoted[QUOTE_MAX];
	const char *p = arg;

	for (;;) {
		size_t len = strcspn(p, ",");

		if (len == 0)
			return fail(err, errlen, "-o \"%s\": empty FUSE option",
				    escape(arg, quoted, sizeof(quoted)));
		if (strv_push(&cl->fuse_opts, &cl->nr_fuse_opts, p, len))
			return fail_nomem(err, errlen);
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

static int add_override(struct td_cmdline *cl, const struct option_key *ok, const char *arg,
			char *err, size_t errlen)
{
	const char *value = ok->fixed_value ? ok->fixed_value : arg;
	struct td_cmdline_override *grown;
	struct td_config scratch;
	char quoted[QUOTE_MAX];
	char *copy;
	int ret;

	/* Check now, so the message names the option before any file is read. */
	td_config_init(&scratch);
	ret = set_value(&scratch, ok->id, value, ok->option, err, errlen);
	td_config_free(&scratch);
	if (ret)
		return ret;

	copy = ok->path ? absolute_path(value) : strdup(value);
	if (!copy) {
		if (errno == ENOMEM)
			return fail_nomem(err, errlen);
		return fail(err, errlen, "%s \"%s\": %s", ok->option,
			    escape(value, quoted, sizeof(quoted)), strerror(errno));
	}
	grown = realloc(cl->overrides, (cl->nr_overrides + 1) * sizeof(*grown));
	if (!grown) {
		free(copy);
		return fail_nomem(err, errlen);
	}
	cl->overrides = grown;
	grown[cl->nr_overrides++] = (struct td_cmdline_override){
	    .option = ok->option,
	    .section = td_config_keys[ok->id].section,
	    .key = td_config_keys[ok->id].key,
	    .value = copy,
	};
	return 0;
}

static void print_usage(FILE *f)
{
	char names[256];
	char depth[64];

	td_elv_names(names, sizeof(names));
	snprintf(depth, sizeof(depth), "tags at the drive, 1..%d (32)", TD_TAG_DEPTH_MAX);
	fprintf(f,
		"Usage: tagdiskd [-c FILE] [-f] [--image PATH] [--size SIZE] [--mount DIR]\n"
		"                [--name NAME] [--socket PATH] [--mode rq|bio] [--elevator NAME]\n"
		"                [--depth N] [--workers N] [--read-only] [-o FUSE_OPTION]...\n"
		"Serve a disk image as a file through FUSE, behind a queued block layer.\n"
		"\n"
		"  -c FILE            read settings from the INI file FILE\n"
		"  -f                 stay in the foreground\n"
		"  --image PATH       the disk image                     [disk] image\n"
		"  --size SIZE        image size, K/M/G/T suffixes;      [disk] size\n"
		"                     a missing image is created sparse\n"
		"  --mount DIR        where the disk file appears        [disk] mountpoint\n"
		"  --name NAME        the disk file's name (disk)        [disk] name\n"
		"  --socket PATH      the admin socket                   [admin] socket\n"
		"  --mode rq|bio      queued or direct (rq)              [queue] mode\n"
		"  --elevator NAME    %-33s  [queue] elevator\n"
		"  --depth N          %-33s  [tags] depth\n"
		"  --workers N        drive threads, 0..256 (0)          [drive] workers\n"
		"  --read-only        serve the disk read-only           [disk] read_only\n"
		"  -o OPT[,OPT...]    FUSE mount options (repeatable)\n"
		"  -v, --verbose      log more (repeatable)\n"
		"  -h, --help         print this help and exit\n"
		"  -V, --version      print the version and exit\n"
		"\n"
		"The command line overrides the file, which overrides the defaults.\n",
		names, depth);
}

/*
 * getopt_long() returned '?' with @arg the word it stopped at. glibc sets
 * optopt to 0 for an unknown or ambiguous long option (and has moved past
 * it), to the option's value for "--flag=value" given to a flag, and to the
 * character for an unknown short option.
 */
static int unknown_option(const char *arg, char *err, size_t errlen)
{
	char quoted[QUOTE_MAX];
	char name[64];

	if (optopt == 0) {
		size_t len = strcspn(arg, "=");
		unsigned int matches = 0;

		escape(arg, quoted, sizeof(quoted));
		quoted[strcspn(quoted, "=")] = '\0';
		/* getopt_long() takes unique abbreviations; say so when one was not. */
		for (const struct option *o = long_options; len > 2 && o->name; o++)
			matches += strncmp(o->name, arg + 2, len - 2) == 0;
		if (matches > 1)
			return fail(err, errlen, "ambiguous option %s", quoted);
		return fail(err, errlen, "unknown option %s", quoted);
	}
	if (strncmp(arg, "--", 2) == 0 && strchr(arg, '=')) {
		for (const struct option *o = long_options; o->name; o++)
			if (o->val == optopt && o->has_arg == no_argument)
				return fail(err, errlen, "option --%s takes no value", o->name);
	}
	return fail(err, errlen, "unknown option %s", option_name(optopt, name, sizeof(name)));
}

void td_cmdline_free(struct td_cmdline *cl)
{
	free(cl->config_file);
	free_strv(cl->fuse_opts, cl->nr_fuse_opts);
	for (size_t i = 0; i < cl->nr_overrides; i++)
		free(cl->overrides[i].value);
	free(cl->overrides);
	memset(cl, 0, sizeof(*cl));
}

int td_cmdline_parse(struct td_cmdline *cl, int argc, char **argv, char *err, size_t errlen)
{
	const struct option_key *ok;
	int saved_opterr = opterr;
	char name[64];
	char quoted[QUOTE_MAX];
	int ret = 0;
	int ch;

	memset(cl, 0, sizeof(*cl));
	opterr = 0;
	optind = 0; /* glibc: 0 restarts the scan from scratch */
	while (ret == 0 &&
	       (ch = getopt_long(argc, argv, short_options, long_options, NULL)) != -1) {
		switch (ch) {
		case 'c':
			if (!*optarg) {
				ret = fail(err, errlen, "-c \"\": must not be empty");
				break;
			}
			free(cl->config_file);
			cl->config_file = absolute_path(optarg);
			if (!cl->config_file)
				ret = errno == ENOMEM ? fail_nomem(err, errlen)
						      : fail(err, errlen, "-c \"%s\": %s",
							     escape(optarg, quoted, sizeof(quoted)),
							     strerror(errno));
			break;
		case 'f':
			cl->foreground = true;
			break;
		case 'o':
			ret = add_fuse_opts(cl, optarg, err, errlen);
			break;
		case 'v':
			cl->verbose++;
			break;
		case 'h':
			print_usage(stdout);
			fflush(stdout);
			ret = 1;
			break;
		case 'V':
			printf("tagdiskd %s\n", TD_VERSION);
			fflush(stdout);
			ret = 1;
			break;
		case ':':
			ret = fail(err, errlen, "option %s needs a value",
				   option_name(optopt, name, sizeof(name)));
			break;
		case '?':
			ret = unknown_option(argv[optind - 1], err, errlen);
			break;
		default:
			ok = find_option_key(ch);
			assert(ok);
			ret = add_override(cl, ok, optarg, err, errlen);
			break;
		}
	}
	if (ret == 0 && optind < argc)
		ret = fail(err, errlen, "unexpected argument \"%s\"",
			   escape(argv[optind], quoted, sizeof(quoted)));
	opterr = saved_opterr;
	if (ret)
		td_cmdline_free(cl);
	return ret;
}

/* ---- build and validate ----------------------------------------------- */

int td_config_build(struct td_config *c, const struct td_cmdline *cl, char *err, size_t errlen)
{
	struct td_config n;
	int ret = 0;

	td_config_init(&n);
	if (cl->config_file) {
		n.config_file = strdup(cl->config_file);
		if (!n.config_file) {
			ret = fail_nomem(err, errlen);
			goto out_free_new;
		}
		ret = td_config_load_file(&n, cl->config_file, err, errlen);
		if (ret)
			goto out_free_new;
	}
	for (size_t i = 0; i < cl->nr_overrides; i++) {
		const struct td_cmdline_override *o = &cl->overrides[i];
		enum key_id id = find_key(o->section, o->key);

		assert(id < NR_KEYS);
		ret = set_value(&n, id, o->value, o->option, err, errlen);
		if (ret)
			goto out_free_new;
	}
	n.foreground = cl->foreground;
	n.verbose = cl->verbose;
	for (size_t i = 0; i < cl->nr_fuse_opts; i++) {
		if (strv_push(&n.fuse_opts, &n.nr_fuse_opts, cl->fuse_opts[i],
			      strlen(cl->fuse_opts[i]))) {
			ret = fail_nomem(err, errlen);
			goto out_free_new;
		}
	}
	td_config_free(c);
	*c = n;
	return 0;

out_free_new:
	td_config_free(&n);
	return ret;
}

int td_config_check(const struct td_config *c, char *err, size_t errlen)
{
	char size[32];

	if (!c->image)
		return fail(err, errlen,
			    "[disk] image is not set (give it in the config file or with --image)");
	if (!c->mountpoint)
		return fail(
		    err, errlen,
		    "[disk] mountpoint is not set (give it in the config file or with --mount)");
	if (c->size_bytes % c->logical_block_size) {
		td_format_size(c->size_bytes, size, sizeof(size));
		return fail(err, errlen,
			    "[disk] size = \"%s\": must be a multiple of logical_block_size (%u)",
			    size, c->logical_block_size);
	}
	if (c->max_sectors % (c->logical_block_size / 512))
		return fail(err, errlen,
			    "[queue] max_sectors = \"%u\": must be a multiple of %u with"
			    " logical_block_size = %u",
			    c->max_sectors, c->logical_block_size / 512, c->logical_block_size);
	if (c->hdd.seek_full_us < c->hdd.seek_track_us)
		return fail(
		    err, errlen,
		    "[drive] hdd_seek_full_us = \"%u\": must be at least hdd_seek_track_us (%u)",
		    c->hdd.seek_full_us, c->hdd.seek_track_us);
	return 0;
}

int td_config_default_socket(const struct td_config *c, uid_t euid, char *buf, size_t len)
{
	const char *dir = "/run/tagdisk";
	size_t dir_len = strlen(dir);
	int n;

	if (euid != 0) {
		const char *slash;

		if (!c->mountpoint)
			return -EINVAL;
		dir = c->mountpoint;
		dir_len = strlen(dir);
		while (dir_len > 1 && dir[dir_len - 1] == '/')
			dir_len--;
		slash = memrchr(dir, '/', dir_len);
		if (!slash) {
			dir = ".";
			dir_len = 1;
		} else {
			/* "/mnt" lives in "/": keep that slash, drop every other trailing one. */
			dir_len = (size_t)(slash - dir);
			while (dir_len > 1 && dir[dir_len - 1] == '/')
				dir_len--;
			if (dir_len == 0)
				dir_len = 1;
		}
	}
	n = snprintf(buf, len, "%.*s%s%s.sock", (int)dir_len, dir,
		     dir_len == 1 && dir[0] == '/' ? "" : "/", c->name);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* Look @name up as a group name, or as a gid when it is all digits. Return: 0 or -errno. */
static int resolve_group(const char *name, gid_t *gid)
{
	struct group grp;
	struct group *res = NULL;
	size_t buflen = 4096;
	char *buf = NULL;
	uint64_t num;
	bool numeric = td_parse_u64(name, 0, (gid_t)-2, &num) == 0;
	int ret;

	for (;;) {
		char *grown = realloc(buf, buflen);

		if (!grown) {
			free(buf);
			return -ENOMEM;
		}
		buf = grown;
		if (numeric)
			ret = getgrgid_r((gid_t)num, &grp, buf, buflen, &res);
		else
			ret = getgrnam_r(name, &grp, buf, buflen, &res);
		if (ret != ERANGE || buflen >= (1U << 20))
			break;
		buflen *= 2;
	}
	if (ret == 0 && res)
		*gid = res->gr_gid;
	free(buf);
	if (ret)
		return -ret;
	return res ? 0 : -ENOENT;
}

/* Make *@path absolute (see absolute_path). Return: 0 or a message about key @id. */
static int make_absolute(char **path, enum key_id id, char *err, size_t errlen)
{
	char *abs;
	size_t len = strlen(*path);

	if ((*path)[0] == '/' && (len == 1 || (*path)[len - 1] != '/'))
		return 0;
	abs = absolute_path(*path);
	if (!abs) {
		if (errno == ENOMEM)
			return fail_nomem(err, errlen);
		return bad_value(id, NULL, *path, err, errlen, "%s", strerror(errno));
	}
	free(*path);
	*path = abs;
	return 0;
}

/* The image exists: it must be usable as the disk as it is. */
static int check_existing_image(const struct td_config *c, const struct stat *st, char *err,
				size_t errlen)
{
	char have[32], want[32], quoted[QUOTE_MAX];
	uint64_t bytes = (uint64_t)st->st_size;

	if (!S_ISREG(st->st_mode))
		return bad_value(KEY_DISK_IMAGE, NULL, c->image, err, errlen, "not a regular file");
	if (bytes == 0 || bytes % c->logical_block_size)
		return bad_value(KEY_DISK_IMAGE, NULL, c->image, err, errlen,
				 "its size (%llu bytes) is not a nonzero multiple of"
				 " logical_block_size (%u)",
				 (unsigned long long)bytes, c->logical_block_size);
	if (c->size_bytes && c->size_bytes != bytes) {
		td_format_size(c->size_bytes, want, sizeof(want));
		td_format_size(bytes, have, sizeof(have));
		return bad_value(KEY_DISK_SIZE, NULL, want, err, errlen,
				 "the existing image \"%s\" is %s (%llu bytes)",
				 escape(c->image, quoted, sizeof(quoted)), have,
				 (unsigned long long)bytes);
	}
	return 0;
}

/* The image is missing: the daemon will create it, which needs a size and a directory. */
static int check_new_image(const struct td_config *c, char *err, size_t errlen)
{
	char quoted[QUOTE_MAX];
	const char *slash = strrchr(c->image, '/');
	size_t dir_len = (size_t)(slash - c->image);
	struct stat st;
	char *dir;
	int ret = 0;

	assert(slash); /* made absolute before */
	if (c->size_bytes == 0)
		return bad_value(KEY_DISK_IMAGE, NULL, c->image, err, errlen,
				 "does not exist and no size was given");
	dir = strndup(c->image, dir_len ? dir_len : 1);
	if (!dir)
		return fail_nomem(err, errlen);
	escape(dir, quoted, sizeof(quoted));
	if (stat(dir, &st) < 0) {
		if (errno == ENOENT)
			ret = bad_value(KEY_DISK_IMAGE, NULL, c->image, err, errlen,
					"directory \"%s\" does not exist", quoted);
		else
			ret = bad_value(KEY_DISK_IMAGE, NULL, c->image, err, errlen,
					"directory \"%s\": %s", quoted, strerror(errno));
	} else if (!S_ISDIR(st.st_mode)) {
		ret = bad_value(KEY_DISK_IMAGE, NULL, c->image, err, errlen,
				"\"%s\" is not a directory", quoted);
	}
	free(dir);
	return ret;
}

int td_config_validate(struct td_config *c, char *err, size_t errlen)
{
	char sock[PATH_MAX];
	struct sockaddr_un addr;
	struct stat st;
	int ret;

	ret = td_config_check(c, err, errlen);
	if (ret)
		return ret;
	ret = make_absolute(&c->image, KEY_DISK_IMAGE, err, errlen);
	if (!ret)
		ret = make_absolute(&c->mountpoint, KEY_DISK_MOUNTPOINT, err, errlen);
	if (!ret && c->socket)
		ret = make_absolute(&c->socket, KEY_ADMIN_SOCKET, err, errlen);
	if (ret)
		return ret;

	if (stat(c->mountpoint, &st) < 0)
		return bad_value(KEY_DISK_MOUNTPOINT, NULL, c->mountpoint, err, errlen, "%s",
				 errno == ENOENT ? "does not exist" : strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return bad_value(KEY_DISK_MOUNTPOINT, NULL, c->mountpoint, err, errlen,
				 "not a directory");

	if (stat(c->image, &st) == 0)
		ret = check_existing_image(c, &st, err, errlen);
	else if (errno == ENOENT)
		ret = check_new_image(c, err, errlen);
	else
		ret = bad_value(KEY_DISK_IMAGE, NULL, c->image, err, errlen, "%s", strerror(errno));
	if (ret)
		return ret;

	c->socket_gid = (gid_t)-1;
	if (c->socket_group) {
		ret = resolve_group(c->socket_group, &c->socket_gid);
		if (ret == -ENOMEM)
			return fail_nomem(err, errlen);
		if (ret)
			return bad_value(KEY_ADMIN_SOCKET_GROUP, NULL, c->socket_group, err, errlen,
					 "%s", ret == -ENOENT ? "no such group" : strerror(-ret));
	}

	if (!c->socket) {
		if (td_config_default_socket(c, geteuid(), sock, sizeof(sock)))
			return fail(err, errlen, "[admin] socket: the default path is too long");
		c->socket = strdup(sock);
		if (!c->socket)
			return fail_nomem(err, errlen);
	}
	if (strlen(c->socket) >= sizeof(addr.sun_path))
		return bad_value(KEY_ADMIN_SOCKET, NULL, c->socket, err, errlen,
				 "longer than the %zu bytes a Unix socket path may have",
				 sizeof(addr.sun_path) - 1);
	return 0;
}
